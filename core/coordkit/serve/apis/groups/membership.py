"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup, mapped onto the engine coordinator.

Protocol metadata and assignments travel as the opaque bytes clients send: the coordinator stores
them and hands them back (the leader gets every member's metadata for the chosen protocol, each
member the bytes the leader sent for it). For ``consumer`` groups the bytes are also read (see
:func:`read_subscription`, :func:`read_assignment`, with the one consumer-protocol codec,
:mod:`coordkit.protocol.consumer`) so that the engine can describe the group.
JoinGroup and SyncGroup are long polls, awaited off the event loop.
"""

from __future__ import annotations

import logging
from typing import Any

from coordkit.engine.groups import ErrorCode, Subscription
from coordkit.engine.groups.protocol import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.kafka.model import TopicPartition
from coordkit.protocol import Request, messages
from coordkit.protocol.consumer import UserDataError, decode_assignment, decode_subscription
from coordkit.serve import errors
from coordkit.serve.apis.groups.waiting import answer_of, coordinator
from coordkit.serve.authorization import GROUP_AUTHORIZATION_FAILED, allowed
from coordkit.serve.classes import nested
from coordkit.serve.connection import client_host
from coordkit.serve.context import BrokerContext
from coordkit.support.terminal import visible

log = logging.getLogger("coordkit.serve")

JoinResponse = messages.JoinGroupResponse
JoinedMember = nested(JoinResponse, "JoinGroupResponseMember")
SyncResponse = messages.SyncGroupResponse
HeartbeatResponse = messages.HeartbeatResponse
LeaveResponse = messages.LeaveGroupResponse
LeftMember = nested(LeaveResponse, "MemberResponse")

JOIN_VERSIONS = (0, 9)
SYNC_VERSIONS = (0, 5)
HEARTBEAT_VERSIONS = (0, 4)
LEAVE_VERSIONS = (0, 5)
#: JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED (KIP-394).
MEMBER_ID_REQUIRED_VERSION = 4
#: JoinGroup v7+ answers the protocol type, and the protocol name may be null.
JOIN_PROTOCOL_TYPE_VERSION = 7
#: LeaveGroup v3+ names a batch of members (KIP-345).
BATCH_LEAVE_VERSION = 3
#: Errors LeaveGroup v3+ answers for the whole request rather than per member.
_GROUP_LEVEL = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.INVALID_GROUP_ID,
    }
)


def _seconds(ms: int) -> float:
    return ms / 1000


def _join_request(request: Request) -> JoinGroupRequest | int:
    """The engine's JoinGroup, or the error code that refuses it at once."""
    body = request.body
    if not body.group_id:
        return errors.INVALID_GROUP_ID
    if body.session_timeout_ms <= 0:
        return errors.INVALID_SESSION_TIMEOUT
    protocols: dict[str, bytes] = {}
    for protocol in body.protocols:
        protocols.setdefault(protocol.name, bytes(protocol.metadata))
    if not body.protocol_type or not protocols or "" in protocols:
        return errors.INCONSISTENT_GROUP_PROTOCOL
    rebalance_ms = body.rebalance_timeout_ms if request.version >= 1 else -1
    if rebalance_ms <= 0:
        rebalance_ms = body.session_timeout_ms  # v0: the session timeout bounds the rebalance
    subscription = Subscription(())
    if body.protocol_type == CONSUMER:
        subscription = read_subscription(next(iter(protocols.values())))
    instance = body.group_instance_id if request.version >= 5 else None
    return JoinGroupRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        group_instance_id=instance,
        session_timeout=_seconds(body.session_timeout_ms),
        rebalance_timeout=_seconds(rebalance_ms),
        protocols=tuple(protocols),
        subscription=subscription,
        client_id=request.client_id or "",
        client_host=client_host.get(),
        protocol_type=body.protocol_type,
        metadata=protocols,
        require_known_member_id=request.version >= MEMBER_ID_REQUIRED_VERSION,
    )


def _join_response(request: Request, answer: JoinGroupResponse) -> Any:
    version = request.version
    failed = answer.error is not ErrorCode.NONE
    protocol = answer.protocol
    if protocol is None and version < JOIN_PROTOCOL_TYPE_VERSION:
        protocol = ""
    response: Any = JoinResponse(
        throttle_time_ms=0,
        error_code=int(answer.error),
        generation_id=-1 if failed else answer.generation,
        protocol_name=protocol,
        leader=answer.leader or "",
        skip_assignment=answer.skip_assignment,
        member_id=answer.member_id or request.body.member_id,
        members=[
            JoinedMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata if m.metadata is not None else b"",
            )
            for m in answer.members
        ],
    )
    if version >= JOIN_PROTOCOL_TYPE_VERSION:
        response.protocol_type = None if failed else request.body.protocol_type
    return response


def _may_read(ctx: BrokerContext, group: str) -> bool:
    """Kafka's KafkaApis: the classic group apis need Read on the group."""
    return allowed(ctx, AclOperation.READ, ResourceType.GROUP, group)


async def handle_join_group(ctx: BrokerContext, request: Request) -> Any:
    if not _may_read(ctx, request.body.group_id):
        refused = _join_response(request, JoinGroupResponse(ErrorCode.UNKNOWN_SERVER_ERROR))
        refused.error_code = GROUP_AUTHORIZATION_FAILED
        return refused
    built = _join_request(request)
    if isinstance(built, int):
        return _join_response(request, JoinGroupResponse(ErrorCode(built)))
    future = await ctx.blocking(lambda: coordinator(ctx).join_group(built))
    answer = await answer_of(future)
    if answer.error not in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
        log.debug(
            "broker %s: JoinGroup of %s in %s: %s",
            ctx.broker_id,
            visible(built.member_id or "a new member"),
            visible(built.group_id),
            answer.error.name,
        )
    return _join_response(request, answer)


#: The protocol type of consumer groups: their metadata and assignments are Kafka's consumer
#: protocol, which the coordinator reads (only) to describe the group.
CONSUMER = "consumer"


def read_subscription(data: bytes) -> Subscription:
    """The topics, owned partitions, generation and rack of a member's subscription, for the
    engine's observers, persisted metadata and ``coordkit group describe``; an empty one when the
    bytes are not a consumer subscription (the group works the same: they are handed back as
    they came)."""
    try:
        found = decode_subscription(data, lenient=True)
    except UserDataError:
        return Subscription(())
    owned = [TopicPartition(t, p) for t, partitions in found.owned.items() for p in partitions]
    return Subscription(tuple(t for t in found.topics if t), owned, found.generation, found.rack)


def read_assignment(data: bytes) -> frozenset[TopicPartition]:
    """The partitions of a member's assignment; none when the bytes are not one."""
    try:
        found = decode_assignment(data, lenient=True)
    except UserDataError:
        return frozenset()
    return frozenset(
        TopicPartition(t, p) for t, partitions in found.partitions.items() for p in partitions
    )


def _assigned(
    raw: dict[str, bytes], protocol_type: str | None
) -> dict[str, frozenset[TopicPartition]]:
    if protocol_type not in (None, CONSUMER):
        return {}
    return {member_id: read_assignment(data) for member_id, data in raw.items()}


def _sync_request(ctx: BrokerContext, request: Request) -> SyncGroupRequest:
    """The engine's SyncGroup (the partition counts of the assigned topics read from the store:
    worker thread)."""
    body = request.body
    version = request.version
    raw = {a.member_id: bytes(a.assignment) for a in body.assignments}
    protocol_type = body.protocol_type if version >= 5 else None
    assignments = _assigned(raw, protocol_type)
    topics = sorted({tp.topic for parts in assignments.values() for tp in parts})
    counts = coordinator(ctx).topic_partitions(topics) if topics else {}
    return SyncGroupRequest(
        group_id=body.group_id,
        generation=body.generation_id,
        member_id=body.member_id,
        group_instance_id=body.group_instance_id if version >= 3 else None,
        assignments=assignments,
        topic_partitions=counts,
        raw_assignments=raw,
        protocol_type=protocol_type,
        protocol=body.protocol_name if version >= 5 else None,
    )


async def handle_sync_group(ctx: BrokerContext, request: Request) -> Any:
    if not _may_read(ctx, request.body.group_id):
        return SyncResponse(throttle_time_ms=0, error_code=GROUP_AUTHORIZATION_FAILED,
                            assignment=b"")  # fmt: skip

    def call() -> Any:
        return coordinator(ctx).sync_group(_sync_request(ctx, request))

    answer = await answer_of(await ctx.blocking(call))
    response: Any = SyncResponse(
        throttle_time_ms=0,
        error_code=int(answer.error),
        assignment=answer.raw_assignment or b"",
    )
    if request.version >= 5 and answer.error is ErrorCode.NONE:
        response.protocol_type = request.body.protocol_type
        response.protocol_name = answer.protocol
    return response


async def handle_heartbeat(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    if not _may_read(ctx, body.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=GROUP_AUTHORIZATION_FAILED)
    beat = HeartbeatRequest(
        body.group_id,
        body.generation_id,
        body.member_id,
        body.group_instance_id if request.version >= 3 else None,
    )
    answer = await ctx.blocking(lambda: coordinator(ctx).heartbeat(beat))
    return HeartbeatResponse(throttle_time_ms=0, error_code=int(answer.error))


async def handle_leave_group(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    if not _may_read(ctx, body.group_id):
        return LeaveResponse(throttle_time_ms=0, error_code=GROUP_AUTHORIZATION_FAILED, members=[])
    if request.version < BATCH_LEAVE_VERSION:
        leave = LeaveGroupRequest(body.group_id, body.member_id)
        answer = await ctx.blocking(lambda: coordinator(ctx).leave_group(leave))
        return LeaveResponse(throttle_time_ms=0, error_code=int(answer.error))
    leaving = [
        LeaveGroupRequest(body.group_id, m.member_id, m.group_instance_id) for m in body.members
    ]

    def leave_all() -> list[ErrorCode]:
        return [coordinator(ctx).leave_group(one).error for one in leaving]

    codes = await ctx.blocking(leave_all)
    group_error = next((code for code in codes if code in _GROUP_LEVEL), None)
    if group_error is not None:
        return LeaveResponse(throttle_time_ms=0, error_code=int(group_error), members=[])
    return LeaveResponse(
        throttle_time_ms=0,
        error_code=errors.NONE,
        members=[
            LeftMember(
                member_id=one.member_id,
                group_instance_id=one.group_instance_id,
                error_code=int(code),
            )
            for one, code in zip(leaving, codes, strict=True)
        ],
    )
