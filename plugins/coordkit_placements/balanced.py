"""``balanced``: bring every broker within one replica and one preferred leadership of the mean,
racks distinct where racks allow, moving as few replicas (and as few bytes) as possible.

The shape of Cruise Control's distribution goals (``ReplicaDistributionGoal``,
``LeaderReplicaDistributionGoal``, ``RackAwareGoal``; linkedin/cruise-control, ``analyzer/goals``)
without its optimiser: greedy moves from the most to the least loaded broker, smallest partitions
first, starting from the current assignment instead of from scratch. In order:

1. replicas on brokers no longer listed, and replicas sharing a rack while a rack holds none, go to
   the least loaded eligible broker (these moves are required);
2. while the most and least loaded brokers differ by more than one replica, move the smallest
   partition replica that the least loaded broker may take (not already a replica there, its rack
   not already used by the partition unless racks are exhausted);
3. preferred leaders are balanced by reordering replica lists where possible (no data moves): a
   chain of handovers (an augmenting path, found breadth-first) passes one first place from the
   busiest broker to one with two fewer; where no chain exists (a single-replica partition's
   leadership moves only with its data) a leader replica moves to a broker holding fewer
   replicas, or is exchanged with a follower replica of the idle broker.

New partitions are placed as ``kafka-rack-aware`` places them (round-robin over a rack-alternated
list is already balanced for one topic); what this strategy adds is :meth:`rebalance`.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Mapping, Sequence

from coordkit.strategies.placement import TP, BrokerMetadata, ClusterLayout
from coordkit_placements.kafka import KAFKA_RACK_AWARE


class BalancedPlacement:
    name = "balanced"
    description = (
        "minimal-movement rebalancer: replica and preferred-leader counts within one of the mean "
        "per broker, racks distinct, fewest (smallest) replicas moved (Cruise Control's "
        "distribution goals, greedily)"
    )

    def place(
        self,
        brokers: Sequence[BrokerMetadata],
        partitions: int,
        replication_factor: int,
        *,
        existing: Mapping[int, Sequence[int]] | None = None,
        rng: random.Random | None = None,
        topic: str = "",
    ) -> dict[int, list[int]]:
        return KAFKA_RACK_AWARE.place(
            brokers, partitions, replication_factor, existing=existing, rng=rng, topic=topic
        )

    def rebalance(self, layout: ClusterLayout) -> dict[TP, tuple[int, ...]]:
        return _Rebalance(layout).run()


class _Rebalance:
    def __init__(self, layout: ClusterLayout):
        self.layout = layout
        self.rack = layout.rack_of()
        self.brokers = sorted(self.rack)
        self.n_racks = len({r for r in self.rack.values() if r is not None})
        self.lists: dict[TP, list[int]] = {
            (t, p): list(r) for t, parts in layout.assignment.items() for p, r in parts.items()
        }
        self.count = dict.fromkeys(self.brokers, 0)
        self.leads = dict.fromkeys(self.brokers, 0)
        self.hosted: dict[int, set[TP]] = {b: set() for b in self.brokers}
        for tp, replicas in self.lists.items():
            for r in replicas:
                if r in self.count:
                    self.count[r] += 1
                    self.hosted[r].add(tp)
            if replicas and replicas[0] in self.leads:
                self.leads[replicas[0]] += 1
        #: Preferred leaderships a broker may hold (the ceiling of the mean).
        self.lead_quota = -(-len(self.lists) // len(self.brokers)) if self.brokers else 0

    def run(self) -> dict[TP, tuple[int, ...]]:
        if not self.brokers:
            return {}
        self._required_moves()
        self._balance_replicas()
        self._balance_leaders()
        plan: dict[TP, tuple[int, ...]] = {}
        for (topic, partition), replicas in self.lists.items():
            if tuple(replicas) != tuple(self.layout.assignment[topic][partition]):
                plan[(topic, partition)] = tuple(replicas)
        return plan

    # -- helpers ---------------------------------------------------------------------------

    def _rack_ok(self, tp: TP, target: int, leaving: int | None) -> bool:
        """Whether ``target`` may hold a replica of ``tp`` rack-wise (racks distinct while the
        partition does not yet use every rack)."""
        if self.n_racks == 0:
            return True
        used = {self.rack.get(r) for r in self.lists[tp] if r != leaving}
        return self.rack.get(target) not in used or len(used) >= self.n_racks

    def _eligible(self, tp: TP, leaving: int | None) -> list[int]:
        members = set(self.lists[tp])
        return [b for b in self.brokers if b not in members and self._rack_ok(tp, b, leaving)]

    def _move(self, tp: TP, source: int, target: int) -> None:
        replicas = self.lists[tp]
        index = replicas.index(source)
        replicas[index] = target
        if index == 0:
            if source in self.leads:
                self.leads[source] -= 1
            self.leads[target] += 1
        if source in self.count:
            self.count[source] -= 1
            self.hosted[source].discard(tp)
        self.count[target] += 1
        self.hosted[target].add(tp)

    # -- the three steps ---------------------------------------------------------------------

    def _required_moves(self) -> None:
        for tp in sorted(self.lists, key=self.layout.size):
            replicas = self.lists[tp]
            for source in list(replicas):
                gone = source not in self.count
                racks = [self.rack.get(r) for r in replicas]
                crowded = (
                    self.n_racks > 0
                    and not gone
                    and racks.count(self.rack.get(source)) > 1
                    and len(set(racks)) < min(self.n_racks, len(replicas))
                )
                if not gone and not crowded:
                    continue
                if crowded and replicas.index(source) == 0:
                    continue  # move a follower of the crowded rack, not the leader
                targets = self._eligible(tp, source)
                if crowded:
                    targets = [b for b in targets if self.rack.get(b) not in set(racks)]
                if targets:
                    self._move(tp, source, min(targets, key=lambda b: (self.count[b], b)))

    def _more_than_one_below(self, high: int, low: int) -> bool:
        return self.count[high] - self.count[low] > 1

    def _balance_replicas(self) -> None:
        for _ in range(sum(self.count.values()) + 1):
            # The busiest broker first; with racks it may have nothing a less loaded broker may
            # take (each of its partitions already uses that broker's rack): then the next one.
            highs = sorted(self.brokers, key=lambda b: (-self.count[b], b))
            lows = sorted(self.brokers, key=lambda b: (self.count[b], b))
            pairs = (
                (high, low)
                for high in highs
                for low in itertools.takewhile(
                    functools.partial(self._more_than_one_below, high), lows
                )
            )
            moved = False
            for high, low in pairs:
                candidates = [
                    tp
                    for tp in self.hosted[high]
                    if low not in self.lists[tp] and self._rack_ok(tp, low, high)
                ]
                if candidates:
                    # Leaderships ride along with the replicas they sit on: move a leader to a
                    # broker below its share when the source is above its own (a follower
                    # otherwise), and onto a broker at its share only when nothing else can go.
                    def cost(t: TP, high: int = high, low: int = low) -> tuple[int, float, TP]:
                        if self.lists[t][0] != high:
                            return (0, self.layout.size(t), t)
                        if self.leads[low] >= self.lead_quota:
                            return (1, self.layout.size(t), t)
                        if self.leads[high] > self.lead_quota:
                            return (-1, self.layout.size(t), t)
                        return (0, self.layout.size(t), t)

                    tp = min(candidates, key=cost)
                    self._move(tp, high, low)
                    moved = True
                    break
            if not moved:
                return

    def _balance_leaders(self) -> None:
        leads = self.leads
        for _ in range(len(self.lists) + 1):
            high = max(self.brokers, key=lambda b: (leads[b], -b))
            low = min(self.brokers, key=lambda b: (leads[b], b))
            if leads[high] - leads[low] <= 1:
                return
            receivers = {b for b in self.brokers if leads[b] <= leads[high] - 2}
            path = self._handover_path(high, receivers)
            if path is None:
                if not (
                    self._move_a_leader(high, receivers) or self._swap_a_leader(high, receivers)
                ):
                    return
                continue
            low = path[-1][1]
            # Each partition on the path passes its leadership to one of its followers: the
            # first broker leads one fewer, the last one more, those between as many as before.
            for tp, follower in path:
                replicas = self.lists[tp]
                index = replicas.index(follower)
                replicas[0], replicas[index] = replicas[index], replicas[0]
            leads[high] -= 1
            leads[low] += 1

    def _move_a_leader(self, high: int, receivers: set[int]) -> bool:
        """No follower can take a leadership over: move a replica ``high`` leads (the smallest)
        to a receiver holding fewer replicas, which keeps replica counts within one."""
        options = [
            (self.layout.size(tp), tp, b)
            for tp in self.hosted[high]
            if self.lists[tp][0] == high
            for b in receivers
            if self.count[b] < self.count[high]
            and b not in self.lists[tp]
            and self._rack_ok(tp, b, high)
        ]
        if not options:
            return False
        _size, tp, target = min(options)
        self._move(tp, high, target)
        return True

    def _swap_a_leader(self, high: int, receivers: set[int]) -> bool:
        """Exchange replicas: a partition ``high`` leads goes to a receiver (which leads it),
        and a partition the receiver follows goes to ``high`` (as a follower). Replica counts
        stay as they are; two replicas move."""
        for low in sorted(receivers, key=lambda b: (self.leads[b], b)):
            gives = sorted(
                (self.layout.size(t), t)
                for t in self.hosted[high]
                if self.lists[t][0] == high
                and low not in self.lists[t]
                and self._rack_ok(t, low, high)
            )
            takes = sorted(
                (self.layout.size(t), t)
                for t in self.hosted[low]
                if self.lists[t][0] != low
                and high not in self.lists[t]
                and self._rack_ok(t, high, low)
            )
            if gives and takes:
                self._move(gives[0][1], high, low)
                self._move(takes[0][1], low, high)
                return True
        return False

    def _handover_path(self, source: int, targets: set[int]) -> list[tuple[TP, int]] | None:
        """The shortest chain of leadership handovers from ``source`` to any of ``targets``:
        partitions led by one broker with the next as follower (breadth-first)."""
        led: dict[int, list[TP]] = {b: [] for b in self.brokers}
        for tp in sorted(self.lists):
            replicas = self.lists[tp]
            if replicas and replicas[0] in led:
                led[replicas[0]].append(tp)
        came_from: dict[int, tuple[int, TP]] = {}
        frontier = [source]
        seen = {source}
        while frontier:
            following: list[int] = []
            for broker in frontier:
                for tp in led[broker]:
                    for follower in self.lists[tp][1:]:
                        if follower in seen or follower not in led:
                            continue
                        seen.add(follower)
                        came_from[follower] = (broker, tp)
                        if follower in targets:
                            return self._unwind(came_from, source, follower)
                        following.append(follower)
            frontier = following
        return None

    @staticmethod
    def _unwind(
        came_from: dict[int, tuple[int, TP]], source: int, target: int
    ) -> list[tuple[TP, int]]:
        path: list[tuple[TP, int]] = []
        node = target
        while node != source:
            previous, tp = came_from[node]
            path.append((tp, node))
            node = previous
        return path[::-1]
