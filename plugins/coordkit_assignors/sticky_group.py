"""A group prepared for Kafka's sticky assignment: members, topics and ownership claims as integers.

Members are numbered in Java ``String`` order of their ids (Kafka's sticky assignor sorts members by
id, ignoring ``group.instance.id``); partitions by their global index in the group's
:class:`PartitionSpace`. Previously owned partitions become two parallel integer arrays (member,
partition), built without one Python object per partition, and the claims are resolved the way
Kafka's ``allSubscriptionsEqual`` resolves them.
"""

from __future__ import annotations

from itertools import chain, repeat

import numpy as np
import numpy.typing as npt

from coordkit.assignment import (
    DEFAULT_GENERATION,
    GroupSubscription,
    PartitionSpace,
    java_string_key,
)
from coordkit_assignors.sticky_java import hashmap_iteration_order

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class StickyGroup:
    """The columnar input of the sticky builders.

    :ivar member_ids: member ids in Java order; a member's number is its position.
    :ivar hash_order: member numbers in the iteration order of Kafka's ``HashMap`` of subscriptions.
    :ivar topics: the assignable topics (subscribed by someone, with metadata and partitions), in
        Java order; a topic's number is its position.
    :ivar member_topics: per member, the numbers of its assignable subscribed topics.
    :ivar all_subscriptions_equal: whether every member lists the same topics (Kafka compares the
        raw subscriptions, topics without metadata included).
    :ivar claim_member, claim_partition: every valid previously-owned partition, deduplicated per
        member, whatever its generation (what members will revoke if it moves).
    :ivar owned_member, owned_partition: the claims that survive conflicts: a partition claimed by
        several members stays with the one of highest generation, and with nobody if several share
        the highest generation.
    """

    def __init__(self, group: GroupSubscription):
        self.group = group
        self.space: PartitionSpace = group.space()
        space = self.space
        self.member_ids: list[str] = sorted(group.members, key=java_string_key)
        number_of = {m: i for i, m in enumerate(self.member_ids)}
        self.input_positions: list[int] = [number_of[m] for m in group.members]
        subs = [group.members[m] for m in self.member_ids]
        self.size = len(self.member_ids)
        self.generations: IntArray = np.array([s.generation for s in subs], dtype=np.int64)
        self.max_generation = max(
            DEFAULT_GENERATION, int(self.generations.max()) if self.size else DEFAULT_GENERATION
        )
        # Within a bucket Java keeps insertion (JoinGroup) order, which a GroupSubscription does not
        # carry: inserting in id order keeps the result independent of how members are listed.
        self.hash_order: IntArray = np.array(
            hashmap_iteration_order(self.member_ids), dtype=np.int64
        )
        self.racks: list[str | None] = [s.rack or None for s in subs]

        # Topics: Kafka's partitionsPerTopic holds subscribed topics with metadata and partitions.
        subscribed: set[str] = set()
        for topics in {s.topics for s in subs}:
            subscribed.update(topics)
        self.topics: list[str] = sorted(
            (t for t in subscribed if space.count(t) > 0), key=java_string_key
        )
        topic_number = {t: i for i, t in enumerate(self.topics)}
        self.topic_bases: IntArray = np.array([space.base(t) for t in self.topics], dtype=np.int64)
        self.topic_counts: IntArray = np.array(
            [space.count(t) for t in self.topics], dtype=np.int64
        )
        self.total = int(self.topic_counts.sum())

        raw_sets: dict[tuple[str, ...], frozenset[str]] = {}
        valid_sets: dict[tuple[str, ...], frozenset[int]] = {}
        self.member_topics: list[frozenset[int]] = []
        for s in subs:
            if s.topics not in valid_sets:
                raw_sets[s.topics] = frozenset(s.topics)
                numbers = frozenset(map(topic_number.get, s.topics, repeat(-1)))
                valid_sets[s.topics] = numbers - {-1}  # -1: no metadata or no partitions
            self.member_topics.append(valid_sets[s.topics])
        self.all_subscriptions_equal = len(set(raw_sets.values())) <= 1

        # Per global partition index: its topic number, -1 outside the assignable topics.
        self.partition_topic: IntArray = np.full(space.total, -1, dtype=np.int64)
        for number, (base, count) in enumerate(
            zip(self.topic_bases, self.topic_counts, strict=True)
        ):
            self.partition_topic[base : base + count] = number

        self._read_claims()
        self._resolve_claims()

    # -- partitions in Kafka's orders
    def partitions_of_topics(self, topic_numbers: IntArray | list[int]) -> IntArray:
        """Global indices of the topics' partitions, topic by topic, partitions ascending."""
        if len(topic_numbers) == 0:
            return np.zeros(0, dtype=np.int64)
        bases = self.topic_bases[topic_numbers]
        counts = self.topic_counts[topic_numbers]
        starts = np.repeat(bases - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        return starts + np.arange(int(counts.sum()), dtype=np.int64)

    def all_partitions(self) -> IntArray:
        """Every assignable partition, topics in Java order (Kafka's sorted ``TopicPartition`` set)."""
        return self.partitions_of_topics(np.arange(len(self.topics), dtype=np.int64))

    # -- claims
    def _read_claims(self) -> None:
        base_of = {t: int(b) for t, b in zip(self.topics, self.topic_bases, strict=True)}
        count_of = {t: int(c) for t, c in zip(self.topics, self.topic_counts, strict=True)}
        owneds = [self.group.members[m].owned for m in self.member_ids]
        entries = np.fromiter(map(len, owneds), dtype=np.int64, count=self.size)
        topic_keys = list(chain.from_iterable(owneds))
        values = list(chain.from_iterable(o.values() for o in owneds))
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        claims = int(lengths.sum())
        numbers = np.fromiter(chain.from_iterable(values), dtype=np.int64, count=claims)
        bases = np.fromiter(
            map(base_of.get, topic_keys, repeat(-1)), dtype=np.int64, count=len(topic_keys)
        )
        counts = np.fromiter(
            map(count_of.get, topic_keys, repeat(0)), dtype=np.int64, count=len(topic_keys)
        )
        entry_member = np.repeat(np.arange(self.size, dtype=np.int64), entries)
        member = np.repeat(entry_member, lengths)
        base = np.repeat(bases, lengths)
        count = np.repeat(counts, lengths)
        # Partitions of topics without metadata, or beyond a topic's partition count, are dropped.
        valid = (base >= 0) & (numbers >= 0) & (numbers < count)
        if not valid.all():
            member, base, numbers = member[valid], base[valid], numbers[valid]
        self.claim_member: IntArray = member
        self.claim_partition: IntArray = base + numbers

    def _resolve_claims(self) -> None:
        """Kafka keeps a partition claimed twice with the higher generation; equal: with neither.

        With three or more claimants Kafka's outcome depends on ``HashMap`` iteration order (a
        stale pair can void a newer claim); here the newest claim wins if only one member made it.
        """
        member, partition = self.claim_member, self.claim_partition
        if len(partition) == 0 or np.bincount(partition, minlength=self.space.total).max() <= 1:
            self.owned_member, self.owned_partition = member, partition
            return
        order = np.lexsort((member, partition))
        member, partition = member[order], partition[order]
        fresh = np.ones(len(partition), dtype=bool)
        fresh[1:] = (partition[1:] != partition[:-1]) | (member[1:] != member[:-1])
        member, partition = member[fresh], partition[fresh]  # a member listing a partition twice
        self.claim_member, self.claim_partition = member, partition
        generation = self.generations[member]
        starts = np.flatnonzero(np.concatenate(([True], partition[1:] != partition[:-1])))
        best = np.maximum.reduceat(generation, starts)
        group_of_claim = np.repeat(
            np.arange(len(starts)), np.diff(np.append(starts, len(partition)))
        )
        at_best = generation == best[group_of_claim]
        holders = np.bincount(group_of_claim, weights=at_best, minlength=len(starts)).astype(
            np.int64
        )
        keep = at_best & (holders[group_of_claim] == 1)
        self.owned_member, self.owned_partition = member[keep], partition[keep]

    def previous_owners(self) -> IntArray:
        """Kafka's ``prevAssignment``: per partition, the member of the highest generation below the
        group's newest generation that claimed it (ties: the first in ``HashMap`` order), or -1."""
        n = self.space.total
        previous = np.full(n, -1, dtype=np.int64)
        member, partition = self.claim_member, self.claim_partition
        generation = self.generations[member]
        stale = generation < self.max_generation
        if stale.any():
            member, partition, generation = member[stale], partition[stale], generation[stale]
            rank = np.empty(self.size, dtype=np.int64)
            rank[self.hash_order] = np.arange(self.size)
            order = np.lexsort((rank[member], -generation, partition))
            member, partition, generation = member[order], partition[order], generation[order]
            first = np.concatenate(([True], partition[1:] != partition[:-1]))
            previous[partition[first]] = member[first]
        return previous
