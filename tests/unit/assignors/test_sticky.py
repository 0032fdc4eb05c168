"""Kafka's ``sticky`` assignor: Kafka's own test scenarios, and a differential test against a direct,
object-per-partition transcription of Kafka's ``AbstractStickyAssignor`` (Kafka 3.5).

The transcription (:class:`KafkaStickyReference`) follows the Java line by line (``HashMap``
iteration order included) and is slow; the assignor under test is columnar. Where coordkit
deliberately departs from Kafka (documented in ``coordkit_assignors.sticky_*``), the transcription
carries the same guard, marked ``coordkit:``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordkit.assignment import (
    DEFAULT_GENERATION,
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
    java_string_key,
)
from coordkit.plugins import get_plugin_manager
from coordkit_assignors.sticky import CooperativeStickyAssignor, StickyAssignor
from coordkit_assignors.sticky_general import water_fill
from coordkit_assignors.sticky_java import (
    JavaHashOrder,
    hashmap_iteration_order,
    java_string_hash,
    topic_partition_hash,
)
from harness.vectors import kafka_vectors

TP = tuple[str, int]
DIFF_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ---------------------------------------------------------------------------------------------
# A direct transcription of Kafka's AbstractStickyAssignor (clients, Kafka 3.5), for comparison.
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def group_of(
    topics: Mapping[str, int | TopicMetadata], members: Mapping[str, MemberSubscription]
) -> GroupSubscription:
    return GroupSubscription(topics, members)


def sub(
    topics: Sequence[str], owned: Iterable[str] = (), generation: int = 1, rack: str | None = None
) -> MemberSubscription:
    return MemberSubscription(topics, owned=list(owned), generation=generation, rack=rack)


def strings(result: GroupAssignment) -> dict[str, list[str]]:
    return result.as_strings()


def as_sets(result: GroupAssignment) -> dict[str, set[TP]]:
    return {m: {(tp.topic, tp.partition) for tp in result.partitions(m)} for m in result}


def withheld_sets(result: GroupAssignment) -> dict[str, set[TP]]:
    return {m: {(tp.topic, tp.partition) for tp in result.withheld(m)} for m in result}


def assert_valid_and_balanced(group: GroupSubscription, result: GroupAssignment) -> None:
    """Kafka's ``verifyValidityAndBalance``: only subscribed topics, no partition twice, and any
    two members differing by two or more share no topic among the larger one's partitions."""
    assert set(result) == set(group.members)
    seen: set[TP] = set()
    for member in result:
        for tp in result.partitions(member):
            assert tp.topic in group.members[member].topics
            assert (tp.topic, tp.partition) not in seen
            seen.add((tp.topic, tp.partition))
    members = sorted(result)
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            big, small = (a, b) if result.count(a) > result.count(b) else (b, a)
            if result.count(big) - result.count(small) <= 1:
                continue
            assert not {tp.topic for tp in result.partitions(big)} & set(
                group.members[small].topics
            ), f"{big} ({result.count(big)}) could give {small} ({result.count(small)}) a partition"


def fully_balanced(result: GroupAssignment) -> bool:
    counts = result.counts().values()
    return max(counts) - min(counts) <= 1


def resubscribe(
    group: GroupSubscription,
    result: GroupAssignment,
    generation: int = 1,
    topics: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, MemberSubscription]:
    """Every member now owns what ``result`` gave it."""
    return {
        m: sub(
            topics[m] if topics else s.topics,
            [str(tp) for tp in result.partitions(m)],
            generation,
            s.rack,
        )
        for m, s in group.members.items()
    }


def name(prefix: str, i: int, width: int) -> str:
    """Kafka's test names: ``getConsumerName(i, max)`` pads with zeros."""
    return prefix + str(i).zfill(len(str(width)))


STICKY = StickyAssignor()


# ---------------------------------------------------------------------------------------------
# Registry and vectors
# ---------------------------------------------------------------------------------------------


def test_registered_with_kafka_names_and_protocols() -> None:
    assignors = get_plugin_manager().assignors
    sticky = assignors.get("sticky")
    assert sticky.name == "sticky"
    assert [p.value for p in sticky.protocols] == ["eager"]
    cooperative = assignors.get("cooperative-sticky")
    assert [p.value for p in cooperative.protocols] == ["cooperative", "eager"]


def test_kafka_vector_s1() -> None:
    vectors = kafka_vectors()["sticky_fresh"]
    assert vectors
    for vector in vectors:
        group = group_of(vector["partitions"], {m: sub(ts) for m, ts in vector["subs"].items()})
        assert strings(STICKY.assign(group)) == vector["expected"], vector["id"]


# ---------------------------------------------------------------------------------------------
# Kafka's AbstractStickyAssignorTest, ported
# ---------------------------------------------------------------------------------------------


def test_one_consumer_no_topic() -> None:
    result = STICKY.assign(group_of({}, {"consumer": sub([])}))
    assert strings(result) == {"consumer": []}


def test_one_consumer_nonexistent_topic() -> None:
    result = STICKY.assign(group_of({"topic": 0}, {"consumer": sub(["topic"])}))
    assert strings(result) == {"consumer": []}
    result = STICKY.assign(group_of({}, {"consumer": sub(["topic"])}))
    assert strings(result) == {"consumer": []}


def test_one_consumer_one_topic() -> None:
    result = STICKY.assign(group_of({"topic": 3}, {"consumer": sub(["topic"])}))
    assert strings(result) == {"consumer": ["topic-0", "topic-1", "topic-2"]}


def test_only_assigns_partitions_from_subscribed_topics() -> None:
    group = group_of(
        {"topic": 2}, {"consumer": sub(["topic"], ["topic-0", "topic-1", "other-0", "other-1"])}
    )
    assert strings(STICKY.assign(group)) == {"consumer": ["topic-0", "topic-1"]}


def test_one_consumer_multiple_topics() -> None:
    group = group_of({"topic1": 1, "topic2": 2}, {"consumer": sub(["topic1", "topic2"])})
    assert strings(STICKY.assign(group)) == {"consumer": ["topic1-0", "topic2-0", "topic2-1"]}


def test_two_consumers_one_topic_one_partition() -> None:
    result = STICKY.assign(
        group_of({"topic": 1}, {"consumer1": sub(["topic"]), "consumer2": sub(["topic"])})
    )
    assert sorted(result.counts().values()) == [0, 1]


def test_two_consumers_one_topic_two_partitions() -> None:
    result = STICKY.assign(
        group_of({"topic": 2}, {"consumer1": sub(["topic"]), "consumer2": sub(["topic"])})
    )
    assert strings(result) == {"consumer1": ["topic-0"], "consumer2": ["topic-1"]}


def test_multiple_consumers_mixed_topic_subscriptions() -> None:
    group = group_of(
        {"topic1": 3, "topic2": 2},
        {
            "consumer1": sub(["topic1"]),
            "consumer2": sub(["topic1", "topic2"]),
            "consumer3": sub(["topic1"]),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic1-0", "topic1-2"],
        "consumer2": ["topic2-0", "topic2-1"],
        "consumer3": ["topic1-1"],
    }


def test_two_consumers_two_topics_six_partitions() -> None:
    both = ["topic1", "topic2"]
    group = group_of({"topic1": 3, "topic2": 3}, {"consumer1": sub(both), "consumer2": sub(both)})
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic1-0", "topic1-2", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-0", "topic2-2"],
    }


def test_consumer_owning_min_quota_expected_max_quota() -> None:
    both = ["topic1", "topic2"]
    group = group_of(
        {"topic1": 2, "topic2": 3},
        {
            "consumer1": sub(both, ["topic1-0", "topic2-1"]),
            "consumer2": sub(both, ["topic1-1", "topic2-2"]),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic1-0", "topic2-0", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-2"],
    }


def test_max_quota_consumers_more_than_expected_max_capacity_members() -> None:
    # Which of consumer1/consumer2 keeps two partitions follows Java's HashMap order (consumer2 first).
    both = ["topic1", "topic2"]
    group = group_of(
        {"topic1": 2, "topic2": 2},
        {
            "consumer1": sub(both, ["topic1-0", "topic2-0"]),
            "consumer2": sub(both, ["topic1-1", "topic2-1"]),
            "consumer3": sub(both),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic1-0"],
        "consumer2": ["topic1-1", "topic2-1"],
        "consumer3": ["topic2-0"],
    }


def test_all_consumers_are_under_min_quota() -> None:
    both = ["topic1", "topic2"]
    group = group_of(
        {"topic1": 2, "topic2": 3},
        {
            "consumer1": sub(both, ["topic1-0"]),
            "consumer2": sub(both, ["topic1-1"]),
            "consumer3": sub(both),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic1-0", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-2"],
        "consumer3": ["topic2-0"],
    }


def test_add_remove_consumer_one_topic() -> None:
    first = STICKY.assign(group_of({"topic": 3}, {"consumer1": sub(["topic"])}))
    assert strings(first) == {"consumer1": ["topic-0", "topic-1", "topic-2"]}
    second = STICKY.assign(
        group_of(
            {"topic": 3},
            {
                "consumer1": sub(["topic"], first.as_strings()["consumer1"]),
                "consumer2": sub(["topic"]),
            },
        )
    )
    assert strings(second) == {"consumer1": ["topic-0", "topic-1"], "consumer2": ["topic-2"]}
    third = STICKY.assign(
        group_of({"topic": 3}, {"consumer2": sub(["topic"], second.as_strings()["consumer2"])})
    )
    assert strings(third) == {"consumer2": ["topic-0", "topic-1", "topic-2"]}


def test_topic_balance_after_reassignment() -> None:
    both = ["topic1", "topic2"]
    topics = {"topic1": 12, "topic2": 12}

    def per_topic_counts(result: GroupAssignment) -> set[int]:
        return {len(ps) for m in result for ps in result.by_topic(m).values()}

    group = group_of(topics, {"consumer1": sub(both)})
    result = STICKY.assign(group)
    assert per_topic_counts(result) == {12}
    group = group_of(topics, {**resubscribe(group, result), "consumer2": sub(both)})
    result = STICKY.assign(group)
    assert per_topic_counts(result) == {6}
    group = group_of(
        topics, {**resubscribe(group, result), "consumer3": sub(both), "consumer4": sub(both)}
    )
    result = STICKY.assign(group)
    assert per_topic_counts(result) == {3}
    kept = resubscribe(group, result)
    group = group_of(topics, {m: kept[m] for m in ("consumer3", "consumer4")})
    result = STICKY.assign(group)
    assert per_topic_counts(result) == {6}
    assert_valid_and_balanced(group, result)


def test_add_remove_two_consumers_two_topics() -> None:
    both = ["topic1", "topic2"]
    topics = {"topic1": 3, "topic2": 4}
    group = group_of(topics, {"consumer1": sub(both), "consumer2": sub(both)})
    result = STICKY.assign(group)
    assert strings(result) == {
        "consumer1": ["topic1-0", "topic1-2", "topic2-1", "topic2-3"],
        "consumer2": ["topic1-1", "topic2-0", "topic2-2"],
    }
    group = group_of(
        topics, {**resubscribe(group, result), "consumer3": sub(both), "consumer4": sub(both)}
    )
    result = STICKY.assign(group)
    assert strings(result) == {
        "consumer1": ["topic1-0", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-0"],
        "consumer3": ["topic1-2", "topic2-3"],
        "consumer4": ["topic2-2"],
    }
    kept = resubscribe(group, result)
    result = STICKY.assign(group_of(topics, {m: kept[m] for m in ("consumer3", "consumer4")}))
    assert strings(result) == {
        "consumer3": ["topic1-0", "topic1-2", "topic2-1", "topic2-3"],
        "consumer4": ["topic1-1", "topic2-0", "topic2-2"],
    }


def test_poor_round_robin_assignment_scenario() -> None:
    topics = {f"topic{i}": (i % 2) + 1 for i in range(1, 6)}
    all5 = list(topics)
    odd = ["topic1", "topic3", "topic5"]
    group = group_of(
        topics,
        {
            "consumer1": sub(all5),
            "consumer2": sub(odd),
            "consumer3": sub(odd),
            "consumer4": sub(all5),
        },
    )
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    assert fully_balanced(result)


def test_add_remove_topic_two_consumers() -> None:
    group = group_of({"topic": 3}, {"consumer1": sub(["topic"]), "consumer2": sub(["topic"])})
    first = STICKY.assign(group)
    assert sorted(first.counts().values()) == [1, 2]
    topics = {"topic": 3, "topic2": 3}
    group = group_of(
        topics,
        resubscribe(
            group,
            first,
            topics={"consumer1": ["topic", "topic2"], "consumer2": ["topic", "topic2"]},
        ),
    )
    second = STICKY.assign(group)
    assert sorted(second.counts().values()) == [3, 3]
    for member in ("consumer1", "consumer2"):
        assert set(first.partitions(member)) <= set(second.partitions(member))
    group = group_of(
        {"topic2": 3},
        resubscribe(group, second, topics={"consumer1": ["topic2"], "consumer2": ["topic2"]}),
    )
    third = STICKY.assign(group)
    assert sorted(third.counts().values()) == [1, 2]
    for member in ("consumer1", "consumer2"):
        assert set(third.partitions(member)) <= set(second.partitions(member))


def test_reassignment_after_one_consumer_leaves_moves_only_its_partitions() -> None:
    topics = {name("t", i, 20): i for i in range(1, 20)}
    members = {
        name("c", i, 20): sub([name("t", j, 20) for j in range(1, i + 1)]) for i in range(1, 20)
    }
    group = group_of(topics, members)
    first = STICKY.assign(group)
    assert_valid_and_balanced(group, first)
    members = resubscribe(group, first)
    del members["c10"]
    group = group_of(topics, members)
    second = STICKY.assign(group)
    assert_valid_and_balanced(group, second)
    assert second == STICKY.assign(group)  # deterministic
    for member in members:  # only c10's partitions move
        assert set(first.partitions(member)) <= set(second.partitions(member))
    moved = {tp for m in members for tp in set(second.partitions(m)) - set(first.partitions(m))}
    assert moved == set(first.partitions("c10"))


def test_reassignment_after_one_consumer_added() -> None:
    members = {name("c", i, 10): sub(["topic"]) for i in range(1, 10)}
    group = group_of({"topic": 20}, members)
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    group = group_of({"topic": 20}, {**members, name("c", 10, 10): sub(["topic"])})
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    assert fully_balanced(result)


def test_same_subscriptions_after_member_leaves_members_keep_their_partitions() -> None:
    topics = {name("t", i, 15): i for i in range(1, 15)}
    members = {name("c", i, 9): sub(list(topics)) for i in range(1, 9)}
    group = group_of(topics, members)
    first = STICKY.assign(group)
    members = resubscribe(group, first)
    del members[name("c", 5, 9)]
    group = group_of(topics, members)
    second = STICKY.assign(group)
    assert_valid_and_balanced(group, second)
    for member in members:
        assert set(first.partitions(member)) <= set(second.partitions(member))


def test_large_assignment_with_multiple_consumers_leaving_and_random_subscription() -> None:
    import random

    rand = random.Random(7)
    topics = {name("t", i, 40): rand.randint(1, 10) for i in range(40)}
    members = {
        name("c", i, 200): sub(
            [name("t", rand.randrange(40), 40) for _ in range(rand.randrange(20))] or ["t00"]
        )
        for i in range(200)
    }
    group = group_of(topics, members)
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    members = resubscribe(group, result)
    for _ in range(50):
        members.pop(name("c", rand.randrange(200), 200), None)
    group = group_of(topics, members)
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)


def test_new_subscription_keeps_assignment_valid() -> None:
    topics = {name("t", i, 5): 1 for i in range(1, 5)}
    members = {
        name("c", i, 3): sub([name("t", j, 5) for j in range(i, 3 * i - 1)] or []) for i in range(3)
    }
    group = group_of(topics, members)
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    members = resubscribe(group, result)
    members["c0"] = sub(["t1"], [], 1)
    group = group_of(topics, members)
    assert_valid_and_balanced(group, STICKY.assign(group))


def test_move_existing_assignments() -> None:
    topics = {f"topic{i}": 1 for i in range(1, 7)}
    group = group_of(
        topics,
        {
            "consumer1": sub(["topic1", "topic2"], ["topic1-0"]),
            "consumer2": sub(["topic1", "topic2", "topic3", "topic4"], ["topic2-0", "topic3-0"]),
            "consumer3": sub(
                ["topic2", "topic3", "topic4", "topic5", "topic6"],
                ["topic4-0", "topic5-0", "topic6-0"],
            ),
        },
    )
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)


def test_stickiness_when_potential_leader_leaves() -> None:
    members = {f"consumer{i}": sub(["topic1"]) for i in range(1, 5)}
    group = group_of({"topic1": 3}, members)
    first = STICKY.assign(group)
    assert max(first.counts().values()) == 1
    members = resubscribe(group, first)
    del members["consumer1"]
    group = group_of({"topic1": 3}, members)
    second = STICKY.assign(group)
    for member in members:
        assert second.count(member) == 1
        assert set(first.partitions(member)) <= set(second.partitions(member))


def test_static_member_rejoining_with_a_new_member_id_keeps_its_partitions() -> None:
    # Kafka's sticky assignor orders members by member id only (group.instance.id plays no part),
    # and a static member that restarts comes back with a new member id and its owned partitions.
    topics = {"t1": 4, "t2": 4}
    both = list(topics)
    members = {
        "m-1": MemberSubscription(both, instance_id="zeta"),
        "m-2": MemberSubscription(both, instance_id="alpha"),
        "m-3": MemberSubscription(both),
    }
    first = STICKY.assign(group_of(topics, members))
    assert strings(first) == strings(
        STICKY.assign(group_of(topics, {m: sub(both) for m in members}))
    )
    owned = {m: [str(tp) for tp in first.partitions(m)] for m in members}
    rejoined = {
        "m-1": MemberSubscription(both, instance_id="zeta", owned=owned["m-1"], generation=4),
        "m-9": MemberSubscription(both, instance_id="alpha", owned=owned["m-2"], generation=4),
        "m-3": MemberSubscription(both, owned=owned["m-3"], generation=4),
    }
    second = STICKY.assign(group_of(topics, rejoined))
    assert second.as_strings() == {"m-1": owned["m-1"], "m-9": owned["m-2"], "m-3": owned["m-3"]}


def test_assignment_updated_for_deleted_topic() -> None:
    group = group_of(
        {"topic1": 1, "topic3": 100}, {"consumer": sub(["topic1", "topic2", "topic3"])}
    )
    assert STICKY.assign(group).count("consumer") == 101


def test_no_exception_when_only_subscribed_topic_deleted() -> None:
    first = STICKY.assign(group_of({"topic": 3}, {"consumer": sub(["topic"])}))
    result = STICKY.assign(
        group_of({}, {"consumer": sub(["topic"], first.as_strings()["consumer"])})
    )
    assert strings(result) == {"consumer": []}


def test_owned_partitions_of_deleted_topic_are_dropped() -> None:
    group = group_of(
        {"t1": 2},
        {
            "a": sub(["t1", "gone"], ["t1-0", "gone-0", "gone-1", "t1-7"]),
            "b": sub(["t1", "gone"], ["t1-1"]),
        },
    )
    assert strings(STICKY.assign(group)) == {"a": ["t1-0"], "b": ["t1-1"]}


def test_all_consumers_reach_expected_quota_and_are_considered_filled() -> None:
    group = group_of(
        {"topic": 4},
        {
            "consumer1": sub(["topic"], ["topic-0", "topic-1"]),
            "consumer2": sub(["topic"], ["topic-2"]),
            "consumer3": sub(["topic"]),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic-0", "topic-1"],
        "consumer2": ["topic-2"],
        "consumer3": ["topic-3"],
    }


@pytest.mark.parametrize("stale_generation", [9, DEFAULT_GENERATION])
def test_owned_partitions_invalidated_for_consumer_with_stale_or_no_generation(
    stale_generation: int,
) -> None:
    both = ["topic", "topic2"]
    owned = ["topic-0", "topic-2", "topic2-1"]
    group = group_of(
        {"topic": 3, "topic2": 3},
        {"consumer1": sub(both, owned, 10), "consumer2": sub(both, owned, stale_generation)},
    )
    assert as_sets(STICKY.assign(group)) == {
        "consumer1": {("topic", 0), ("topic", 2), ("topic2", 1)},
        "consumer2": {("topic", 1), ("topic2", 0), ("topic2", 2)},
    }


def test_partition_claimed_by_two_members_in_same_generation_goes_to_neither() -> None:
    group = group_of(
        {"topic": 3},
        {
            "consumer1": sub(["topic"], ["topic-0", "topic-1"]),
            "consumer2": sub(["topic"], ["topic-0", "topic-2"]),
            "consumer3": sub(["topic"]),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic-1"],
        "consumer2": ["topic-2"],
        "consumer3": ["topic-0"],
    }


def test_partitions_assigned_to_highest_generation() -> None:
    three = ["topic", "topic2", "topic3"]
    group = group_of(
        {"topic": 3, "topic2": 3, "topic3": 3},
        {
            "consumer1": sub(three, ["topic-0", "topic2-0", "topic3-0"], 10),
            "consumer2": sub(three, ["topic-1", "topic2-1", "topic3-1"], 9),
            "consumer3": sub(three, ["topic2-1", "topic3-0", "topic3-2"], 8),
        },
    )
    assert as_sets(STICKY.assign(group)) == {
        "consumer1": {("topic", 0), ("topic2", 0), ("topic3", 0)},
        "consumer2": {("topic", 1), ("topic2", 1), ("topic3", 1)},
        "consumer3": {("topic", 2), ("topic2", 2), ("topic3", 2)},
    }


def test_no_reassignment_on_current_members() -> None:
    four = ["topic", "topic2", "topic3", "topic1"]
    group = group_of(
        {"topic": 3, "topic1": 3, "topic2": 3, "topic3": 3},
        {
            "consumer1": sub(four, [], DEFAULT_GENERATION),
            "consumer2": sub(four, ["topic-0", "topic2-0", "topic1-0"], 9),
            "consumer3": sub(four, ["topic3-2", "topic2-2", "topic1-1"], 8),
            "consumer4": sub(four, ["topic3-1", "topic-1", "topic-2"], 7),
        },
    )
    result = STICKY.assign(group)
    assert as_sets(result)["consumer1"] == {("topic1", 2), ("topic2", 1), ("topic3", 0)}
    assert fully_balanced(result)


def test_owned_partitions_invalidated_for_consumer_with_multiple_generations() -> None:
    both = ["topic", "topic2"]
    group = group_of(
        {"topic": 3, "topic2": 3},
        {
            "consumer1": sub(both, ["topic-0", "topic2-1", "topic-1"], 10),
            "consumer2": sub(both, ["topic-0", "topic2-1", "topic2-2"], 8),
        },
    )
    assert as_sets(STICKY.assign(group)) == {
        "consumer1": {("topic", 0), ("topic2", 1), ("topic", 1)},
        "consumer2": {("topic", 2), ("topic2", 2), ("topic2", 0)},
    }


@pytest.mark.parametrize(
    "order", [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)]
)
def test_subscription_not_equal_and_same_partition_with_three_generations(
    order: tuple[int, int, int],
) -> None:
    group = group_of(
        {"topic": 6, "topic1": 1},
        {
            "consumer1": sub(["topic"], ["topic-0", "topic-2"], order[0]),
            "consumer2": sub(["topic"], ["topic-1", "topic-2", "topic-3"], order[1]),
            "consumer3": sub(["topic"], ["topic-2", "topic-4", "topic-5"], order[2]),
            "consumer4": sub(["topic1"], ["topic1-0"], 2),
        },
    )
    result = STICKY.assign(group)
    total = sum(result.counts().values())
    assert total == 7 == len({tp for m in result for tp in result.partitions(m)})
    assert all(1 <= n <= 2 for n in result.counts().values())


def test_large_uniform_group_is_balanced() -> None:
    topics = {name("t", i, 50): 200 for i in range(50)}
    members = {name("c", i, 300): sub(list(topics)) for i in range(300)}
    group = group_of(topics, members)
    result = STICKY.assign(group)
    assert set(result.counts().values()) <= {33, 34}
    members = resubscribe(group, result)
    members.pop(name("c", 0, 300))
    second = STICKY.assign(group_of(topics, members))
    for member in members:  # nobody loses a partition when a member leaves
        assert set(result.partitions(member)) <= set(second.partitions(member))


def test_non_equal_subscription_large_group_is_valid_and_sticky() -> None:
    topics = {name("t", i, 100): 20 for i in range(100)}
    first_half, second_half = list(topics)[:50], list(topics)[50:]
    members = {
        name("c", i, 500): sub(first_half if i % 4 == 0 else second_half) for i in range(500)
    }
    group = group_of(topics, members)
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    members = resubscribe(group, result)
    members.pop(name("c", 0, 500))
    group = group_of(topics, members)
    second = STICKY.assign(group)
    assert_valid_and_balanced(group, second)
    moved = sum(len(set(result.partitions(m)) - set(second.partitions(m))) for m in members)
    assert moved == 0


# ---------------------------------------------------------------------------------------------
# Rack-aware (KIP-881): Kafka's testRackAwareAssignmentWith{Uniform,NonEqual}Subscription
# ---------------------------------------------------------------------------------------------

ALL_RACKS = ["a", "b", "c", "d", "e", "f"]
RACK_TOPICS = [("t1", 6), ("t2", 7), ("t3", 2)]


def racks(n: int) -> list[str | None]:
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


def null_racks(n: int) -> list[str | None]:
    return [None] * n


def rack_group(
    replication: int,
    broker_racks: Sequence[str | None],
    consumer_racks: Sequence[str | None],
    consumer_topics: Sequence[Sequence[str]],
    owned: Sequence[str] | None,
) -> tuple[GroupSubscription, dict[str, TopicMetadata]]:
    """Kafka's ``verifyRackAssignment`` set-up: replicas of partition i of a topic starting at
    broker offset o sit on brokers (i + j + o) % brokers; members are consumer0, consumer1, ..."""
    metas: dict[str, TopicMetadata] = {}
    offset = 0
    for topic, count in RACK_TOPICS:
        replica_racks = []
        for i in range(count):
            on = [broker_racks[(i + j + offset) % len(broker_racks)] for j in range(replication)]
            replica_racks.append(tuple(r for r in on if r is not None))
        metas[topic] = TopicMetadata(count, replica_racks=replica_racks)
        offset += count
    members = {
        f"consumer{i}": sub(
            topics,
            owned[i].split(", ") if owned and i < len(owned) else [],
            DEFAULT_GENERATION,
            consumer_racks[i],
        )
        for i, topics in enumerate(consumer_topics)
    }
    return group_of(metas, members), metas


def verify_rack_assignment(
    assignor: StickyAssignor | CooperativeStickyAssignor,
    replication: int,
    broker_racks: Sequence[str | None],
    consumer_racks: Sequence[str | None],
    consumer_topics: Sequence[Sequence[str]],
    owned: Sequence[str] | None,
    expected: Sequence[str],
    mismatched: int,
) -> None:
    group, metas = rack_group(replication, broker_racks, consumer_racks, consumer_topics, owned)
    result = assignor.assign(group)
    got = [
        ", ".join(sorted(result.as_strings()[f"consumer{i}"])) for i in range(len(consumer_topics))
    ]
    assert got == list(expected)
    if mismatched >= 0:
        count = 0
        for i, rack in enumerate(consumer_racks):
            if rack is None:
                continue
            for tp in result.partitions(f"consumer{i}"):
                replica_racks = metas[tp.topic].replica_racks
                assert replica_racks is not None
                count += rack not in replica_racks[tp.partition]
        assert count == mismatched


ALL3 = ["t1", "t2", "t3"]
UNIFORM = [
    "t1-0, t1-3, t2-0, t2-3, t2-6",
    "t1-1, t1-4, t2-1, t2-4, t3-0",
    "t1-2, t1-5, t2-2, t2-5, t3-1",
]
NON_EQUAL = [
    "t1-5, t2-0, t2-2, t2-4, t2-6",
    "t1-3, t2-1, t2-3, t2-5, t3-0",
    "t1-0, t1-1, t1-2, t1-4, t3-1",
]
MISALIGNED_OWNED = [
    "t1-0, t1-1, t1-2, t1-3, t1-4",
    "t1-5, t2-0, t2-1, t2-2, t2-3",
    "t2-4, t2-5, t2-6, t3-0, t3-1",
]
PREFER = StickyAssignor(prefer_rack_aware=True)
RACK_CASES = [
    # (assignor, replication, broker racks, consumer racks, expected, mismatched)
    (STICKY, 3, null_racks(3), racks(3), None, -1),
    (STICKY, 3, racks(3), null_racks(3), None, -1),
    (PREFER, 3, racks(3), racks(3), None, 0),
    (PREFER, 4, racks(4), racks(3), None, 0),
    (STICKY, 3, racks(3), racks(3), None, 0),
    (STICKY, 3, racks(3), ["d", "e", "f"], None, -1),
    (STICKY, 3, racks(3), [None, "e", "f"], None, -1),
]


@pytest.mark.parametrize("with_owned", [False, True])
@pytest.mark.parametrize(
    ("assignor", "replication", "brokers", "consumers", "expected", "mismatched"), RACK_CASES
)
def test_rack_aware_uniform_subscription_matches_non_rack_result_when_racks_cannot_help(
    assignor: StickyAssignor,
    replication: int,
    brokers: list[str | None],
    consumers: list[str | None],
    expected: None,
    mismatched: int,
    with_owned: bool,
) -> None:
    owned = UNIFORM if with_owned else None
    verify_rack_assignment(
        assignor, replication, brokers, consumers, [ALL3] * 3, owned, UNIFORM, mismatched
    )


@pytest.mark.parametrize("with_owned", [False, True])
@pytest.mark.parametrize(
    ("replication", "brokers", "mismatched"), [(1, racks(3), 0), (2, racks(3), 0), (3, racks(2), 5)]
)
def test_rack_aware_uniform_subscription(
    replication: int, brokers: list[str | None], mismatched: int, with_owned: bool
) -> None:
    owned = UNIFORM if with_owned else None
    verify_rack_assignment(
        STICKY, replication, brokers, racks(3), [ALL3] * 3, owned, UNIFORM, mismatched
    )


def test_rack_aware_uniform_subscription_improves_misaligned_ownership() -> None:
    verify_rack_assignment(STICKY, 1, racks(3), racks(3), [ALL3] * 3, MISALIGNED_OWNED, UNIFORM, 0)
    verify_rack_assignment(PREFER, 3, racks(3), racks(3), [ALL3] * 3, UNIFORM, UNIFORM, 0)


@pytest.mark.parametrize("with_owned", [False, True])
@pytest.mark.parametrize(
    ("assignor", "replication", "brokers", "consumers", "expected", "mismatched"), RACK_CASES
)
def test_rack_aware_non_equal_subscription_matches_non_rack_result_when_racks_cannot_help(
    assignor: StickyAssignor,
    replication: int,
    brokers: list[str | None],
    consumers: list[str | None],
    expected: None,
    mismatched: int,
    with_owned: bool,
) -> None:
    owned = NON_EQUAL if with_owned else None
    topics = [ALL3, ALL3, ["t1", "t3"]]
    verify_rack_assignment(
        assignor, replication, brokers, consumers, topics, owned, NON_EQUAL, mismatched
    )


@pytest.mark.parametrize(
    ("replication", "brokers", "expected", "mismatched"),
    [
        (
            1,
            racks(3),
            [
                "t1-3, t2-0, t2-2, t2-3, t2-6",
                "t1-4, t2-1, t2-4, t2-5, t3-0",
                "t1-0, t1-1, t1-2, t1-5, t3-1",
            ],
            4,
        ),
        (
            2,
            racks(3),
            [
                "t1-3, t2-0, t2-2, t2-5, t2-6",
                "t1-0, t2-1, t2-3, t2-4, t3-0",
                "t1-1, t1-2, t1-4, t1-5, t3-1",
            ],
            0,
        ),
        (3, racks(2), NON_EQUAL, 5),
    ],
)
def test_rack_aware_non_equal_subscription(
    replication: int, brokers: list[str | None], expected: list[str], mismatched: int
) -> None:
    topics = [ALL3, ALL3, ["t1", "t3"]]
    verify_rack_assignment(
        STICKY, replication, brokers, racks(3), topics, None, expected, mismatched
    )
    verify_rack_assignment(
        STICKY, replication, brokers, racks(3), topics, expected, expected, mismatched
    )


def test_rack_aware_constrained_never_leaves_a_member_below_min_quota() -> None:
    # consumer2's rack holds no replica; Kafka 3.5 would give both extras to rack-matching members
    # at minQuota and then fail ("doesn't reach minQuota"); coordkit keeps N % M extras.
    metas = {"t": TopicMetadata(4, replica_racks=[("a",), ("b",), ("a",), ("b",)])}
    group = group_of(
        metas,
        {
            "consumer0": sub(["t"], ["t-0"], 1, "a"),
            "consumer1": sub(["t"], ["t-1"], 1, "b"),
            "consumer2": sub(["t"], [], 1, "c"),
        },
    )
    result = STICKY.assign(group)
    assert sorted(result.counts().values()) == [1, 1, 2]
    assert ("t", 0) in as_sets(result)["consumer0"]
    assert ("t", 1) in as_sets(result)["consumer1"]


# ---------------------------------------------------------------------------------------------
# Java collection orders
# ---------------------------------------------------------------------------------------------


def test_java_string_hash_matches_java() -> None:
    # Values of String.hashCode() in Java (as unsigned 32-bit).
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("consumer1") == 3873962747
    assert java_string_hash("\U00010000") == (0xD800 * 31 + 0xDC00)  # two UTF-16 code units


def test_hashmap_order_of_kafka_test_consumers() -> None:
    keys = ["consumer1", "consumer2", "consumer3", "consumer4"]
    assert [keys[i] for i in hashmap_iteration_order(keys)] == [
        "consumer4",
        "consumer3",
        "consumer2",
        "consumer1",
    ]


def test_java_hash_set_resizes_and_keeps_insertion_order_within_buckets() -> None:
    table = JavaHashOrder()
    table.add("x", 16)  # bucket 0 of 16
    table.add("y", 0)  # bucket 0, inserted later
    table.add("z", 1)
    assert table.order() == ["x", "y", "z"]
    for i in range(20):
        table.add(i, 100 + i)
    assert table.capacity == 32  # 23 entries exceed 0.75 * 16
    assert table.order()[:2] == ["y", "z"]  # with 32 buckets "x" (hash 16) moves to bucket 16
    table.remove("y")
    assert table.first() == "z"
    assert topic_partition_hash(java_string_hash("t"), 0) == (31 * 31 + 116)


# ---------------------------------------------------------------------------------------------
# Water-filling equals Kafka's one-partition-at-a-time least-loaded choice
# ---------------------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 40), min_size=1, max_size=12), st.integers(0, 120))
@settings(max_examples=300, deadline=None)
def test_water_fill_matches_one_by_one_least_loaded(counts: list[int], n: int) -> None:
    import numpy as np

    current = list(counts)
    expected = []
    for _ in range(n):
        pick = min(range(len(current)), key=lambda i: (current[i], i))
        expected.append(pick)
        current[pick] += 1
    assert water_fill(np.array(counts, dtype=np.int64), n).tolist() == expected


# ---------------------------------------------------------------------------------------------
# Differential: the columnar assignor equals the transcription of Kafka's Java
# ---------------------------------------------------------------------------------------------

TOPIC_POOL = ("t1", "t2", "t3", "topic")
MEMBER_POOL = ("c1", "c2", "c3", "c10", "consumer", "b", "B", "\uff5e", "\U00010000x", "c4")
RACK_POOL = ("a", "b", "c")


@st.composite
def groups(draw: st.DrawFn, racks_too: bool = False) -> tuple[GroupSubscription, bool]:
    topic_names = draw(st.lists(st.sampled_from(TOPIC_POOL), min_size=1, max_size=4, unique=True))
    counts = {t: draw(st.integers(0, 7)) for t in topic_names}
    metas: dict[str, TopicMetadata] = {}
    for t, count in counts.items():
        replica_racks = None
        if racks_too and draw(st.booleans()):
            replica_racks = [
                tuple(draw(st.lists(st.sampled_from(RACK_POOL), max_size=2, unique=True)))
                for _ in range(count)
            ]
        metas[t] = TopicMetadata(count, replica_racks=replica_racks)
    member_ids = draw(st.lists(st.sampled_from(MEMBER_POOL), min_size=1, max_size=7, unique=True))
    subscribable = [*topic_names, "ghost"]  # "ghost" has no metadata
    identical = draw(st.booleans())
    common = draw(st.lists(st.sampled_from(subscribable), min_size=1, max_size=4, unique=True))
    subscriptions = {
        m: common
        if identical
        else draw(st.lists(st.sampled_from(subscribable), min_size=1, max_size=4, unique=True))
        for m in member_ids
    }
    generations = {m: draw(st.sampled_from([DEFAULT_GENERATION, 1, 2, 3])) for m in member_ids}
    owned: dict[str, list[str]] = {m: [] for m in member_ids}
    for t, count in counts.items():
        for p in range(count):
            # at most two claimants per partition (Kafka's result for three depends on HashMap order)
            claimants = draw(st.lists(st.sampled_from(member_ids), max_size=2, unique=True))
            for m in claimants:
                owned[m].append(f"{t}-{p}")
    member_racks = {
        m: (draw(st.sampled_from([None, *RACK_POOL])) if racks_too else None) for m in member_ids
    }
    members = {
        m: sub(subscriptions[m], owned[m], generations[m], member_racks[m]) for m in member_ids
    }
    return group_of(metas, members), draw(st.booleans())


def reference_sets(assignment: Mapping[str, list[TP]]) -> dict[str, set[TP]]:
    return {m: set(ps) for m, ps in assignment.items()}


@given(groups())
@DIFF_SETTINGS
def test_matches_kafka_transcription(case: tuple[GroupSubscription, bool]) -> None:
    group, _ = case
    assert as_sets(StickyAssignor().assign(group)) == reference_sets(
        KafkaStickyReference().assign(group)
    )


@given(groups(racks_too=True))
@DIFF_SETTINGS
def test_matches_kafka_transcription_with_racks(case: tuple[GroupSubscription, bool]) -> None:
    group, prefer = case
    ours = StickyAssignor(prefer_rack_aware=prefer).assign(group)
    assert as_sets(ours) == reference_sets(KafkaStickyReference(prefer).assign(group))


@given(groups())
@DIFF_SETTINGS
def test_cooperative_matches_kafka_transcription(case: tuple[GroupSubscription, bool]) -> None:
    group, _ = case
    ours = CooperativeStickyAssignor().assign(group)
    assigned, withheld = kafka_cooperative(KafkaStickyReference(), group)
    assert as_sets(ours) == assigned
    assert withheld_sets(ours) == withheld


def _perturbed_case(rng: Any, with_racks: bool) -> tuple[GroupSubscription, bool]:
    """A group that rebalanced once, then changed: members left, joined, resubscribed, lost
    generations; owned partitions come from the first assignment (what Kafka sees in practice)."""
    topic_count = rng.randint(1, 8)
    sizes = {f"t{i}": rng.randint(1, 25) for i in range(topic_count)}
    metas = {}
    for topic, count in sizes.items():
        replica_racks = None
        if with_racks and rng.random() < 0.7:
            replica_racks = [tuple(rng.sample("abc", rng.randint(0, 2))) for _ in range(count)]
        metas[topic] = TopicMetadata(count, replica_racks=replica_racks)
    ids = [f"m{i}" for i in range(rng.randint(2, 14))]
    topics = list(sizes)
    subscriptions = {m: rng.sample(topics, rng.randint(1, topic_count)) for m in ids}
    member_racks = {m: rng.choice([None, "a", "b", "c"]) if with_racks else None for m in ids}
    first = STICKY.assign(
        group_of(metas, {m: sub(subscriptions[m], rack=member_racks[m]) for m in ids})
    )
    members = {}
    for m in ids:
        if rng.random() < 0.15:
            continue
        owned = [str(tp) for tp in first.partitions(m)]
        if rng.random() < 0.2:
            owned = owned[: len(owned) // 2]
        topics_now = (
            subscriptions[m]
            if rng.random() < 0.7
            else rng.sample(topics, rng.randint(1, topic_count))
        )
        members[m] = sub(
            topics_now, owned, rng.choice([1, 1, 1, 0, DEFAULT_GENERATION]), member_racks[m]
        )
    for i in range(rng.randint(0, 3)):
        members[f"n{i}"] = sub(
            rng.sample(topics, rng.randint(1, topic_count)),
            rack=rng.choice([None, "a", "b"]) if with_racks else None,
        )
    members = members or {"solo": sub(topics)}
    return group_of(metas, members), rng.random() < 0.3


@pytest.mark.parametrize("tracker", ["auto", "class-heaps", "signature-counts"])
@pytest.mark.parametrize("seed", range(3))
def test_matches_kafka_transcription_after_membership_changes(
    seed: int, tracker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    import coordkit_assignors.sticky_minima as minima

    limits = {"class-heaps": 10**9, "signature-counts": -1}
    if tracker in limits:
        monkeypatch.setattr(minima, "HEAP_WORK_LIMIT", limits[tracker])
    rng = random.Random(seed)
    for i in range(60):
        group, prefer = _perturbed_case(rng, with_racks=i % 2 == 1)
        ours = StickyAssignor(prefer_rack_aware=prefer).assign(group)
        assert as_sets(ours) == reference_sets(KafkaStickyReference(prefer).assign(group)), (
            seed,
            i,
        )
        if i % 2 == 0:
            assigned, withheld = kafka_cooperative(KafkaStickyReference(), group)
            cooperative = CooperativeStickyAssignor().assign(group)
            assert (as_sets(cooperative), withheld_sets(cooperative)) == (assigned, withheld), (
                seed,
                i,
            )


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

PROPERTY_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@given(groups(racks_too=True))
@PROPERTY_SETTINGS
def test_every_subscribed_partition_assigned_once_to_a_subscriber(
    case: tuple[GroupSubscription, bool],
) -> None:
    group, prefer = case
    result = StickyAssignor(prefer_rack_aware=prefer).assign(group)
    wanted = {t for s in group.members.values() for t in s.topics}
    expected = sorted(
        (t, p) for t, meta in group.topics.items() if t in wanted for p in range(meta.partitions)
    )
    seen = sorted((tp.topic, tp.partition) for m in result for tp in result.partitions(m))
    assert seen == expected
    assert set(result) == set(group.members)
    assert not result.has_withheld
    for member in result:
        assert {tp.topic for tp in result.partitions(member)} <= set(group.members[member].topics)
    assert_valid_and_balanced(group, result)


@given(groups(), st.randoms(use_true_random=False))
@PROPERTY_SETTINGS
def test_deterministic_whatever_the_member_listing_order(
    case: tuple[GroupSubscription, bool], rand: Any
) -> None:
    group, _ = case
    items = list(group.members.items())
    rand.shuffle(items)
    shuffled = GroupSubscription(group.topics, dict(items))
    assert STICKY.assign(group) == STICKY.assign(shuffled)


@given(groups())
@PROPERTY_SETTINGS
def test_identical_subscriptions_are_fully_balanced(case: tuple[GroupSubscription, bool]) -> None:
    group, _ = case
    first = next(iter(group.members.values())).topics
    same = GroupSubscription(
        group.topics,
        {
            m: sub(first, [f"{t}-{p}" for t, ps in s.owned.items() for p in ps], s.generation)
            for m, s in group.members.items()
        },
    )
    assert fully_balanced(STICKY.assign(same))


@given(groups(), st.data())
@PROPERTY_SETTINGS
def test_members_that_stay_keep_everything_when_one_leaves(
    case: tuple[GroupSubscription, bool], data: st.DataObject
) -> None:
    group, _ = case
    first_topics = next(iter(group.members.values())).topics
    fresh = GroupSubscription(group.topics, {m: sub(first_topics) for m in group.members})
    before = STICKY.assign(fresh)
    leaving = data.draw(st.sampled_from(sorted(group.members)))
    members = {m: s for m, s in resubscribe(fresh, before).items() if m != leaving}
    if not members:
        return
    after = STICKY.assign(GroupSubscription(group.topics, members))
    for member in members:
        assert set(before.partitions(member)) <= set(after.partitions(member))
    assert fully_balanced(after)
