"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848), on the engine's group coordinator.

Heartbeats are not long polls: each is answered at once with the member's epoch and, when it
changed, its assignment (topics by id, as the wire carries them). The coordinator computes the
target assignment with the server-side assignor the group prefers (``group.remote.assignor``),
among those ``group.consumer.assignors`` names.

Under an authorizer, as Kafka 4.4's ``KafkaApis``: a heartbeat needs Read on the group
(GROUP_AUTHORIZATION_FAILED) and Describe on every topic it subscribes to by name
(TOPIC_AUTHORIZATION_FAILED), both answered with the error code alone and nothing changed in the
group; ConsumerGroupDescribe answers GROUP_AUTHORIZATION_FAILED for a group without Describe,
and TOPIC_AUTHORIZATION_FAILED (no members) for a group whose assignments name a topic the
principal may not Describe; asked for, a group's authorized operations are the authorizer's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from coordkit.engine.groups.modern.member import Assignment
from coordkit.engine.groups.modern.protocol import (
    ConsumerGroupDescription,
    ConsumerGroupHeartbeatRequest,
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

HeartbeatResponse = messages.ConsumerGroupHeartbeatResponse
ResponseAssignment = nested(HeartbeatResponse, "Assignment")
ResponseTopicPartitions = nested(HeartbeatResponse, "TopicPartitions")
DescribeResponse = messages.ConsumerGroupDescribeResponse
DescribedGroup = nested(DescribeResponse, "DescribedGroup")
DescribedMember = nested(DescribeResponse, "Member")
DescribedAssignment = nested(DescribeResponse, "Assignment")
DescribedTopicPartitions = nested(DescribeResponse, "TopicPartitions")

HEARTBEAT_VERSIONS = (0, 1)
DESCRIBE_VERSIONS = (0, 1)
#: ConsumerGroupDescribe v1+ says which protocol each member speaks (1: consumer).
MEMBER_TYPE_VERSION = 1
CONSUMER_MEMBER_TYPE = 1
#: Kafka's message for a described group whose assignments name a topic the principal may not
#: Describe.
UNDESCRIBABLE_TOPICS = (
    "The group has described topic(s) that the client is not authorized to describe."
)


def _owned(body: Any) -> dict[uuid.UUID, tuple[int, ...]] | None:
    if body.topic_partitions is None:
        return None
    owned: dict[uuid.UUID, list[int]] = {}
    for topic in body.topic_partitions:
        owned.setdefault(topic.topic_id, []).extend(topic.partitions)
    return {t: tuple(ps) for t, ps in owned.items()}


def _request(request: Request) -> ConsumerGroupHeartbeatRequest:
    body = request.body
    return ConsumerGroupHeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=body.subscribed_topic_names,
        subscribed_topic_regex=body.subscribed_topic_regex if request.version >= 1 else None,
        server_assignor=body.server_assignor,
        owned=_owned(body),
        client_id=request.client_id or "",
        client_host=client_host.get(),
        version=request.version,
    )


def _partitions(
    cls: Any, assignment: Assignment, names: Mapping[uuid.UUID, str] | None
) -> list[Any]:
    out = []
    for topic_id, partitions in sorted(assignment.items()):
        entry = cls(topic_id=topic_id, partitions=sorted(partitions))
        if names is not None:
            entry.topic_name = names.get(topic_id, "")
        out.append(entry)
    return out


def _heartbeat_refusal(ctx: BrokerContext, request: Request) -> int | None:
    """Kafka 4.4's checks before the coordinator: Read on the group, then Describe on every
    topic subscribed to by name."""
    body = request.body
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return GROUP_AUTHORIZATION_FAILED
    subscribed = set(body.subscribed_topic_names or ())
    if subscribed and allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    subscribed) != subscribed:  # fmt: skip
        return TOPIC_AUTHORIZATION_FAILED
    return None


async def handle_consumer_group_heartbeat(ctx: BrokerContext, request: Request) -> Any:
    refused = _heartbeat_refusal(ctx, request)
    if refused is not None:
        return HeartbeatResponse(throttle_time_ms=0, error_code=refused)
    engine_request = _request(request)
    answer = await ctx.blocking(lambda: coordinator(ctx).consumer_group_heartbeat(engine_request))
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
    ctx: BrokerContext, groups: list[ConsumerGroupDescription]
) -> dict[uuid.UUID, str]:
    """Names of the topics the descriptions mention, from the broker's map of topic ids (the
    one Metadata, Fetch and OffsetCommit answer from)."""
    wanted = {t for g in groups for m in g.members for t in (*m.assignment, *m.target_assignment)}
    return await ctx.topic_names(wanted) if wanted else {}


async def handle_consumer_group_describe(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    # Kafka: Describe on each group (the refused answered first), then the coordinator's.
    may_describe = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, body.group_ids)
    refused = [DescribedGroup(group_id=g, error_code=GROUP_AUTHORIZATION_FAILED)
               for g in body.group_ids if g not in may_describe]  # fmt: skip
    group_ids = [g for g in body.group_ids if g in may_describe]

    groups = await ctx.blocking(lambda: coordinator(ctx).consumer_group_describe(group_ids))
    names = await _topic_names(ctx, groups)
    described = []
    for group in groups:
        members = []
        for m in group.members:
            member = DescribedMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                # Kafka answers "" for a member without a regex (its member keeps one, empty).
                subscribed_topic_regex=m.subscribed_topic_regex or "",
                assignment=DescribedAssignment(
                    topic_partitions=_partitions(DescribedTopicPartitions, m.assignment, names)
                ),
                target_assignment=DescribedAssignment(
                    topic_partitions=_partitions(
                        DescribedTopicPartitions, m.target_assignment, names
                    )
                ),
            )
            if request.version >= MEMBER_TYPE_VERSION:
                member.member_type = CONSUMER_MEMBER_TYPE
            members.append(member)
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
    return DescribeResponse(throttle_time_ms=0, groups=_hide_topics(ctx, refused + described))


def _hide_topics(ctx: BrokerContext, groups: list[Any]) -> list[Any]:
    """Kafka 4.4 under an authorizer: a group whose members' assignments (current or target)
    name a topic the principal may not Describe is answered TOPIC_AUTHORIZATION_FAILED with no
    members instead."""
    if ctx.authorizer is None:
        return groups

    def topics(group: Any) -> set[str]:
        return {t.topic_name for m in group.members
                for a in (m.assignment, m.target_assignment) for t in a.topic_partitions}  # fmt: skip

    named = set().union(*(topics(g) for g in groups))
    visible = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, named)
    return [
        g if topics(g) <= visible else DescribedGroup(
            group_id=g.group_id, error_code=TOPIC_AUTHORIZATION_FAILED,
            error_message=UNDESCRIBABLE_TOPICS, members=[])
        for g in groups
    ]  # fmt: skip
