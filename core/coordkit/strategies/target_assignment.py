"""The server-side assignor contract of KIP-848: the group coordinator computes a target assignment.

Mirrors Kafka 4's ``org.apache.kafka.coordinator.group.api.assignor``: a :class:`GroupSpec` (every
member's subscribed topic ids, rack, instance id and current target assignment), a
:class:`TopicDescriber` (Kafka's ``SubscribedTopicDescriber``: partition counts and partition
racks) and, out, a :class:`TargetAssignment` (member → topic id → partitions). A
:class:`ServerAssignor` is what ``group.remote.assignor`` names.

Kafka's coordinator iterates hash maps; an assignor's result can depend on that order (``uniform``
hands the larger quotas to the first members it meets). Here the orders are part of the input:
``GroupSpec.members`` is listed in the order ``memberIds()`` iterates, a member's current target in
the order its topics and partitions iterate. A current target lists what present members hold: a
partition held by two members, or past its topic's count, is a malformed group
(:class:`MalformedGroupError`).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs
import numpy as np
from attrs import field, frozen

from coordkit.errors import CoordkitError
from coordkit.strategies.partition_columns import TopicIndexer, TopicPartitions

__all__ = [
    "GroupSpec",
    "MalformedGroupError",
    "MemberAssignment",
    "MemberSpec",
    "PartitionAssignorError",
    "ServerAssignor",
    "ServerAssignorTraits",
    "SubscriptionType",
    "TargetAssignment",
    "TopicDescriber",
    "TopicDescription",
    "current_owners",
    "java_hash_set_order",
    "topic_id_of",
]

#: Namespace of :func:`topic_id_of` (topic ids made up from names, for tests and examples).
_TOPIC_ID_NAMESPACE = uuid.UUID("6c6f6f6b-2d63-6f6f-7264-6b6974000033")


class PartitionAssignorError(CoordkitError):
    """Kafka's ``PartitionAssignorException``: the assignor cannot assign this group (a member
    subscribes to a topic the describer does not know)."""


class MalformedGroupError(CoordkitError, ValueError):
    """A group spec no coordinator would build; the message names what is wrong."""


class SubscriptionType(enum.Enum):
    """Kafka's ``SubscriptionType``: do all members subscribe to the same topics?"""

    HOMOGENEOUS = "homogeneous"
    HETEROGENEOUS = "heterogeneous"


def topic_id_of(name: str) -> uuid.UUID:
    """A topic id derived from a topic name (same name, same id): for groups built by hand."""
    return uuid.uuid5(_TOPIC_ID_NAMESPACE, name)


def _racks(value: Iterable[Iterable[str]] | None) -> tuple[frozenset[str], ...] | None:
    return None if value is None else tuple(frozenset(racks) for racks in value)


def _loads(value: Iterable[float] | None) -> tuple[float, ...] | None:
    return None if value is None else tuple(float(x) for x in value)


@frozen
class TopicDescription:
    """One topic as the coordinator's metadata image describes it.

    :param partition_racks: the racks holding a replica of each partition (``None``: unknown).
    :param loads: per-partition load for load-aware assignors (``None``: every partition weighs 1).
    """

    topic_id: uuid.UUID
    name: str
    partitions: int = field()
    partition_racks: tuple[frozenset[str], ...] | None = field(default=None, converter=_racks)
    loads: tuple[float, ...] | None = field(default=None, converter=_loads)

    @partitions.validator
    def _check_partitions(self, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise MalformedGroupError(
                f"topic {self.name!r}: partitions must be a non-negative integer, got {value!r}"
            )

    def __attrs_post_init__(self) -> None:
        for what, values in (("partition_racks", self.partition_racks), ("loads", self.loads)):
            if values is not None and len(values) != self.partitions:
                raise MalformedGroupError(
                    f"topic {self.name!r}: {what} lists {len(values)} partitions, "
                    f"the topic has {self.partitions}"
                )


def _describer_topics(
    value: Mapping[uuid.UUID, TopicDescription] | Iterable[TopicDescription],
) -> dict[uuid.UUID, TopicDescription]:
    items = value.values() if isinstance(value, Mapping) else value
    return {t.topic_id: t for t in items}


@frozen
class TopicDescriber:
    """Kafka's ``SubscribedTopicDescriber``: what the assignor may know of the topics."""

    topics: Mapping[uuid.UUID, TopicDescription] = field(converter=_describer_topics)

    @classmethod
    def from_counts(
        cls,
        partitions: Mapping[str, int],
        racks: Mapping[str, Iterable[Iterable[str]]] | None = None,
    ) -> TopicDescriber:
        """Topics by name (ids from :func:`topic_id_of`), optionally with partition racks."""
        racks = racks or {}
        return cls(
            TopicDescription(topic_id_of(n), n, c, racks.get(n)) for n, c in partitions.items()
        )

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        """The partition count, ``-1`` for a topic the metadata does not hold (as Kafka's)."""
        topic = self.topics.get(topic_id)
        return -1 if topic is None else topic.partitions

    def racks_for_partition(self, topic_id: uuid.UUID, partition: int) -> frozenset[str]:
        """The racks holding a replica of the partition (empty when unknown)."""
        topic = self.topics.get(topic_id)
        if topic is None or topic.partition_racks is None:
            return frozenset()
        return topic.partition_racks[partition]

    def name(self, topic_id: uuid.UUID) -> str:
        topic = self.topics.get(topic_id)
        return str(topic_id) if topic is None else topic.name


def _unique_ids(topics: Iterable[uuid.UUID]) -> tuple[uuid.UUID, ...]:
    return tuple(dict.fromkeys(topics))


def _member_partitions(value: Mapping[uuid.UUID, Iterable[int]]) -> TopicPartitions:
    return TopicPartitions.of(value)


@frozen
class MemberSpec:
    """One member as the coordinator hands it over (Kafka's ``MemberSubscription`` and the member's
    current ``MemberAssignment``).

    :param subscribed_topic_ids: the topics it subscribes to that exist, in iteration order.
    :param assignment: its current target, ``{topic id: (partition, ...)}`` in iteration order.
    """

    subscribed_topic_ids: tuple[uuid.UUID, ...] = field(converter=_unique_ids)
    rack: str | None = None
    instance_id: str | None = None
    assignment: TopicPartitions = field(factory=TopicPartitions.empty, converter=_member_partitions)


def _members(value: Mapping[str, MemberSpec]) -> dict[str, MemberSpec]:
    return dict(value)


@frozen
class GroupSpec:
    """Kafka's ``GroupSpec``: the members, listed in the order the coordinator iterates them."""

    members: Mapping[str, MemberSpec] = field(converter=_members)
    #: :attr:`subscription_type`, worked out on first use (Kafka's coordinator keeps it as the
    #: members change; a spec never changes).
    _subscription_type: SubscriptionType | None = field(
        default=None, init=False, eq=False, repr=False
    )
    #: :func:`current_owners` for the last describer asked about: Kafka's ``GroupSpecImpl`` is
    #: handed this index (partition -> member) by the coordinator, built before ``assign``.
    _owners: tuple[TopicDescriber, dict[uuid.UUID, np.ndarray]] | None = field(
        default=None, init=False, eq=False, repr=False
    )

    def member_ids(self) -> list[str]:
        return list(self.members)

    @property
    def subscription_type(self) -> SubscriptionType:
        """Homogeneous when every member subscribes to the same set of topics."""
        if self._subscription_type is None:
            object.__setattr__(self, "_subscription_type", self._find_subscription_type())
        assert self._subscription_type is not None
        return self._subscription_type

    def _find_subscription_type(self) -> SubscriptionType:
        # Equal tuples first: hashing every member's topic ids into a set costs a second at
        # 2,000 members of 500 topics.
        first: tuple[uuid.UUID, ...] | None = None
        first_set: frozenset[uuid.UUID] | None = None
        for member in self.members.values():
            ids = member.subscribed_topic_ids
            if first is None:
                first = ids
            elif ids != first:
                first_set = first_set or frozenset(first)
                if frozenset(ids) != first_set:
                    return SubscriptionType.HETEROGENEOUS
        return SubscriptionType.HOMOGENEOUS

    def subscribed_topic_ids(self) -> set[uuid.UUID]:
        return {t for m in self.members.values() for t in m.subscribed_topic_ids}

    def with_assignment(self, target: TargetAssignment) -> GroupSpec:
        """The same members with ``target`` as their current target (members it omits: none)."""
        return GroupSpec(
            {
                m: attrs.evolve(s, assignment=target.members[m].partitions if m in target else {})
                for m, s in self.members.items()
            }
        )


def current_owners(group: GroupSpec, topics: TopicDescriber) -> dict[uuid.UUID, np.ndarray]:
    """For every described topic, each partition's current owner (an index into
    ``group.member_ids()``, ``-1`` for none): Kafka's ``isPartitionAssigned`` in columns.

    The arrays are read-only and kept on ``group`` for the next call with the same ``topics``.

    :raises MalformedGroupError: a partition held by two members, or past its topic's count.
    """
    cached = group._owners
    if cached is not None and cached[0] is topics:
        return cached[1]
    described = list(topics.topics)
    counts = np.array([topics.topics[t].partitions for t in described], dtype=np.int64)
    offsets = np.zeros(len(described) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    owners = np.full(int(offsets[-1]), -1, dtype=np.int32)
    held = _held_runs(group, TopicIndexer(described))
    if held is not None:
        members, run_topics, lengths, partitions = held
        known = run_topics >= 0  # a deleted topic: nobody's to keep
        if not known.all():
            keep = np.repeat(known, lengths)
            members, run_topics, lengths = members[known], run_topics[known], lengths[known]
            partitions = partitions[keep]
        if lengths.size:
            _check_in_range(group, topics, described, counts, members, run_topics, lengths,
                            partitions)  # fmt: skip
            flat = partitions + np.repeat(offsets[run_topics], lengths)
            owners[flat] = np.repeat(members, lengths)
            if np.count_nonzero(owners >= 0) != flat.size:
                _duplicate(group, topics, described, offsets, flat, np.repeat(members, lengths))
    owners.flags.writeable = False
    by_topic = {t: owners[offsets[i] : offsets[i + 1]] for i, t in enumerate(described)}
    object.__setattr__(group, "_owners", (topics, by_topic))
    return by_topic


_HeldRuns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _held_runs(group: GroupSpec, indexer: TopicIndexer) -> _HeldRuns | None:
    """Every member's current target as runs: the member's index, the topic's position in the
    indexer (``-1``: not described) and the run's length per run; the partitions, run after run."""
    members: list[int] = []
    runs_per_member: list[int] = []
    run_topics: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    partitions: list[np.ndarray] = []
    for index, spec in enumerate(group.members.values()):
        runs = spec.assignment
        if not len(runs):
            continue
        members.append(index)
        runs_per_member.append(len(runs))
        run_topics.append(indexer.runs(runs))
        bounds = runs.bounds
        starts.append(bounds[:-1])
        ends.append(bounds[1:])
        partitions.append(runs.partitions[bounds[0] : bounds[-1]])
    if not members:
        return None
    return (
        np.repeat(np.asarray(members, dtype=np.int64), runs_per_member),
        np.concatenate(run_topics),
        np.concatenate(ends) - np.concatenate(starts),
        np.concatenate(partitions),
    )


def _check_in_range(
    group: GroupSpec,
    topics: TopicDescriber,
    described: list[uuid.UUID],
    counts: np.ndarray,
    members: np.ndarray,
    run_topics: np.ndarray,
    lengths: np.ndarray,
    partitions: np.ndarray,
) -> None:
    """Raise for the first run holding a partition below 0 or past its topic's count."""
    run_starts = np.concatenate(([0], np.cumsum(lengths[:-1])))
    lowest = np.minimum.reduceat(partitions, run_starts)
    highest = np.maximum.reduceat(partitions, run_starts)
    bad_runs = np.flatnonzero((lowest < 0) | (highest >= counts[run_topics]))
    if bad_runs.size:
        run = int(bad_runs[0])
        count = int(counts[run_topics[run]])
        held = partitions[run_starts[run] : run_starts[run] + lengths[run]].tolist()
        bad = next(p for p in held if not 0 <= p < count)
        topic_id = described[int(run_topics[run])]
        raise MalformedGroupError(
            f"member {group.member_ids()[int(members[run])]!r} holds partition {bad} of topic "
            f"{topics.name(topic_id)!r}, which has {count} partitions"
        )


def _duplicate(
    group: GroupSpec,
    topics: TopicDescriber,
    described: list[uuid.UUID],
    offsets: np.ndarray,
    flat: np.ndarray,
    members: np.ndarray,
) -> None:
    """Raise naming a partition listed twice (``flat`` holds one, as topic offset + partition)."""
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    second = int(order[np.flatnonzero(ordered[1:] == ordered[:-1])[0] + 1])
    topic = int(np.searchsorted(offsets, flat[second], side="right")) - 1
    partition = int(flat[second] - offsets[topic])
    member = group.member_ids()[int(members[second])]
    raise MalformedGroupError(
        f"partition {topics.name(described[topic])}-{partition} is in the current target of two "
        f"members (or twice in {member!r}'s)"
    )


def java_hash_set_order(topic_ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    """The order in which Java's ``new HashSet<>(topicIds)`` iterates Kafka ``Uuid``\\ s.

    ``HashSet(Collection)`` sizes its table to ``max(n / .75 + 1, 16)`` rounded up to a power of
    two, so it never resizes; iteration goes bucket by bucket (``hash ^ hash >>> 16``, masked),
    insertion order within a bucket. (A bucket of eight or more ids turns into a tree in Java; ids
    are random, so that is not modelled.)
    """
    ids = list(dict.fromkeys(topic_ids))
    wanted = max(int(len(ids) / 0.75) + 1, 16)
    capacity = 1 << (wanted - 1).bit_length()

    def bucket(topic_id: uuid.UUID) -> int:
        value = topic_id.int
        h = (value >> 64) ^ (value & 0xFFFF_FFFF_FFFF_FFFF)
        code = ((h >> 32) ^ h) & 0xFFFF_FFFF
        return (code ^ (code >> 16)) & (capacity - 1)

    return sorted(ids, key=bucket)  # stable: insertion order within a bucket


def java_uuid_key(topic_id: uuid.UUID) -> tuple[int, int]:
    """Sort key equal to Kafka's ``Uuid.compareTo`` (signed most, then least significant bits)."""
    value = topic_id.int

    def signed(bits: int) -> int:
        return bits - (1 << 64) if bits >= 1 << 63 else bits

    return signed(value >> 64), signed(value & 0xFFFF_FFFF_FFFF_FFFF)


@frozen
class MemberAssignment:
    """One member's target: ``{topic id: (partition, ...)}`` (topics without partitions dropped),
    held as columns (:class:`~coordkit.strategies.partition_columns.TopicPartitions`)."""

    partitions: TopicPartitions = field(converter=_member_partitions)

    @property
    def total(self) -> int:
        return self.partitions.total

    def as_sets(self) -> dict[uuid.UUID, frozenset[int]]:
        return {t: frozenset(ps) for t, ps in self.partitions.items()}


def _assignments(value: Mapping[str, MemberAssignment | Mapping[Any, Any]]) -> dict[str, Any]:
    return {
        m: a if isinstance(a, MemberAssignment) else MemberAssignment(a) for m, a in value.items()
    }


@frozen(eq=False)
class TargetAssignment:
    """Kafka's ``GroupAssignment``: every member's target. Equal when every member gets the same
    partitions, whatever order they are listed in."""

    members: Mapping[str, MemberAssignment] = field(converter=_assignments)

    def __contains__(self, member: object) -> bool:
        return member in self.members

    def as_sets(self) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        return {m: a.as_sets() for m, a in self.members.items()}

    def owners(self) -> dict[tuple[uuid.UUID, int], list[str]]:
        """Every assigned partition and the members it went to (one, in a correct result)."""
        out: dict[tuple[uuid.UUID, int], list[str]] = {}
        for member, assignment in self.members.items():
            for topic_id, partitions in assignment.partitions.items():
                for p in partitions:
                    out.setdefault((topic_id, p), []).append(member)
        return out

    def counts(self) -> dict[str, int]:
        return {m: a.total for m, a in self.members.items()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TargetAssignment):
            return NotImplemented
        return self.as_sets() == other.as_sets()

    __hash__ = None  # type: ignore[assignment]


@runtime_checkable
class ServerAssignor(Protocol):
    """A server-side (KIP-848) assignor: ``group.remote.assignor`` names it by :attr:`name`.

    Optional class attributes declare promises the conformance kit
    (:mod:`coordkit.testing.server_assignors`) holds it to: ``balanced`` (default ``True``: with
    identical subscriptions member counts differ by at most one) and ``sticky`` (default
    ``False``: a member that stays keeps its current target when others leave).
    """

    name: ClassVar[str]

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
        """The new target assignment for every member of ``group``."""
        ...


@frozen
class ServerAssignorTraits:
    """What a server-side assignor declares beyond what every one promises."""

    balanced: bool = True
    sticky: bool = False

    @classmethod
    def of(cls, assignor: object) -> ServerAssignorTraits:
        return cls(
            balanced=bool(getattr(assignor, "balanced", True)),
            sticky=bool(getattr(assignor, "sticky", False)),
        )
