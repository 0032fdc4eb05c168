"""DescribeGroups and ListGroups: what the coordinator holds, as Kafka's coordinator shows it.

A Stable group shows its chosen protocol and every member's metadata and assignment bytes; in any
other state the protocol is empty and so are the members' bytes (Kafka's group summary). A group
that does not exist is ``Dead`` with no error; a group coordinated elsewhere gets NOT_COORDINATOR.
ListGroups answers the groups of the offsets partitions this broker coordinates (an admin client
asks every broker).
"""

from __future__ import annotations

from typing import Any

from coordkit.engine.groups import ErrorCode, GroupDescription, GroupState
from coordkit.errors import StoreError
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.groups.waiting import coordinator
from coordkit.serve.authorization import (
    GROUP_AUTHORIZATION_FAILED,
    NO_AUTHORIZED_OPERATIONS,
    allowed_names,
    authorized_operations,
    cluster_allowed,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

DescribeResponse = messages.DescribeGroupsResponse
DescribedGroup = nested(DescribeResponse, "DescribedGroup")
DescribedMember = nested(DescribeResponse, "DescribedGroupMember")
ListResponse = messages.ListGroupsResponse
ListedGroup = nested(ListResponse, "ListedGroup")

DESCRIBE_VERSIONS = (0, 6)
#: DescribeGroups v6+ answers GROUP_ID_NOT_FOUND for a group that is not there (KIP-1043).
DESCRIBE_NOT_FOUND_VERSION = 6
LIST_VERSIONS = (0, 5)
#: ListGroups v5's group type of classic groups.
CLASSIC = "classic"


def _described(group: GroupDescription, operations: int, version: int) -> Any:
    stable = group.state is GroupState.STABLE
    error = int(group.error)
    message = None
    if group.error is ErrorCode.GROUP_ID_NOT_FOUND or (
        version >= DESCRIBE_NOT_FOUND_VERSION and group.state is GroupState.DEAD and not error
    ):
        # A consumer group, or none at all: Dead, and from v6 on GROUP_ID_NOT_FOUND, as Kafka 4.
        if version >= DESCRIBE_NOT_FOUND_VERSION:
            error = errors.GROUP_ID_NOT_FOUND
            kind = "is not a classic group" if group.error else "not found"
            message = f"Group {group.group_id} {kind}."
        else:
            error = errors.NONE
    described = DescribedGroup(
        error_code=error,
        group_id=group.group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type,
        protocol_data=(group.protocol or "") if stable else "",
        members=[
            DescribedMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=(m.metadata or b"") if stable else b"",
                member_assignment=(m.raw_assignment or b"") if stable else b"",
            )
            for m in group.members
        ]
        if group.error == 0
        else [],
        authorized_operations=operations,
    )
    if version >= DESCRIBE_NOT_FOUND_VERSION:
        described.error_message = message
    return described


async def handle_describe_groups(ctx: BrokerContext, request: Request) -> Any:
    names = list(request.body.groups)
    # Kafka's KafkaApis: Describe on each group, or GROUP_AUTHORIZATION_FAILED and nothing else
    # (those answered first); the others described by the coordinator.
    allowed = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, names)
    refused = [DescribedGroup(error_code=GROUP_AUTHORIZATION_FAILED, group_id=name, group_state="",
                              protocol_type="", protocol_data="", members=[])
               for name in names if name not in allowed]  # fmt: skip
    names = [name for name in names if name in allowed]

    def describe() -> list[GroupDescription]:
        return [coordinator(ctx).describe_group(name) for name in names]

    found = await ctx.blocking(describe)
    asked = request.version >= 3 and bool(request.body.include_authorized_operations)
    described = [_described(g, NO_AUTHORIZED_OPERATIONS, request.version) for g in found]
    for group in described:
        if asked and group.error_code == errors.NONE:
            group.authorized_operations = authorized_operations(
                ctx, ResourceType.GROUP, group.group_id
            )
    return DescribeResponse(throttle_time_ms=0, groups=refused + described)


def _wanted(values: list[str] | None) -> set[str] | None:
    return {v.lower() for v in values} if values else None


async def handle_list_groups(ctx: BrokerContext, request: Request) -> Any:
    version = request.version
    states = _wanted(request.body.states_filter) if version >= 4 else None
    types = _wanted(request.body.types_filter) if version >= 5 else None
    try:
        listed = await ctx.blocking(coordinator(ctx).list_groups)
    except StoreError:
        return ListResponse(
            throttle_time_ms=0, error_code=errors.COORDINATOR_NOT_AVAILABLE, groups=[]
        )
    # Kafka's KafkaApis: Describe on the cluster lists every group, else those described.
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        visible = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                                [g.group_id for g in listed])  # fmt: skip
        listed = [g for g in listed if g.group_id in visible]
    groups = [
        ListedGroup(
            group_id=g.group_id,
            protocol_type=g.protocol_type,
            group_state=g.state_name,
            group_type=g.group_type,
        )
        for g in listed
        if (states is None or g.state_name.lower() in states)
        and (types is None or g.group_type in types)
    ]
    return ListResponse(throttle_time_ms=0, error_code=errors.NONE, groups=groups)
