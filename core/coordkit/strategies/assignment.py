"""The assignor contract: what a consumer-group assignor gets and what it returns.

Input is a :class:`GroupSubscription` (topics with partition counts and optional replica racks;
members with subscriptions, static instance ids, owned partitions, generations and racks). Output
is a :class:`GroupAssignment` for every member (possibly empty) plus, for cooperative assignors, the
partitions withheld this round.

At Kafka's scale (a million partitions) objects per partition are too slow, so a
:class:`GroupAssignment` stores each member's partitions as integer indices into a
:class:`PartitionSpace` (topics in name order, partitions numbered within). The accessors return
readable values (:class:`~coordkit.kafka.model.TopicPartition`, ``{topic: [partitions]}``).
"""

from __future__ import annotations

import bisect
import enum
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs
import numpy as np
from attrs import field, frozen

from coordkit.kafka.model import TopicPartition

DEFAULT_GENERATION = -1


class RebalanceProtocol(enum.Enum):
    EAGER = "eager"  # every member revokes everything, then rejoins
    COOPERATIVE = "cooperative"  # members revoke only what moves; moved partitions wait a round


def load_balance(member_loads: Iterable[float]) -> float | None:
    """How unevenly load is spread: the most loaded member's load over the mean (1.0 is even).

    ``None`` when there is no member, no load, or a load that is not a finite non-negative
    number. Loads are divided by the largest before they are summed, so loads near the float limit
    (two members of ``1e308`` each) neither overflow the sum nor turn the ratio into ``0.0``.
    """
    loads = [float(x) for x in member_loads]
    if not loads or not all(math.isfinite(x) and x >= 0 for x in loads):
        return None
    largest = max(loads)
    if largest == 0:
        return None
    return len(loads) / math.fsum(x / largest for x in loads)


def java_string_key(text: str) -> bytes:
    """Sort key equal to Java's ``String.compareTo`` (UTF-16 code unit order)."""
    return text.encode("utf-16-be", "surrogatepass")


def _racks(value: Iterable[Iterable[str]] | None) -> tuple[tuple[str, ...], ...] | None:
    return None if value is None else tuple(tuple(racks) for racks in value)


def _loads(value: Iterable[float] | None) -> tuple[float, ...] | None:
    return None if value is None else tuple(float(x) for x in value)


def _unique(topics: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(topics))


@frozen
class TopicMetadata:
    """A topic as the assignor sees it.

    :param partitions: the partition count.
    :param replica_racks: for rack-aware assignment, the racks holding replicas of each partition.
    :param loads: per-partition load (bytes/s, lag, ...) for load-aware assignors; ``None`` means
        every partition weighs 1.
    """

    partitions: int = field()
    replica_racks: tuple[tuple[str, ...], ...] | None = field(default=None, converter=_racks)

    loads: tuple[float, ...] | None = field(default=None, converter=_loads)

    @partitions.validator
    def _check_partitions(self, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"partitions must be a non-negative integer, got {value!r}")

    @replica_racks.validator
    def _check_racks(
        self, attribute: attrs.Attribute[Any], value: tuple[tuple[str, ...], ...] | None
    ) -> None:
        if value is not None and len(value) != self.partitions:
            raise ValueError(
                f"replica_racks lists {len(value)} partitions, the topic has {self.partitions}"
            )

    @loads.validator
    def _check_loads(
        self, attribute: attrs.Attribute[Any], value: tuple[float, ...] | None
    ) -> None:
        if value is None:
            return
        if len(value) != self.partitions:
            raise ValueError(
                f"loads lists {len(value)} partitions, the topic has {self.partitions}"
            )
        if any(not x >= 0 for x in value):
            raise ValueError("loads must be non-negative numbers")


class OwnedPartitions(Mapping[str, tuple[int, ...]]):
    """A member's owned partitions held as columns: ``topic_ids[k]`` (a position in
    ``topic_names``) and ``numbers[k]`` for every owned partition ``k``.

    Reads like ``{topic: (partition, ...)}``; assignors read the columns instead (a group of
    2,000 members owning 1,000,000 partitions is then a few array concatenations, not a million
    Python objects). :meth:`GroupAssignment.owned` builds one per member; members of one
    assignment share ``topic_names``.
    """

    __slots__ = ("_mapping", "numbers", "topic_ids", "topic_names")

    def __init__(self, topic_names: tuple[str, ...], topic_ids: Any, numbers: Any):
        self.topic_names = topic_names
        self.topic_ids = np.asarray(topic_ids, dtype=np.int64)
        self.numbers = np.asarray(numbers, dtype=np.int64)
        if self.topic_ids.shape != self.numbers.shape or self.topic_ids.ndim != 1:
            raise ValueError("owned partitions need one topic id per partition number")
        if self.topic_ids.size and (
            int(self.topic_ids.min()) < 0 or int(self.topic_ids.max()) >= len(topic_names)
        ):
            raise ValueError("an owned partition's topic id is outside topic_names")
        self._mapping: dict[str, tuple[int, ...]] | None = None

    @classmethod
    def from_mapping(cls, owned: Mapping[str, Iterable[int]]) -> OwnedPartitions:
        """The columns of ``{topic: [partition, ...]}`` (order and repeats kept; a topic listed
        without partitions owns nothing and is not kept)."""
        names = tuple(owned)
        lists = [list(owned[t]) for t in names]
        ids = np.repeat(np.arange(len(names), dtype=np.int64), [len(ps) for ps in lists])
        numbers = np.fromiter((p for ps in lists for p in ps), dtype=np.int64, count=ids.size)
        return cls(names, ids, numbers)

    @property
    def total(self) -> int:
        return int(self.numbers.size)

    def _as_dict(self) -> dict[str, tuple[int, ...]]:
        if self._mapping is None:
            grouped: dict[str, list[int]] = {}
            names = self.topic_names
            for topic, number in zip(self.topic_ids.tolist(), self.numbers.tolist(), strict=True):
                grouped.setdefault(names[topic], []).append(number)
            self._mapping = {t: tuple(ps) for t, ps in grouped.items()}
        return self._mapping

    def __getitem__(self, topic: str) -> tuple[int, ...]:
        return self._as_dict()[topic]

    def __iter__(self) -> Iterator[str]:
        return iter(self._as_dict())

    def __len__(self) -> int:
        return len(self._as_dict())

    def __bool__(self) -> bool:
        return self.total > 0

    def __repr__(self) -> str:
        return f"OwnedPartitions({self.total} partitions of {len(self)} topics)"


def _owned(
    value: Mapping[str, Iterable[int]] | Iterable[TopicPartition | str],
) -> Mapping[str, tuple[int, ...]]:
    if isinstance(value, OwnedPartitions):
        return value
    if isinstance(value, Mapping):
        return {topic: tuple(parts) for topic, parts in value.items()}
    grouped: dict[str, list[int]] = {}
    for item in value:
        tp = TopicPartition.parse(item) if isinstance(item, str) else item
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return {topic: tuple(parts) for topic, parts in grouped.items()}


@frozen
class MemberSubscription:
    """One group member as the assignor sees it.

    :param topics: subscribed topic names.
    :param instance_id: ``group.instance.id`` of a static member.
    :param owned: partitions the member owned before this rebalance, ``{topic: [partition, ...]}``
        (a list of ``TopicPartition`` or ``"topic-partition"`` strings is accepted too).
    :param generation: the generation in which it owned them (``-1`` if unknown).
    :param rack: the member's rack (``client.rack``).
    """

    topics: tuple[str, ...] = field(converter=_unique)
    instance_id: str | None = None
    owned: Mapping[str, tuple[int, ...]] = field(factory=dict, converter=_owned)
    generation: int = DEFAULT_GENERATION
    rack: str | None = None

    @property
    def owned_count(self) -> int:
        if isinstance(self.owned, OwnedPartitions):
            return self.owned.total
        return sum(len(parts) for parts in self.owned.values())


def _topic_metadata(value: Mapping[str, TopicMetadata | int]) -> dict[str, TopicMetadata]:
    return {t: v if isinstance(v, TopicMetadata) else TopicMetadata(v) for t, v in value.items()}


def _member_map(members: Mapping[str, MemberSubscription]) -> dict[str, MemberSubscription]:
    return dict(members)  # a typed converter: mypy cannot read dict's overloaded constructor


@frozen
class GroupSubscription:
    """Everything an assignor needs: the topics' metadata and every member's subscription."""

    topics: Mapping[str, TopicMetadata] = field(converter=_topic_metadata)
    members: Mapping[str, MemberSubscription] = field(converter=_member_map)

    def member_order(self) -> list[str]:
        """Kafka's member order: static members first by instance id, then the rest by member id."""
        members = self.members
        static = [m for m in members if members[m].instance_id is not None]
        dynamic = [m for m in members if members[m].instance_id is None]
        static.sort(
            key=lambda m: (java_string_key(members[m].instance_id or ""), java_string_key(m))
        )
        dynamic.sort(key=java_string_key)
        return static + dynamic

    def space(self) -> PartitionSpace:
        """The partition space over every topic with metadata."""
        return PartitionSpace({t: meta.partitions for t, meta in self.topics.items()})


def _ints(indices: Iterable[int]) -> Iterable[int]:
    """Python ints: assignors may hand over numpy arrays (one array's views, no copy)."""
    return indices.tolist() if isinstance(indices, np.ndarray) else indices


class PartitionSpace:
    """Numbers every partition of a set of topics: topics in name order, then partition number.

    ``index(topic, p) = base[topic] + p``; the inverse uses a binary search over the bases.
    """

    __slots__ = ("_base_of", "_count_of", "bases", "counts", "topic_names", "topics", "total")

    def __init__(self, partition_counts: Mapping[str, int]):
        self.topics: list[str] = sorted(partition_counts)
        #: :attr:`topics` as a tuple, shared by the owned partitions built from this space.
        self.topic_names: tuple[str, ...] = tuple(self.topics)
        self.counts: list[int] = [partition_counts[t] for t in self.topics]
        self.bases: list[int] = []
        total = 0
        for count in self.counts:
            self.bases.append(total)
            total += count
        self.total = total
        self._base_of = dict(zip(self.topics, self.bases, strict=True))
        self._count_of = dict(zip(self.topics, self.counts, strict=True))

    def base(self, topic: str) -> int:
        return self._base_of[topic]

    def index(self, topic: str, partition: int) -> int:
        return self._base_of[topic] + partition

    def __contains__(self, topic: object) -> bool:
        return topic in self._base_of

    def count(self, topic: str) -> int:
        """Partitions of ``topic`` (0 for a topic without metadata)."""
        return self._count_of.get(topic, 0)

    def topic_of(self, index: int) -> int:
        """The position (in :attr:`topics`) of the topic holding global ``index``."""
        return bisect.bisect_right(self.bases, index) - 1

    def decode(self, index: int) -> TopicPartition:
        t = bisect.bisect_right(self.bases, index) - 1
        while self.counts[t] == 0:  # empty topics share their base with the next topic
            t += 1
        return TopicPartition(self.topics[t], index - self.bases[t])

    def decode_many(self, indices: Iterable[int]) -> list[TopicPartition]:
        return [self.decode(i) for i in sorted(_ints(indices))]

    def group_by_topic(self, indices: Iterable[int]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        bases, counts, topics = self.bases, self.counts, self.topics
        for index in sorted(_ints(indices)):
            t = bisect.bisect_right(bases, index) - 1
            while counts[t] == 0:
                t += 1
            out.setdefault(topics[t], []).append(index - bases[t])
        return out


class GroupAssignment:
    """The result of one assignment: each member's partitions, and what is withheld this round.

    Built by assignors from integer indices (:meth:`from_indices`) or from readable values
    (:meth:`from_partitions`); read with :meth:`partitions`, :meth:`by_topic`, :meth:`owners`.
    """

    __slots__ = ("_assigned", "_withheld", "space")

    def __init__(
        self,
        space: PartitionSpace,
        assigned: Mapping[str, Sequence[int]],
        withheld: Mapping[str, Sequence[int]] | None = None,
    ):
        self.space = space
        self._assigned = dict(assigned)
        self._withheld = {m: w for m, w in (withheld or {}).items() if len(w)}

    @classmethod
    def from_indices(
        cls,
        space: PartitionSpace,
        assigned: Mapping[str, Sequence[int]],
        withheld: Mapping[str, Sequence[int]] | None = None,
    ) -> GroupAssignment:
        """Build from global partition indices of ``space`` (what fast assignors produce)."""
        return cls(space, assigned, withheld)

    @classmethod
    def from_partitions(
        cls,
        topics: Mapping[str, int] | PartitionSpace,
        assignment: Mapping[str, Iterable[TopicPartition | str]],
        withheld: Mapping[str, Iterable[TopicPartition | str]] | None = None,
    ) -> GroupAssignment:
        space = topics if isinstance(topics, PartitionSpace) else PartitionSpace(topics)

        def encode(items: Iterable[TopicPartition | str]) -> list[int]:
            out = []
            for item in items:
                tp = TopicPartition.parse(item) if isinstance(item, str) else item
                out.append(space.index(tp.topic, tp.partition))
            return out

        return cls(
            space,
            {m: encode(ps) for m, ps in assignment.items()},
            {m: encode(ps) for m, ps in (withheld or {}).items()},
        )

    # -- readable accessors
    @property
    def members(self) -> list[str]:
        return list(self._assigned)

    def __iter__(self) -> Iterator[str]:
        return iter(self._assigned)

    def __contains__(self, member: object) -> bool:
        return member in self._assigned

    def __len__(self) -> int:
        return len(self._assigned)

    def partitions(self, member: str) -> list[TopicPartition]:
        """The member's partitions, sorted by topic then partition."""
        return self.space.decode_many(self._assigned[member])

    def by_topic(self, member: str) -> dict[str, list[int]]:
        return self.space.group_by_topic(self._assigned[member])

    def owned(self, member: str) -> OwnedPartitions:
        """The member's partitions as it will claim them next rebalance, in columns (the form
        assignors read fastest; ``MemberSubscription(owned=...)`` keeps it as given)."""
        indices = np.sort(np.asarray(self._assigned[member], dtype=np.int64))
        space = self.space
        bases = np.asarray(space.bases, dtype=np.int64)
        topic = np.searchsorted(bases, indices, side="right") - 1
        counts = np.asarray(space.counts, dtype=np.int64)
        while indices.size and bool((counts[topic] == 0).any()):  # empty topics share a base
            topic = np.where(counts[topic] == 0, topic + 1, topic)
        return OwnedPartitions(space.topic_names, topic, indices - bases[topic])

    def withheld(self, member: str) -> list[TopicPartition]:
        """Partitions moving to ``member`` that it receives only after their old owner revoked them."""
        return self.space.decode_many(self._withheld.get(member, ()))

    @property
    def has_withheld(self) -> bool:
        return bool(self._withheld)

    def count(self, member: str) -> int:
        return len(self._assigned[member])

    def counts(self) -> dict[str, int]:
        return {m: len(ps) for m, ps in self._assigned.items()}

    def owners(self) -> dict[TopicPartition, str]:
        out = {}
        for member, indices in self._assigned.items():
            for tp in self.space.decode_many(indices):
                out[tp] = member
        return out

    def as_strings(self) -> dict[str, list[str]]:
        """``{member: ["topic-partition", ...]}``, the shape JSON output uses."""
        return {m: [str(tp) for tp in self.partitions(m)] for m in self._assigned}

    def withheld_as_strings(self) -> dict[str, list[str]]:
        return {m: [str(tp) for tp in self.withheld(m)] for m in self._withheld}

    # -- columnar accessors for metrics and the lab
    def indices(self, member: str) -> Sequence[int]:
        return self._assigned[member]

    def withheld_indices(self, member: str) -> Sequence[int]:
        return self._withheld.get(member, ())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GroupAssignment):
            return NotImplemented
        return (
            self.as_strings() == other.as_strings()
            and self.withheld_as_strings() == other.withheld_as_strings()
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        total = sum(len(v) for v in self._assigned.values())
        return f"<GroupAssignment members={len(self._assigned)} partitions={total}>"


@runtime_checkable
class Assignor(Protocol):
    """A partition assignment strategy.

    ``name`` is its registry key (Kafka's ``partition.assignment.strategy`` short name);
    ``protocols`` the rebalance protocols it supports, preferred first. Optional class attributes
    declare promises the conformance kit (:mod:`coordkit.testing.assignors`) holds it to:
    ``count_balanced`` (default ``True``: with identical subscriptions, member counts differ by at
    most one) and ``sticky`` (default ``False``: when a member leaves, only its partitions move).
    """

    name: ClassVar[str]
    protocols: ClassVar[tuple[RebalanceProtocol, ...]]

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        """Assign the partitions of every subscribed topic with metadata to the members."""
        ...
