"""The consumer group protocol's requests and answers as the engine's coordinator takes them
(ConsumerGroupHeartbeat and ConsumerGroupDescribe, with topics by id as on the wire)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from attrs import field, frozen

from coordkit.engine.groups.modern.member import Assignment, MemberState
from coordkit.engine.groups.protocol import ErrorCode

#: ConsumerGroupHeartbeat v1+: the client makes its member id (KIP-1082).
CLIENT_MEMBER_ID_VERSION = 1


def _owned(
    value: Mapping[uuid.UUID, Iterable[int]] | None,
) -> dict[uuid.UUID, tuple[int, ...]] | None:
    return None if value is None else {t: tuple(ps) for t, ps in value.items()}


def _optional_names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@frozen
class ConsumerGroupHeartbeatRequest:
    """A ConsumerGroupHeartbeat: every optional field ``None`` (or ``-1``) when unchanged."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = field(default=None, converter=_optional_names)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    #: What the member owns now (``None``: unchanged since its last heartbeat).
    owned: dict[uuid.UUID, tuple[int, ...]] | None = field(default=None, converter=_owned)
    client_id: str = ""
    client_host: str = ""
    version: int = CLIENT_MEMBER_ID_VERSION


@frozen
class ConsumerGroupHeartbeatResponse:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: The member's assignment (only when it changed, or the request was a full one).
    assignment: Assignment | None = None


@frozen
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: Assignment
    target_assignment: Assignment
    state: MemberState


@frozen
class ConsumerGroupDescription:
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    state: str = "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[ConsumerMemberDescription, ...] = ()


class HeartbeatError(Exception):
    """A request the coordinator refuses: Kafka's error code and message."""

    def __init__(self, error: ErrorCode, message: str):
        super().__init__(message)
        self.error = error
        self.message = message
