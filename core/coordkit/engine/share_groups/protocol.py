"""ShareGroupHeartbeat and ShareGroupDescribe as the engine's coordinator sees them: plain values
the serve handlers build from the wire and turn back into Kafka's responses."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from attrs import field, frozen

from coordkit.engine.groups.protocol import ErrorCode

__all__ = [
    "LEAVE_GROUP_MEMBER_EPOCH",
    "ShareGroupDescription",
    "ShareGroupHeartbeatRequest",
    "ShareGroupHeartbeatResponse",
    "ShareMemberDescription",
]

#: Kafka's ``ShareGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH``.
LEAVE_GROUP_MEMBER_EPOCH = -1
JOIN_GROUP_MEMBER_EPOCH = 0


def _names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@frozen
class ShareGroupHeartbeatRequest:
    """:param rack_id: ``None`` when unchanged since the last heartbeat.
    :param subscribed_topic_names: ``None`` when unchanged since the last heartbeat."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = field(default=None, converter=_names)
    client_id: str = ""
    client_host: str = ""


@frozen
class ShareGroupHeartbeatResponse:
    """:param assignment: ``None`` when the member's assignment did not change (or an error)."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Mapping[uuid.UUID, tuple[int, ...]] | None = None


@frozen
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: Mapping[uuid.UUID, tuple[int, ...]]


@frozen
class ShareGroupDescription:
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[ShareMemberDescription, ...] = ()
