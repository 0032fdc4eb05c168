"""The classic group protocol's requests, responses and error codes (Kafka's wire protocol, in
process).

Consumers call a :class:`~coordkit.engine.groups.coordinator.GroupCoordinator` with these values
the way Kafka's clients send FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, DescribeGroups and ListGroups. The in-process consumer takes two
shortcuts, both documented where they apply: a JoinGroup names its assignors (protocols) in
preference order with one :class:`Subscription` for all of them (Kafka sends opaque metadata bytes
per protocol, which the consumer fills with the same subscription anyway), and a new member gets
its member id in the first JoinGroup response (no MEMBER_ID_REQUIRED round trip, KIP-394).

Clients on the wire (``coordkit serve``) send what Kafka's clients send: opaque metadata bytes per
protocol (:attr:`JoinGroupRequest.metadata`) and, from the leader, opaque assignment bytes per
member (:attr:`SyncGroupRequest.raw_assignments`). The coordinator never parses them: it stores
them and hands them back (the leader gets every member's metadata for the chosen protocol, each
member its assignment bytes), as Kafka's coordinator does. ``require_known_member_id`` asks for
the MEMBER_ID_REQUIRED round trip of JoinGroup v4+.
"""

from __future__ import annotations

import concurrent.futures
import enum
from collections.abc import Iterable, Mapping

from attrs import field, frozen, validators

from coordkit.kafka.model import TopicPartition
from coordkit.strategies.offsets import OffsetAndMetadata

#: The generation of a member that has none yet (Kafka's ``NO_GENERATION``).
NO_GENERATION = -1
#: The member id of a member joining for the first time (Kafka's ``UNKNOWN_MEMBER_ID``).
UNKNOWN_MEMBER_ID = ""
#: The only protocol type the consumer uses.
CONSUMER_PROTOCOL_TYPE = "consumer"


class ErrorCode(enum.IntEnum):
    """Kafka's error codes (same numbers) that the group protocol answers with."""

    NONE = 0
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    UNKNOWN_SERVER_ERROR = -1
    INVALID_REQUEST = 42
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    # KIP-848's consumer group protocol.
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    INVALID_REGULAR_EXPRESSION = 128

    @property
    def retriable_with_coordinator_lookup(self) -> bool:
        """The coordinator moved or is not up yet: find it again, then retry."""
        return self in (
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        )


class GroupState(enum.Enum):
    """The classic group state machine (Kafka's ``GroupState``; values are Kafka's names)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


def _partitions(value: Iterable[TopicPartition]) -> frozenset[TopicPartition]:
    return frozenset(value)


def _topics(value: Iterable[str]) -> tuple[str, ...]:
    topics = tuple(dict.fromkeys(value))
    for topic in topics:
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"subscribed topics must be non-empty strings, got {topic!r}")
    return topics


def _names(value: Iterable[str]) -> tuple[str, ...]:
    names = tuple(value)
    if not names:
        raise ValueError("a member must offer at least one protocol (assignor name)")
    if len(set(names)) != len(names):
        raise ValueError(f"protocols are listed twice: {list(names)}")
    return names


_positive = validators.gt(0.0)


@frozen
class Subscription:
    """What a consumer tells the group leader (Kafka's ``ConsumerProtocolSubscription``).

    :param topics: subscribed topics.
    :param owned: partitions the member owns now (cooperative members; eager members revoke
        everything before joining and send none).
    :param generation: the generation in which it owned them.
    :param rack: ``client.rack``.
    """

    topics: tuple[str, ...] = field(converter=_topics)
    owned: frozenset[TopicPartition] = field(factory=frozenset, converter=_partitions)
    generation: int = NO_GENERATION
    rack: str | None = None


def _opaque(value: Mapping[str, bytes]) -> dict[str, bytes]:
    out = dict(value)
    for name, data in out.items():
        if not isinstance(data, bytes):
            raise ValueError(
                f"metadata of protocol {name!r} must be bytes, got {type(data).__name__}"
            )
    return out


@frozen
class FindCoordinatorResponse:
    error: ErrorCode
    coordinator: int | None = None


@frozen
class JoinGroupRequest:
    """Join (or rejoin) ``group_id``.

    :param member_id: ``""`` the first time; afterwards the id the coordinator gave.
    :param group_instance_id: ``group.instance.id`` of a static member.
    :param session_timeout: seconds without a heartbeat after which the member is removed.
    :param rebalance_timeout: seconds the coordinator waits for members to rejoin.
    :param protocols: assignor names, most preferred first.
    :param metadata: protocol name → the opaque metadata a wire client sent for it (empty for
        the in-process consumer, which sends :attr:`subscription` only).
    :param client_host: the client's address, as DescribeGroups shows it.
    :param require_known_member_id: JoinGroup v4+ without ``group_instance_id``: a new member
        gets MEMBER_ID_REQUIRED with its id and joins with that id (KIP-394).
    """

    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout: float = field(validator=_positive)
    rebalance_timeout: float = field(validator=_positive)
    protocols: tuple[str, ...] = field(converter=_names)
    subscription: Subscription
    client_id: str = ""
    protocol_type: str = CONSUMER_PROTOCOL_TYPE
    metadata: Mapping[str, bytes] = field(factory=dict, converter=_opaque)
    client_host: str = ""
    require_known_member_id: bool = False

    @metadata.validator
    def _check_metadata(self, _attribute: object, value: Mapping[str, bytes]) -> None:
        unknown = set(value) - set(self.protocols)
        if unknown:
            raise ValueError(f"metadata for protocols not offered: {sorted(unknown)}")


@frozen
class JoinedMember:
    """A member as the group leader receives it in the JoinGroup response.

    :param metadata: its opaque metadata for the chosen protocol (wire clients; ``None`` for the
        in-process consumer).
    """

    member_id: str
    group_instance_id: str | None
    subscription: Subscription
    metadata: bytes | None = None


@frozen
class JoinGroupResponse:
    """The end of a join round for one member.

    :param members: every member's subscription, for the leader only (empty for the others).
    :param skip_assignment: a static leader rejoined without a rebalance; it must not compute a
        new assignment (KIP-814) and gets its old one from SyncGroup.
    """

    error: ErrorCode
    generation: int = NO_GENERATION
    protocol: str | None = None
    leader: str | None = None
    member_id: str = UNKNOWN_MEMBER_ID
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False

    @property
    def is_leader(self) -> bool:
        return self.leader is not None and self.leader == self.member_id


def _assignments(
    value: Mapping[str, Iterable[TopicPartition]],
) -> dict[str, frozenset[TopicPartition]]:
    return {member: frozenset(parts) for member, parts in value.items()}


def _counts(value: Mapping[str, int]) -> dict[str, int]:
    return dict(value)


@frozen
class SyncGroupRequest:
    """Collect this member's assignment for ``generation``; the leader sends everyone's.

    :param assignments: member id → partitions (leader only).
    :param topic_partitions: partition counts of the topics the leader assigned from (leader
        only; the coordinator passes them to observers, which count unowned partitions).
    :param raw_assignments: member id → the opaque assignment a wire client's leader sent
        (handed back as it is in each member's SyncGroup response).
    :param protocol_type: the group's protocol type as the member knows it (SyncGroup v5+;
        ``None``: not checked).
    :param protocol: the chosen protocol as the member knows it (v5+; ``None``: not checked).
    """

    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None = None
    assignments: Mapping[str, frozenset[TopicPartition]] = field(
        factory=dict, converter=_assignments
    )
    topic_partitions: Mapping[str, int] = field(factory=dict, converter=_counts)
    raw_assignments: Mapping[str, bytes] = field(factory=dict, converter=_opaque)
    protocol_type: str | None = None
    protocol: str | None = None


@frozen
class SyncGroupResponse:
    """:param raw_assignment: the opaque assignment the leader sent for this member (wire
    clients), ``None`` when the leader sent partitions only."""

    error: ErrorCode
    assignment: frozenset[TopicPartition] = frozenset()
    protocol: str | None = None
    raw_assignment: bytes | None = None


@frozen
class HeartbeatRequest:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None = None


@frozen
class HeartbeatResponse:
    error: ErrorCode


@frozen
class LeaveGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None = None


@frozen
class LeaveGroupResponse:
    error: ErrorCode


def _offsets(
    value: Mapping[TopicPartition, OffsetAndMetadata],
) -> dict[TopicPartition, OffsetAndMetadata]:
    return dict(value)


@frozen
class OffsetCommitRequest:
    """Commit ``offsets``; fenced by ``generation`` and ``member_id`` (``-1`` and ``""`` for a
    consumer outside any group, accepted only while the group has no members)."""

    group_id: str
    generation: int
    member_id: str
    offsets: Mapping[TopicPartition, OffsetAndMetadata] = field(converter=_offsets)
    group_instance_id: str | None = None


@frozen
class OffsetCommitResponse:
    """The commit's error, and the partitions refused with another (a consumer group member's
    commit at an older epoch is checked partition by partition)."""

    error: ErrorCode
    partition_errors: Mapping[TopicPartition, ErrorCode] = field(factory=dict)


def _optional_partitions(
    value: Iterable[TopicPartition] | None,
) -> frozenset[TopicPartition] | None:
    return None if value is None else frozenset(value)


@frozen
class OffsetFetchRequest:
    """Committed offsets of ``group_id`` (of ``partitions``, or all when ``None``)."""

    group_id: str
    partitions: frozenset[TopicPartition] | None = field(
        default=None, converter=_optional_partitions
    )
    #: OffsetFetch v9+: the member asking, and its epoch (-1: not a member), checked against a
    #: consumer group's members.
    member_id: str | None = None
    member_epoch: int = -1


@frozen
class OffsetFetchResponse:
    error: ErrorCode
    offsets: Mapping[TopicPartition, OffsetAndMetadata] = field(factory=dict, converter=_offsets)


@frozen
class MemberDescription:
    """One member as DescribeGroups shows it (``metadata``: its opaque metadata for the chosen
    protocol, ``raw_assignment``: its opaque assignment; wire clients only)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    topics: tuple[str, ...]
    assignment: frozenset[TopicPartition]
    client_host: str = ""
    metadata: bytes | None = None
    raw_assignment: bytes | None = None


@frozen
class GroupDescription:
    """A group as its coordinator holds it (Kafka's DescribeGroups, plus the coordinator).

    :param coordinator: the broker that answered, ``None`` when no coordinator is available (the
        state is then ``Dead`` and the rest empty).
    :param error: why this broker cannot describe the group (NOT_COORDINATOR, ...); NONE for a
        group it coordinates, and for one that does not exist (``Dead``, as Kafka answers).
    """

    group_id: str
    state: GroupState
    generation: int = NO_GENERATION
    protocol_type: str = ""
    protocol: str | None = None
    leader: str | None = None
    coordinator: int | None = None
    members: tuple[MemberDescription, ...] = ()
    error: ErrorCode = ErrorCode.NONE

    def assignment(self) -> dict[str, frozenset[TopicPartition]]:
        """Member id → assigned partitions."""
        return {m.member_id: m.assignment for m in self.members}

    def member(self, member_id: str) -> MemberDescription:
        for member in self.members:
            if member.member_id == member_id:
                return member
        raise KeyError(f"group {self.group_id!r} has no member {member_id!r}")


@frozen
class GroupListing:
    """One group as ListGroups shows it."""

    group_id: str
    protocol_type: str
    state: GroupState | str
    #: Kafka's group type (ListGroups v5): ``classic`` or ``consumer``.
    group_type: str = "classic"

    @property
    def state_name(self) -> str:
        return self.state.value if isinstance(self.state, GroupState) else self.state


#: JoinGroup and SyncGroup are long polls: their answers come as futures.
JoinFuture = concurrent.futures.Future[JoinGroupResponse]
SyncFuture = concurrent.futures.Future[SyncGroupResponse]


def join_done(response: JoinGroupResponse) -> JoinFuture:
    """A JoinGroup answer available at once (an error, or a retried join)."""
    future: JoinFuture = concurrent.futures.Future()
    future.set_result(response)
    return future


def sync_done(response: SyncGroupResponse) -> SyncFuture:
    """A SyncGroup answer available at once."""
    future: SyncFuture = concurrent.futures.Future()
    future.set_result(response)
    return future
