"""A direct, object-per-partition transcription of Kafka's ``AbstractStickyAssignor`` (clients,
Kafka 3.5), used as a differential oracle by ``tests/unit/assignors/test_sticky.py``.

It follows the Java line by line (``HashMap`` iteration order included) and is slow; the assignor
under test is columnar. Where coordkit deliberately departs from Kafka (documented in
``coordkit_assignors.sticky_*``), the transcription carries the same guard, marked ``coordkit:``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coordkit.strategies.assignment import (
    DEFAULT_GENERATION,
    GroupSubscription,
    MemberSubscription,
    java_string_key,
)
from coordkit_assignors.sticky_java import (
    JavaHashOrder,
    hashmap_iteration_order,
    java_string_hash,
    topic_partition_hash,
)

TP = tuple[str, int]

__all__ = ["KafkaStickyReference", "jkey", "kafka_cooperative"]


def jkey(text: str) -> bytes:
    return java_string_key(text)


class _RackInfo:
    def __init__(
        self,
        partitions: Mapping[str, int],
        group: GroupSubscription,
        subs: Mapping[str, Any],
        prefer: bool,
    ):
        consumers_by_rack: dict[str, list[str]] = {}
        for member in subs:
            rack = group.members[member].rack
            if rack:
                consumers_by_rack.setdefault(rack, []).append(member)
        partition_racks: dict[TP, set[str]] = {}
        partitions_by_rack: dict[str, list[TP]] = {}
        if consumers_by_rack:
            for topic, count in partitions.items():
                replica_racks = group.topics[topic].replica_racks
                for p in range(count):
                    racks = set(replica_racks[p]) if replica_racks is not None else set()
                    partition_racks[(topic, p)] = racks
                    for rack in racks:
                        partitions_by_rack.setdefault(rack, []).append((topic, p))
        consumer_rack_set = set(consumers_by_rack)
        all_racks = set(partitions_by_rack)
        if not consumer_rack_set or consumer_rack_set.isdisjoint(all_racks):
            use = False
        elif prefer:
            use = True
        else:
            use = not all(r == all_racks for r in partition_racks.values())
        self.consumer_racks: dict[str, str] = {}
        self.partition_racks: dict[TP, set[str]] = {}
        if use:
            for rack, members in consumers_by_rack.items():
                for m in members:
                    self.consumer_racks[m] = rack
            self.partition_racks = partition_racks
        self.num_consumers = {
            tp: sum(len(consumers_by_rack.get(r, [])) for r in racks)
            for tp, racks in partition_racks.items()
        }

    def racks_mismatch(self, consumer: str, tp: TP) -> bool:
        rack = self.consumer_racks.get(consumer)
        replica = self.partition_racks.get(tp)
        return rack is not None and (replica is None or rack not in replica)

    def sort_partitions(self, partitions: list[TP]) -> list[TP]:
        if not self.num_consumers:
            return partitions
        return sorted(partitions, key=lambda tp: self.num_consumers.get(tp, 0))

    def next_rack_consumer(self, tp: TP, consumers: list[str], first: int) -> int:
        racks = self.partition_racks.get(tp)
        if not racks:
            return -1
        for i in range(len(consumers)):
            index = (first + i) % len(consumers)
            rack = self.consumer_racks.get(consumers[index])
            if rack is not None and rack in racks:
                return index
        return -1


class KafkaStickyReference:
    def __init__(self, prefer_rack_aware: bool = False):
        self.prefer = prefer_rack_aware
        self.transferring: dict[TP, str] | None = None

    def assign(self, group: GroupSubscription) -> dict[str, list[TP]]:
        ids = sorted(group.members, key=jkey)
        subs = {ids[i]: group.members[ids[i]] for i in hashmap_iteration_order(ids)}
        subscribed = {t for s in subs.values() for t in s.topics}
        partitions = {t: group.topics[t].partitions for t in subscribed if t in group.topics}
        partitions = {t: n for t, n in partitions.items() if n > 0}
        self.max_generation = DEFAULT_GENERATION
        owned: dict[str, list[TP]] = {}
        multi: set[TP] = set()
        rack_info = _RackInfo(partitions, group, subs, self.prefer)
        if self._all_subscriptions_equal(set(partitions), subs, owned, multi):
            self.transferring = {}
            return self._constrained(partitions, rack_info, owned, multi)
        self.transferring = None
        return self._general(partitions, rack_info, owned, subs)

    @staticmethod
    def _member_partitions(sub: MemberSubscription) -> list[TP]:
        return [(t, p) for t, ps in sub.owned.items() for p in ps]

    def _all_subscriptions_equal(
        self,
        all_topics: set[str],
        subs: Mapping[str, MemberSubscription],
        owned: dict[str, list[TP]],
        multi: set[TP],
    ) -> bool:
        equal = True
        subscribed: set[str] = set()
        previous_owner: dict[TP, str] = {}
        for consumer, sub in subs.items():
            if not subscribed:
                subscribed.update(sub.topics)
            elif equal and not (
                len(sub.topics) == len(subscribed) and subscribed.issuperset(sub.topics)
            ):
                equal = False
            generation = sub.generation
            self.max_generation = max(self.max_generation, generation)
            mine: list[TP] = []
            owned[consumer] = mine
            for tp in self._member_partitions(sub):
                if tp[0] not in all_topics:
                    continue
                other = previous_owner.get(tp)
                if other is None:
                    mine.append(tp)
                    previous_owner[tp] = consumer
                    continue
                other_generation = subs[other].generation
                if generation == other_generation:
                    multi.add(tp)
                    if tp in owned[other]:
                        owned[other].remove(tp)
                    previous_owner[tp] = consumer
                elif generation > other_generation:
                    mine.append(tp)
                    if tp in owned[other]:
                        owned[other].remove(tp)
                    previous_owner[tp] = consumer
        return equal

    # -- ConstrainedAssignmentBuilder
    def _constrained(
        self,
        partitions: Mapping[str, int],
        racks: _RackInfo,
        current: dict[str, list[TP]],
        multi: set[TP],
    ) -> dict[str, list[TP]]:
        assert self.transferring is not None
        total = sum(partitions.values())
        n = len(current)
        min_quota, max_quota = total // n, -(-total // n)
        expected = total % n
        over = 0
        revoked: set[TP] = set()
        under: list[str] = []
        exactly_min: list[str] = []
        assignment: dict[str, list[TP]] = {c: [] for c in current}
        assigned: list[TP] = []
        for consumer, parts in current.items():
            mine = sorted(
                (tp for tp in parts if not racks.racks_mismatch(consumer, tp)),
                key=lambda tp: (tp[1], jkey(tp[0])),
            )
            mine = [tp for tp in mine if tp not in multi]
            if len(mine) < min_quota:
                assignment[consumer].extend(mine)
                assigned.extend(mine)
                under.append(consumer)
            elif len(mine) >= max_quota and over < expected:
                over += 1
                if over == expected:
                    exactly_min.clear()
                assignment[consumer].extend(mine[:max_quota])
                assigned.extend(mine[:max_quota])
                revoked.update(mine[max_quota:])
            else:
                assignment[consumer].extend(mine[:min_quota])
                assigned.extend(mine[:min_quota])
                revoked.update(mine[min_quota:])
                if over < expected:
                    exactly_min.append(consumer)
        taken = set(assigned)
        unassigned = [
            (t, p)
            for t in sorted(partitions, key=jkey)
            for p in range(partitions[t])
            if (t, p) not in taken
        ]
        under.sort(key=jkey)
        exactly_min.sort(key=jkey)
        unassigned = racks.sort_partitions(unassigned)

        def assign_new(tp: TP, consumer: str) -> int:
            assert self.transferring is not None
            assignment[consumer].append(tp)
            if tp in revoked or tp in multi:
                self.transferring[tp] = consumer
            return len(assignment[consumer])

        if racks.consumer_racks:  # assignRackAwareRoundRobin
            next_index = 0
            left: list[TP] = []
            for tp in unassigned:
                consumer = None
                index = racks.next_rack_consumer(tp, under, next_index)
                if index >= 0:
                    consumer = under[index]
                    count = len(assignment[consumer]) + 1
                    if count >= min_quota:
                        under.remove(consumer)
                        if count < max_quota:
                            exactly_min.append(consumer)
                    else:
                        index += 1
                    next_index = 0 if not under else index % len(under)
                elif (
                    exactly_min and over < expected
                ):  # coordkit: Kafka lacks the `over < expected` guard
                    first = racks.next_rack_consumer(tp, exactly_min, 0)
                    if first >= 0:
                        consumer = exactly_min[first]
                        if len(assignment[consumer]) + 1 == max_quota:
                            exactly_min.pop(first)
                            over += 1  # coordkit: counted for the guard above
                if consumer is not None:
                    assign_new(tp, consumer)
                else:
                    left.append(tp)
            unassigned = left
        # assignRoundRobin
        position = 0
        for tp in unassigned:
            if position < len(under):
                consumer = under[position]
                position += 1
            elif not under:
                consumer = exactly_min.pop(0)
            else:
                position = 1
                consumer = under[0]
            count = assign_new(tp, consumer)
            if count == min_quota and consumer in under:
                position -= 1
                under.remove(consumer)
                exactly_min.append(consumer)
        return assignment

    # -- GeneralAssignmentBuilder
    def _general(
        self,
        partitions: Mapping[str, int],
        racks: _RackInfo,
        current: dict[str, list[TP]],
        subs: Mapping[str, MemberSubscription],
    ) -> dict[str, list[TP]]:
        topic_consumers: dict[str, list[str]] = {t: [] for t in partitions}
        consumer_topics: dict[str, list[str]] = {}
        for consumer, sub in subs.items():
            consumer_topics[consumer] = [t for t in sub.topics if t in partitions]
            for t in consumer_topics[consumer]:
                topic_consumers[t].append(consumer)
            current.setdefault(consumer, [])
        sorted_topics = sorted(partitions, key=lambda t: (len(topic_consumers[t]), jkey(t)))
        sorted_all = [(t, p) for t in sorted_topics for p in range(partitions[t])]
        live: set[str] = set()

        def ordered() -> list[str]:
            return sorted(live, key=lambda c: (len(current[c]), jkey(c)))

        # prepopulateCurrentAssignments
        previous: dict[TP, tuple[str, int]] = {}
        for consumer, sub in subs.items():
            generation = sub.generation
            if generation < self.max_generation:
                for tp in self._member_partitions(sub):
                    if tp not in previous or generation > previous[tp][1]:
                        previous[tp] = (consumer, generation)
        # assignOwnedPartitions
        revocation_required = False
        assigned: set[TP] = set()
        for consumer, parts in current.items():
            kept = []
            for tp in parts:
                if tp[0] not in subs[consumer].topics or racks.racks_mismatch(consumer, tp):
                    revocation_required = True
                else:
                    kept.append(tp)
                    assigned.add(tp)
            current[consumer] = kept
        owner_of = {tp: c for c, parts in current.items() for tp in parts}
        unassigned = [tp for tp in sorted_all if tp not in assigned]
        live.update(current)

        # balance
        initializing = not current[ordered()[-1]]

        def maybe_assign(parts: list[TP], with_racks: bool) -> list[TP]:
            left = []
            for tp in parts:
                for consumer in ordered():
                    if tp[0] in consumer_topics[consumer] and not (
                        with_racks and racks.racks_mismatch(consumer, tp)
                    ):
                        current[consumer].append(tp)
                        owner_of[tp] = consumer
                        break
                else:
                    left.append(tp)
            return left

        to_assign = unassigned
        if racks.consumer_racks:
            to_assign = maybe_assign(to_assign, True)
        maybe_assign(to_assign, False)

        fixed_topics = {t for t in topic_consumers if len(topic_consumers[t]) < 2}
        reassignable = [tp for tp in sorted_all if tp[0] not in fixed_topics]
        unassigned = [tp for tp in unassigned if tp[0] not in fixed_topics]

        def max_size(consumer: str) -> int:
            return sum(partitions[t] for t in consumer_topics[consumer])

        fixed: dict[str, list[TP]] = {}
        for consumer in consumer_topics:
            if len(current[consumer]) < max_size(consumer):
                continue
            if any(len(topic_consumers[tp[0]]) >= 2 for tp in current[consumer]):
                continue
            live.discard(consumer)
            fixed[consumer] = current.pop(consumer)
        before = {c: list(ps) for c, ps in current.items()}
        before_owner = dict(owner_of)
        moves: dict[TP, tuple[str, str]] = {}
        by_topic: dict[str, dict[tuple[str, str], JavaHashOrder]] = {}
        topic_hash = {t: java_string_hash(t) for t in partitions}

        def is_balanced() -> bool:
            order = ordered()
            if len(current[order[0]]) >= len(current[order[-1]]) - 1:
                return True
            for consumer in order:
                count = len(current[consumer])
                if count == max_size(consumer):
                    continue
                for t in consumer_topics[consumer]:
                    for p in range(partitions[t]):
                        if (t, p) not in current[consumer]:
                            other = owner_of[(t, p)]
                            if count + 1 < len(current[other]):
                                return False
            return True

        def add_move(tp: TP, pair: tuple[str, str]) -> None:
            moves[tp] = pair
            table = by_topic.setdefault(tp[0], {}).setdefault(pair, JavaHashOrder())
            table.add(tp, topic_partition_hash(topic_hash[tp[0]], tp[1]))

        def remove_move(tp: TP) -> tuple[str, str]:
            pair = moves.pop(tp)
            table = by_topic[tp[0]][pair]
            table.remove(tp)
            if not len(table):
                del by_topic[tp[0]][pair]
                if not by_topic[tp[0]]:
                    del by_topic[tp[0]]
            return pair

        def actual_partition(tp: TP, old: str, new: str) -> TP:
            if tp[0] not in by_topic:
                return tp
            if tp in moves:
                old = moves[tp][0]
            reverse = by_topic[tp[0]].get((new, old))
            if reverse is None:
                return tp
            first = reverse.first()
            assert isinstance(first, tuple)
            return first

        def process(tp: TP, new: str) -> None:
            old = owner_of[tp]
            if tp in moves:
                existing = remove_move(tp)
                if existing[0] != new:
                    add_move(tp, (existing[0], new))
            else:
                add_move(tp, (old, new))
            current[old].remove(tp)
            current[new].append(tp)
            owner_of[tp] = new

        def reassign(tp: TP, new: str | None = None) -> None:
            if new is None:
                new = next(c for c in ordered() if tp[0] in consumer_topics[c])
            process(actual_partition(tp, owner_of[tp], new), new)

        def perform(parts: list[TP]) -> bool:
            performed = False
            modified = True
            while modified:
                modified = False
                for tp in parts:
                    if is_balanced():
                        break
                    consumer = owner_of[tp]
                    prev = previous.get(tp)
                    # coordkit: the previous owner must still subscribe to the topic (Kafka does not check).
                    if (
                        prev is not None
                        and tp[0] in consumer_topics[prev[0]]
                        and len(current[consumer]) > len(current[prev[0]]) + 1
                    ):
                        reassign(tp, prev[0])
                        performed = modified = True
                        continue
                    for other in topic_consumers[tp[0]]:
                        if len(current[consumer]) > len(current[other]) + 1:
                            reassign(tp)
                            performed = modified = True
                            break
            return performed

        def score(assignment: Mapping[str, list[TP]]) -> int:
            sizes = [len(v) for v in assignment.values()]
            return sum(abs(a - b) for i, a in enumerate(sizes) for b in sizes[i + 1 :])

        if live:
            if not revocation_required:
                perform(unassigned)
            performed = perform(reassignable)
            if not initializing and performed and score(current) >= score(before):
                current.clear()
                current.update({c: list(ps) for c, ps in before.items()})
                owner_of = before_owner
        current.update(fixed)
        return current


def kafka_cooperative(
    reference: KafkaStickyReference, group: GroupSubscription
) -> tuple[dict[str, set[TP]], dict[str, set[TP]]]:
    """Kafka's CooperativeStickyAssignor on top of the transcription: (assigned, withheld)."""
    assignment = reference.assign(group)
    transferring = reference.transferring
    if transferring is None:
        added: dict[TP, str] = {}
        revoked: set[TP] = set()
        for consumer, parts in assignment.items():
            owned = set(KafkaStickyReference._member_partitions(group.members[consumer]))
            added.update({tp: consumer for tp in parts if tp not in owned})
            revoked.update(tp for tp in owned if tp not in set(parts))
        transferring = {tp: c for tp, c in added.items() if tp in revoked}
    assigned = {c: set(ps) for c, ps in assignment.items()}
    withheld: dict[str, set[TP]] = {c: set() for c in assignment}
    for tp, consumer in transferring.items():
        assigned[consumer].discard(tp)
        withheld[consumer].add(tp)
    return assigned, withheld
