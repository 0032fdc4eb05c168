"""``weighted-sticky``: balances per-partition load (bytes/s, lag, ...) instead of partition counts.

Not a Kafka assignor. Count-based assignors treat a partition carrying half the traffic like any
other; under skewed (Zipf-like) loads that leaves one member with most of the work. This one reads
``TopicMetadata.loads`` (a topic without loads weighs 1.0 per partition) and:

1. **Share.** ``ideal`` = total load of the subscribed partitions / members that subscribe to at
   least one topic with partitions; ``cap = ideal * (1 + tolerance)``.
2. **Keep.** Each member, in member order, goes through the partitions it owned (those that still
   exist and that it still subscribes to; conflicting claims resolved as everywhere: highest
   generation, nobody on a tie), heaviest first, and keeps one when its load stays within ``cap``,
   or when it holds nothing yet (a partition heavier than ``cap`` is too big for anyone's share, and
   keeping it moves nothing).
3. **Place.** The remaining partitions, heaviest first (ties: lower partition index), each go to
   the least loaded member subscribed to its topic (ties: fewer partitions, then member order):
   greedy LPT, within 4/3 of the optimal maximum load for identical subscriptions.
4. **Refine.** While the most loaded member is above ``cap`` (at most one pass per member), move
   the one partition of it that best lowers the larger of the two loads to the least loaded member
   eligible for it; stop when no move lowers it.

Deterministic: the same input always gives the same output.
"""

from __future__ import annotations

import heapq
from typing import ClassVar

import numpy as np

from coordkit.strategies.assignment import GroupAssignment, GroupSubscription, RebalanceProtocol
from coordkit_assignors.ordering import GroupLayout

#: Default headroom over the ideal share within which a member keeps what it owns.
DEFAULT_TOLERANCE = 0.1


class WeightedStickyAssignor:
    """Load-balancing sticky assignor.

    :param tolerance: how far above the ideal load share a member may stay to keep partitions it
        already owns (0.1 = 10 %). 0 favours balance, larger values favour stickiness.
    """

    name: ClassVar[str] = "weighted-sticky"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)
    #: Balances load, not counts. Not ``sticky`` in the kit's sense either: it keeps owned
    #: partitions only within the load cap, so a member leaving can move others' partitions.
    count_balanced: ClassVar[bool] = False

    def __init__(self, *, tolerance: float = DEFAULT_TOLERANCE):
        if not tolerance >= 0:
            raise ValueError(f"tolerance must be a non-negative number, got {tolerance!r}")
        self.tolerance = tolerance

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        return _WeightedBuilder(GroupLayout(group), self.tolerance).build()

    def __repr__(self) -> str:
        return f"WeightedStickyAssignor(tolerance={self.tolerance})"


class _WeightedBuilder:
    def __init__(self, layout: GroupLayout, tolerance: float):
        self.layout = layout
        self.space = space = layout.space
        weights = layout.loads()
        self.weight: list[float] = weights.tolist()
        # Per partition, its topic's subscriber list (shared lists: identity marks equal eligibility).
        self.eligible: dict[str, list[int]] = layout.subscribers
        self.topic_of: list[str] = []
        for topic, count in zip(space.topics, space.counts, strict=True):
            self.topic_of.extend([topic] * count)
        self.load = [0.0] * layout.size
        self.count = [0] * layout.size
        self.parts: list[list[int]] = [[] for _ in range(layout.size)]
        active = {m for subs in self.eligible.values() for m in subs}
        mask = layout.subscribed_mask()
        total = float(weights[mask].sum())
        self.cap = total / len(active) * (1 + tolerance) if active else 0.0
        self.subscribed_mask = mask

    def _give(self, index: int, member: int) -> None:
        self.parts[member].append(index)
        self.load[member] += self.weight[index]
        self.count[member] += 1

    def build(self) -> GroupAssignment:
        weight = self.weight
        previous = self.layout.previous_owners()
        kept = np.zeros(self.space.total, dtype=bool)
        owned_by: list[list[int]] = [[] for _ in range(self.layout.size)]
        for index, member in zip(
            np.flatnonzero(previous >= 0).tolist(), previous[previous >= 0].tolist(), strict=True
        ):
            owned_by[member].append(index)
        for member, owned in enumerate(owned_by):
            for index in sorted(owned, key=lambda i: (-weight[i], i)):
                if self.count[member] == 0 or self.load[member] + weight[index] <= self.cap:
                    self._give(index, member)
                    kept[index] = True

        remaining = np.flatnonzero(self.subscribed_mask & ~kept)
        loads = np.asarray(weight)[remaining]
        order = remaining[np.lexsort((remaining, -loads))]  # heaviest first, then lower index
        self._place(order.tolist())
        self._refine()
        return self.layout.result_from_lists(self.parts)

    def _place(self, indices: list[int]) -> None:
        load, count, topic_of, eligible = self.load, self.count, self.topic_of, self.eligible
        # One heap per distinct subscriber list; an entry is stale once its member's load changed
        # through another heap (loads only grow, so a stale entry is refreshed when it surfaces).
        heaps: dict[int, list[tuple[float, int, int]]] = {}
        for index in indices:
            subscribers = eligible[topic_of[index]]
            heap = heaps.get(id(subscribers))
            if heap is None:
                heap = heaps[id(subscribers)] = [(load[m], count[m], m) for m in subscribers]
                heapq.heapify(heap)
            while True:
                entry_load, entry_count, member = heap[0]
                if entry_load == load[member] and entry_count == count[member]:
                    break
                heapq.heapreplace(heap, (load[member], count[member], member))
            self._give(index, member)
            heapq.heapreplace(heap, (load[member], count[member], member))

    def _refine(self) -> None:
        load, weight, topic_of, eligible = self.load, self.weight, self.topic_of, self.eligible
        for _ in range(len(load)):
            donor = max(range(len(load)), key=lambda m: (load[m], -m))
            if load[donor] <= self.cap or len(self.parts[donor]) < 2:
                return
            best: tuple[float, int, int] | None = None  # (resulting pair maximum, index, receiver)
            least_loaded: dict[int, int] = {}  # per distinct subscriber list
            for index in self.parts[donor]:
                subscribers = eligible[topic_of[index]]
                receiver = least_loaded.get(id(subscribers), -1)
                if receiver == -1:
                    receiver = min(subscribers, key=lambda m: (load[m], m))
                    least_loaded[id(subscribers)] = receiver
                if receiver == donor:
                    continue
                pair_max = max(load[donor] - weight[index], load[receiver] + weight[index])
                if pair_max < load[donor] and (best is None or (pair_max, index) < best[:2]):
                    best = (pair_max, index, receiver)
            if best is None:
                return
            _, index, receiver = best
            self.parts[donor].remove(index)
            self.load[donor] -= weight[index]
            self.count[donor] -= 1
            self._give(index, receiver)
