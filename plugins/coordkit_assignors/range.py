"""Kafka's ``range`` assignor (with the rack-aware mode of KIP-881) and the legacy ceiling split.

``range``: per topic, independently, the topic's subscribers in member order split its partitions
into contiguous ranges; with ``P`` partitions and ``C`` subscribers the first ``P % C`` take
``P // C + 1`` and the rest ``P // C``. Topics never interleave, so ten one-partition topics all land
on the first consumer.

Rack-aware mode (Kafka 3.5) applies only when some member has a rack, the members' racks meet the
replica racks, and some partition lacks a replica on some rack. Per-topic counts stay exactly those
of plain range; rack matches decide which members take the extra partitions and which partitions
each takes. Topics with the same subscribers and the same partition count (co-partitioned) are
matched together so partition ``i`` of each lands on the same member, even at the cost of rack
alignment. What cannot be matched is filled as plain range does.

``range-ceil``: the legacy ZooKeeper consumer's split (seed 003): ``M = ceil(P / C)`` and consumer
``i`` takes ``P[i*M .. (i+1)*M - 1]``, so later consumers can be idle while earlier ones are full.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import ClassVar

import numpy as np

from coordkit.strategies.assignment import GroupAssignment, GroupSubscription, RebalanceProtocol
from coordkit_assignors.ordering import GroupLayout, IntArray

Split = Callable[[int, int], IntArray]


def range_split(partitions: int, consumers: int) -> IntArray:
    """Partition counts per consumer: the first ``P % C`` take one more."""
    quota, extra = divmod(partitions, consumers)
    lengths = np.full(consumers, quota, dtype=np.int64)
    lengths[:extra] += 1
    return lengths


def ceil_split(partitions: int, consumers: int) -> IntArray:
    """Partition counts per consumer for ``M = ceil(P / C)``: full ranges first, then idle ones."""
    size = -(-partitions // consumers)
    starts = np.arange(consumers, dtype=np.int64) * size
    return np.clip(partitions - starts, 0, size)


def contiguous_assignment(layout: GroupLayout, split: Split) -> GroupAssignment:
    """Each topic's partitions cut into contiguous runs over its subscribers, in member order."""
    index_chunks: list[IntArray] = []
    owner_chunks: list[IntArray] = []
    subscriber_arrays: dict[int, IntArray] = {}  # shared subscriber lists convert once
    space = layout.space
    for topic in layout.topics_in_space_order():
        subscribers = layout.subscribers[topic]
        array = subscriber_arrays.get(id(subscribers))
        if array is None:
            array = subscriber_arrays[id(subscribers)] = np.asarray(subscribers, dtype=np.int64)
        count = space.count(topic)
        base = space.base(topic)
        owner_chunks.append(np.repeat(array, split(count, len(subscribers))))
        index_chunks.append(np.arange(base, base + count, dtype=np.int64))
    if not index_chunks:
        return layout.result_from_owners(np.empty(0, np.int64), np.empty(0, np.int64))
    return layout.result_from_owners(np.concatenate(index_chunks), np.concatenate(owner_chunks))


class RangeAssignor:
    """Kafka's ``RangeAssignor``, including rack-aware assignment.

    :param prefer_rack_aware: use the rack-matching logic whenever racks meet at all, even if every
        partition has replicas on every rack (Kafka's test-only ``preferRackAwareLogic`` switch;
        the result is the same, the switch exercises the matching code).
    """

    name: ClassVar[str] = "range"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)
    #: Balanced per topic, not across topics (each topic's first members get one more).
    count_balanced: ClassVar[bool] = False

    def __init__(self, *, prefer_rack_aware: bool = False):
        self.prefer_rack_aware = prefer_rack_aware

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        layout = GroupLayout(group)
        if _may_need_racks(group):
            states = [
                _TopicRanges(layout, topic, self.prefer_rack_aware)
                for topic in layout.topics_in_space_order()
            ]
            if any(state.needs_rack_aware for state in states):
                return _rack_aware_assignment(layout, states)
        return contiguous_assignment(layout, range_split)

    def __repr__(self) -> str:
        return f"RangeAssignor(prefer_rack_aware={self.prefer_rack_aware})"


class RangeCeilAssignor:
    """The legacy ZooKeeper consumer's ceiling split: ``M = ceil(P / C)`` per consumer."""

    name: ClassVar[str] = "range-ceil"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)
    #: Ceiling-sized blocks leave the last members short.
    count_balanced: ClassVar[bool] = False

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        return contiguous_assignment(GroupLayout(group), ceil_split)


# -- rack-aware mode -------------------------------------------------------------------------------


def _may_need_racks(group: GroupSubscription) -> bool:
    """Cheap test before building per-partition rack sets: both sides must know racks."""
    return any(m.rack for m in group.members.values()) and any(
        t.replica_racks is not None for t in group.topics.values()
    )


def use_rack_aware_assignment(
    consumer_racks: set[str],
    partition_racks: set[str],
    racks_per_partition: Iterable[frozenset[str]],
    *,
    prefer: bool = False,
) -> bool:
    """Kafka's rule: racks must meet, and (unless preferred) some partition misses some rack."""
    if not consumer_racks or consumer_racks.isdisjoint(partition_racks):
        return False
    if prefer:
        return True
    return not all(racks == partition_racks for racks in racks_per_partition)


class _TopicRanges:
    """One topic's range split, filled step by step (Kafka's ``TopicAssignmentState``).

    Members and partitions are integers: member positions and partition numbers within the topic.
    Candidate lists (all partitions, or the partitions with a replica on one rack) are scanned with
    a cursor each; everything before a cursor is assigned, so every scan is amortised O(1).
    """

    def __init__(self, layout: GroupLayout, topic: str, prefer: bool):
        group = layout.group
        self.topic = topic
        self.base = layout.space.base(topic)
        self.count = count = layout.space.count(topic)
        self.consumers: list[int] = layout.subscribers[topic]
        self.quota, self.extra = divmod(count, len(self.consumers))
        self.assigned = dict.fromkeys(self.consumers, 0)
        self.owner: list[int] = [-1] * count
        self.unassigned = count
        self.rack_of: dict[int, str | None] = {
            c: group.members[layout.members[c]].rack or None for c in self.consumers
        }
        consumer_racks = {r for r in self.rack_of.values() if r is not None}
        self.partition_racks: list[frozenset[str]] | None = None
        self.needs_rack_aware = False
        if consumer_racks:
            replica_racks = group.topics[topic].replica_racks
            if replica_racks is None:
                self.partition_racks = [frozenset()] * count
            else:
                self.partition_racks = [frozenset(r for r in racks if r) for racks in replica_racks]
            all_racks: set[str] = set().union(*self.partition_racks)
            self.needs_rack_aware = use_rack_aware_assignment(
                consumer_racks, all_racks, self.partition_racks, prefer=prefer
            )
        self._candidates: dict[str | None, list[int]] = {None: list(range(count))}
        self._cursors: dict[str | None, int] = {None: 0}

    def racks_match(self, consumer: int, partition: int) -> bool:
        rack = self.rack_of[consumer]
        return rack is None or (
            self.partition_racks is not None and rack in self.partition_racks[partition]
        )

    def max_assignable(self, consumer: int) -> int:
        limit = self.quota + (1 if self.extra > 0 else 0) - self.assigned[consumer]
        return max(0, limit)

    def give(self, consumer: int, partitions: list[int]) -> None:
        for p in partitions:
            self.owner[p] = consumer
        self.unassigned -= len(partitions)
        self.assigned[consumer] += len(partitions)
        if self.assigned[consumer] > self.quota:
            self.extra -= 1

    def _candidates_for(self, rack: str | None) -> list[int]:
        candidates = self._candidates.get(rack)
        if candidates is None:
            assert self.partition_racks is not None
            racks = self.partition_racks
            candidates = self._candidates[rack] = [p for p in range(self.count) if rack in racks[p]]
            self._cursors[rack] = 0
        return candidates

    def fill(self, *, match_racks: bool) -> None:
        """Each consumer in order takes the first unassigned partitions it may take, up to its limit."""
        for consumer in self.consumers:
            if self.unassigned == 0:
                break
            limit = self.max_assignable(consumer)
            if limit == 0:
                continue
            rack = self.rack_of[consumer] if match_racks else None
            candidates = self._candidates_for(rack)
            cursor = self._cursors[rack]
            taken: list[int] = []
            owner = self.owner
            while cursor < len(candidates) and len(taken) < limit:
                p = candidates[cursor]
                cursor += 1
                if owner[p] == -1:
                    taken.append(p)
            self._cursors[rack] = cursor
            if taken:
                self.give(consumer, taken)


def _rack_aware_assignment(layout: GroupLayout, states: list[_TopicRanges]) -> GroupAssignment:
    groups: dict[tuple[tuple[int, ...], int], list[_TopicRanges]] = {}
    for state in states:
        if state.partition_racks is not None:  # topics whose subscribers have no rack cannot match
            groups.setdefault((tuple(state.consumers), state.count), []).append(state)
    for (consumers, count), co_partitioned in groups.items():
        if len(co_partitioned) > 1:
            _match_co_partitioned(list(consumers), count, co_partitioned)
        elif co_partitioned[0].needs_rack_aware:
            co_partitioned[0].fill(match_racks=True)
    for state in states:
        state.fill(match_racks=False)

    indices: list[int] = []
    owners: list[int] = []
    for state in states:
        indices.extend(range(state.base, state.base + state.count))
        owners.extend(state.owner)
    return layout.result_from_owners(
        np.asarray(indices, dtype=np.int64), np.asarray(owners, dtype=np.int64)
    )


def _match_co_partitioned(consumers: list[int], count: int, states: list[_TopicRanges]) -> None:
    """Partition ``p`` of every topic goes to the first consumer matching racks for all of them."""
    remaining = list(consumers)
    for p in range(count):
        chosen = next(
            (
                c
                for c in remaining
                if all(s.racks_match(c, p) and s.max_assignable(c) > 0 for s in states)
            ),
            None,
        )
        if chosen is None:
            continue
        for state in states:
            state.give(chosen, [p])
        if all(s.max_assignable(chosen) == 0 for s in states):
            remaining.remove(chosen)
            if not remaining:
                break
