"""A group prepared for Kafka's sticky assignment: members, topics and ownership claims as integers.

Members are numbered in Java ``String`` order of their ids (Kafka's sticky assignor sorts members by
id, ignoring ``group.instance.id``); partitions by their global index in the group's
:class:`PartitionSpace`. Previously owned partitions become two parallel integer arrays (member,
partition), built without one Python object per partition, and the claims are resolved the way
Kafka's ``allSubscriptionsEqual`` resolves them.
"""

from __future__ import annotations

from functools import cached_property
from itertools import repeat

import numpy as np
import numpy.typing as npt

from coordkit.strategies.assignment import (
    DEFAULT_GENERATION,
    GroupSubscription,
    PartitionSpace,
)
from coordkit_assignors.ordering import claim_columns
from coordkit_assignors.sticky_java import hashmap_iteration_order, java_sorted

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class StickyGroup:
    """The columnar input of the sticky builders.

    :ivar member_ids: member ids in Java order; a member's number is its position.
    :ivar topics: the assignable topics (subscribed by someone, with metadata and partitions), in
        Java order; a topic's number is its position.
    :ivar member_topics: per member, the numbers of its assignable subscribed topics.
    :ivar all_subscriptions_equal: whether every member lists the same topics (Kafka compares the
        raw subscriptions as sets, topics without metadata included).
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
        self.member_ids: list[str] = java_sorted(group.members)
        number_of = {m: i for i, m in enumerate(self.member_ids)}
        self.input_positions: list[int] = [number_of[m] for m in group.members]
        subs = [group.members[m] for m in self.member_ids]
        self.size = len(self.member_ids)
        self.generations: IntArray = np.array([s.generation for s in subs], dtype=np.int64)
        self.max_generation = max(
            DEFAULT_GENERATION, int(self.generations.max()) if self.size else DEFAULT_GENERATION
        )
        self.racks: list[str | None] = [s.rack or None for s in subs]

        # Topics: Kafka's partitionsPerTopic holds subscribed topics with metadata and partitions.
        # Distinct topic lists: comparing each with the first is cheaper than hashing them all.
        topic_lists = [s.topics for s in subs]
        first = topic_lists[0] if subs else ()
        if topic_lists.count(first) == len(topic_lists):
            distinct = [first] if subs else []
        else:
            distinct = list(dict.fromkeys(topic_lists))
        subscribed: set[str] = set()
        for topics in distinct:
            subscribed.update(topics)
        self.topics: list[str] = java_sorted(t for t in subscribed if space.count(t) > 0)
        topic_number = {t: i for i, t in enumerate(self.topics)}
        self.topic_bases: IntArray = np.array([space.base(t) for t in self.topics], dtype=np.int64)
        self.topic_counts: IntArray = np.array(
            [space.count(t) for t in self.topics], dtype=np.int64
        )
        self.total = int(self.topic_counts.sum())

        valid_sets: dict[tuple[str, ...], frozenset[int]] = {}
        for topics in distinct:
            numbers = frozenset(map(topic_number.get, topics, repeat(-1)))
            valid_sets[topics] = numbers - {-1}  # -1: no metadata or no partitions
        if len(distinct) == 1:
            self.member_topics: list[frozenset[int]] = [valid_sets[first]] * self.size
        else:
            self.member_topics = [valid_sets[s.topics] for s in subs]
        self.all_subscriptions_equal = len({frozenset(topics) for topics in distinct}) <= 1

        self._read_claims()
        self._resolve_claims()

    @cached_property
    def hash_order(self) -> IntArray:
        """Member numbers in the iteration order of Kafka's ``HashMap`` of subscriptions.

        Within a bucket Java keeps insertion (JoinGroup) order, which a GroupSubscription does not
        carry: inserting in id order keeps the result independent of how members are listed.
        """
        return np.array(hashmap_iteration_order(self.member_ids), dtype=np.int64)

    @cached_property
    def partition_topic(self) -> IntArray:
        """Per global partition index: its topic number, -1 outside the assignable topics."""
        partition_topic = np.full(self.space.total, -1, dtype=np.int64)
        for number, (base, count) in enumerate(
            zip(self.topic_bases.tolist(), self.topic_counts.tolist(), strict=True)
        ):
            partition_topic[base : base + count] = number
        return partition_topic

    @property
    def has_claims(self) -> bool:
        """Whether any member reports owning a partition that exists."""
        return len(self.claim_partition) > 0

    # -- partitions in Kafka's orders
    def partitions_of_topics(self, topic_numbers: IntArray | list[int]) -> IntArray:
        """Global indices of the topics' partitions, topic by topic, partitions ascending."""
        if len(topic_numbers) == 0:
            return np.zeros(0, dtype=np.int64)
        bases = self.topic_bases[topic_numbers]
        counts = self.topic_counts[topic_numbers]
        starts = np.repeat(bases - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        return starts + np.arange(int(counts.sum()), dtype=np.int64)

    @cached_property
    def java_order_is_index_order(self) -> bool:
        """Whether :meth:`all_partitions` is ascending (topic names sort the same in Java and
        Python unless some use characters beyond the Basic Multilingual Plane)."""
        return bool(np.all(self.topic_bases[1:] > self.topic_bases[:-1]))

    def all_partitions(self) -> IntArray:
        """Every assignable partition, topics in Java order (Kafka's sorted ``TopicPartition`` set)."""
        bases, counts = self.topic_bases, self.topic_counts
        if len(bases) and np.array_equal(bases[1:], bases[:-1] + counts[:-1]):
            # The topics follow one another in the space: one run of indices.
            return np.arange(bases[0], bases[0] + self.total, dtype=np.int64)
        return self.partitions_of_topics(np.arange(len(self.topics), dtype=np.int64))

    # -- claims
    def _read_claims(self) -> None:
        owneds = [self.group.members[m].owned for m in self.member_ids]
        if not any(owneds):
            self.claim_member: IntArray = np.zeros(0, dtype=np.int64)
            self.claim_partition: IntArray = np.zeros(0, dtype=np.int64)
            return
        topic_number = {t: i for i, t in enumerate(self.topics)}
        member, topic, numbers = claim_columns(owneds, topic_number)
        # Topic -1 (no metadata, or no partitions): base -1 and count 0.
        base = np.append(self.topic_bases, -1)[topic]
        count = np.append(self.topic_counts, 0)[topic]
        # Partitions of topics without metadata, or beyond a topic's partition count, are dropped.
        valid = (base >= 0) & (numbers >= 0) & (numbers < count)
        if not valid.all():
            member, base, numbers = member[valid], base[valid], numbers[valid]
        self.claim_member = member
        self.claim_partition = base + numbers

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
