"""Kafka's consumer-group apis on ``coordkit serve``, mapped onto the engine's group coordinator:

* :mod:`.lookup` — FindCoordinator;
* :mod:`.membership` — JoinGroup, SyncGroup, Heartbeat, LeaveGroup;
* :mod:`.offsets` — OffsetCommit, OffsetFetch;
* :mod:`.describe` — DescribeGroups, ListGroups;
* :mod:`.deletion` — DeleteGroups, OffsetDelete;
* :mod:`.consumer` — ConsumerGroupHeartbeat, ConsumerGroupDescribe (KIP-848's protocol);
* :mod:`.waiting` — awaiting the engine's long polls on the event loop.

:data:`GROUP_APIS` is what the dispatcher serves: api name → (lowest, highest version, handler).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from coordkit.protocol import Request
from coordkit.serve.apis.groups import consumer, deletion, describe, lookup, membership, offsets
from coordkit.serve.context import BrokerContext

GroupHandler = Callable[[BrokerContext, Request], Awaitable[Any]]

GROUP_APIS: dict[str, tuple[int, int, GroupHandler]] = {
    "FindCoordinator": (*lookup.VERSIONS, lookup.handle_find_coordinator),
    "JoinGroup": (*membership.JOIN_VERSIONS, membership.handle_join_group),
    "SyncGroup": (*membership.SYNC_VERSIONS, membership.handle_sync_group),
    "Heartbeat": (*membership.HEARTBEAT_VERSIONS, membership.handle_heartbeat),
    "LeaveGroup": (*membership.LEAVE_VERSIONS, membership.handle_leave_group),
    "OffsetCommit": (*offsets.COMMIT_VERSIONS, offsets.handle_offset_commit),
    "OffsetFetch": (*offsets.FETCH_VERSIONS, offsets.handle_offset_fetch),
    "DescribeGroups": (*describe.DESCRIBE_VERSIONS, describe.handle_describe_groups),
    "ListGroups": (*describe.LIST_VERSIONS, describe.handle_list_groups),
    "DeleteGroups": (*deletion.DELETE_VERSIONS, deletion.handle_delete_groups),
    "OffsetDelete": (*deletion.OFFSET_DELETE_VERSIONS, deletion.handle_offset_delete),
    "ConsumerGroupHeartbeat": (
        *consumer.HEARTBEAT_VERSIONS,
        consumer.handle_consumer_group_heartbeat,
    ),
    "ConsumerGroupDescribe": (*consumer.DESCRIBE_VERSIONS, consumer.handle_consumer_group_describe),
}

__all__ = ["GROUP_APIS"]
