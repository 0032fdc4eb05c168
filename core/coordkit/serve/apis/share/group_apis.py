"""ShareGroupHeartbeat and ShareGroupDescribe (KIP-932, v1: the versions Kafka 4.4's clients
negotiate), on the engine's group coordinator (:mod:`coordkit.engine.share_groups`).

Heartbeats are answered at once with the member's epoch and, when it changed, its assignment
(topics by id). The coordinator computes the target assignment with the share-partition assignor
``group.share.assignors`` names first (Kafka's ``simple`` by default, or any registered through
``coordkit_register_share_assignors``). Under an authorizer, as Kafka 4.4's ``KafkaApis``: a
heartbeat needs Read on the group (GROUP_AUTHORIZATION_FAILED) and Describe on every topic it
subscribes to (TOPIC_AUTHORIZATION_FAILED), nothing changed in the group; ShareGroupDescribe
answers GROUP_AUTHORIZATION_FAILED for a group without Describe (those first, as Kafka).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from coordkit.engine.share_groups.protocol import (
    ShareGroupDescription,
    ShareGroupHeartbeatRequest,
)
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages
from coordkit.serve.apis.groups.waiting import coordinator
from coordkit.serve.authorization import (
    GROUP_AUTHORIZATION_FAILED,
    NO_AUTHORIZED_OPERATIONS,
    TOPIC_AUTHORIZATION_FAILED,
    allowed,
    allowed_names,
    authorized_operations,
)
from coordkit.serve.classes import nested
from coordkit.serve.connection import client_host
from coordkit.serve.context import BrokerContext

HeartbeatResponse = messages.ShareGroupHeartbeatResponse
ResponseAssignment = nested(HeartbeatResponse, "Assignment")
ResponseTopicPartitions = nested(HeartbeatResponse, "TopicPartitions")
DescribeResponse = messages.ShareGroupDescribeResponse
DescribedGroup = nested(DescribeResponse, "DescribedGroup")
DescribedMember = nested(DescribeResponse, "Member")
DescribedAssignment = nested(DescribeResponse, "Assignment")
DescribedTopicPartitions = nested(DescribeResponse, "TopicPartitions")

HEARTBEAT_VERSIONS = (1, 1)
DESCRIBE_VERSIONS = (1, 1)


def _partitions(
    cls: Any, assignment: Mapping[uuid.UUID, tuple[int, ...]], names: Mapping[uuid.UUID, str] | None
) -> list[Any]:
    out = []
    for topic_id, partitions in sorted(assignment.items()):
        entry = cls(topic_id=topic_id, partitions=sorted(partitions))
        if names is not None:
            entry.topic_name = names.get(topic_id, "")
        out.append(entry)
    return out


def _refusal(ctx: BrokerContext, request: Request) -> int | None:
    body = request.body
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return GROUP_AUTHORIZATION_FAILED
    subscribed = set(body.subscribed_topic_names or ())
    if subscribed and allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    subscribed) != subscribed:  # fmt: skip
        return TOPIC_AUTHORIZATION_FAILED
    return None


async def handle_share_group_heartbeat(ctx: BrokerContext, request: Request) -> Any:
    refused = _refusal(ctx, request)
    if refused is not None:
        return HeartbeatResponse(throttle_time_ms=0, error_code=refused)
    body = request.body
    engine_request = ShareGroupHeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        rack_id=body.rack_id,
        subscribed_topic_names=body.subscribed_topic_names,
        client_id=request.client_id or "",
        client_host=client_host.get(),
    )
    answer = await ctx.blocking(lambda: coordinator(ctx).share_group_heartbeat(engine_request))
    response: Any = HeartbeatResponse(
        throttle_time_ms=0,
        error_code=int(answer.error),
        error_message=answer.message,
        member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        heartbeat_interval_ms=answer.heartbeat_interval_ms,
        assignment=None,
    )
    if answer.assignment is not None:
        response.assignment = ResponseAssignment(
            topic_partitions=_partitions(ResponseTopicPartitions, answer.assignment, None)
        )
    return response


async def _topic_names(
    ctx: BrokerContext, groups: list[ShareGroupDescription]
) -> dict[uuid.UUID, str]:
    wanted = {t for g in groups for m in g.members for t in m.assignment}
    return await ctx.topic_names(wanted) if wanted else {}


async def handle_share_group_describe(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    group_ids = list(body.group_ids)
    may_describe = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_ids)
    asked = [g for g in group_ids if g in may_describe]
    groups = await ctx.blocking(lambda: coordinator(ctx).share_group_describe(asked))
    names = await _topic_names(ctx, groups)
    # Kafka's KafkaApis: the groups refused Describe answered first, then the coordinator's.
    described = [
        DescribedGroup(error_code=GROUP_AUTHORIZATION_FAILED, group_id=group_id, group_state="",
                       members=[], authorized_operations=NO_AUTHORIZED_OPERATIONS)
        for group_id in group_ids if group_id not in may_describe
    ]  # fmt: skip
    for group in groups:
        members = [
            DescribedMember(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                assignment=DescribedAssignment(
                    topic_partitions=_partitions(DescribedTopicPartitions, m.assignment, names)
                ),
            )
            for m in group.members
        ]
        described.append(
            DescribedGroup(
                error_code=int(group.error),
                error_message=group.message,
                group_id=group.group_id,
                group_state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.assignor_name,
                members=members,
                authorized_operations=(
                    authorized_operations(ctx, ResourceType.GROUP, group.group_id)
                    if body.include_authorized_operations and not group.error
                    else NO_AUTHORIZED_OPERATIONS
                ),
            )
        )
    return DescribeResponse(throttle_time_ms=0, groups=described)


#: api name → (lowest version, highest version, handler).
SHARE_GROUP_APIS: dict[str, tuple[int, int, Any]] = {
    "ShareGroupHeartbeat": (*HEARTBEAT_VERSIONS, handle_share_group_heartbeat),
    "ShareGroupDescribe": (*DESCRIBE_VERSIONS, handle_share_group_describe),
}
