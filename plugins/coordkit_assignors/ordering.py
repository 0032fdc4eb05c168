"""The columnar view of a group that the assignors share.

Members are numbered by Kafka's member order (static members first by instance id, then the rest by
member id); partitions by their global index in the group's :class:`PartitionSpace`. Assignors
work on these integers and on numpy arrays, never on one object per partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, repeat

import numpy as np
import numpy.typing as npt

from coordkit.strategies.assignment import (
    GroupAssignment,
    GroupSubscription,
    OwnedPartitions,
    PartitionSpace,
    java_string_key,
)

IntArray = npt.NDArray[np.int64]


def claim_columns(
    owneds: Sequence[Mapping[str, Sequence[int]]], topic_number: Mapping[str, int]
) -> tuple[IntArray, IntArray, IntArray]:
    """Every partition listed in members' owned maps, as three columns: the member's position in
    ``owneds``, the topic's number (-1 for a topic ``topic_number`` lacks) and the partition number.

    One pass over all members' entries at once, without an array per member or per topic; owned
    maps held as columns (:class:`~coordkit.strategies.assignment.OwnedPartitions`) are concatenated.
    """
    if owneds and all(isinstance(owned, OwnedPartitions) or not owned for owned in owneds):
        return _claim_columns_of_arrays(owneds, topic_number)
    topic_keys = list(chain.from_iterable(owneds))
    values = list(chain.from_iterable(owned.values() for owned in owneds))
    numbers = np.fromiter(chain.from_iterable(values), dtype=np.int64)
    topic = np.fromiter(
        map(topic_number.get, topic_keys, repeat(-1)), dtype=np.int64, count=len(topic_keys)
    )
    entries = np.fromiter(map(len, owneds), dtype=np.int64, count=len(owneds))
    member = np.repeat(np.arange(len(owneds), dtype=np.int64), entries)
    if len(numbers) != len(values) or not all(values):
        # Not one partition per (member, topic) entry: repeat each entry's columns.
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        member, topic = np.repeat(member, lengths), np.repeat(topic, lengths)
    return member, topic, numbers


def _claim_columns_of_arrays(
    owneds: Sequence[Mapping[str, Sequence[int]]], topic_number: Mapping[str, int]
) -> tuple[IntArray, IntArray, IntArray]:
    """:func:`claim_columns` where every owned map is an ``OwnedPartitions`` or empty."""
    remaps: dict[int, tuple[tuple[str, ...], IntArray]] = {}  # by id(topic_names)
    topics: list[IntArray] = []
    numbers: list[IntArray] = []
    sizes = np.zeros(len(owneds), dtype=np.int64)
    for position, owned in enumerate(owneds):
        if not isinstance(owned, OwnedPartitions):
            continue  # empty
        sizes[position] = owned.total
        numbers.append(owned.numbers)
        names = owned.topic_names
        known = remaps.get(id(names))
        if known is None or known[0] is not names:
            remap = np.fromiter((topic_number.get(t, -1) for t in names), dtype=np.int64)
            known = remaps[id(names)] = (names, remap)
        topics.append(known[1][owned.topic_ids])
    member = np.repeat(np.arange(len(owneds), dtype=np.int64), sizes)
    if not numbers:
        empty = np.zeros(0, dtype=np.int64)
        return member, empty, empty
    return member, np.concatenate(topics), np.concatenate(numbers)


class GroupLayout:
    """A group numbered for columnar assignors.

    :ivar members: member ids in Kafka's member order; a member's position is its number.
    :ivar subscribers: for every subscribed topic with at least one partition, the positions of
        its subscribers in ascending order. Members with identical subscriptions share one list:
        treat the lists as read-only.
    """

    __slots__ = ("group", "members", "space", "subscribers")

    def __init__(self, group: GroupSubscription):
        self.group = group
        self.space: PartitionSpace = group.space()
        self.members: list[str] = group.member_order()
        # Group members by subscription first: at Kafka's scale (2,000 members x 500 topics) most
        # groups have a handful of distinct subscriptions, so this is one pass per distinct one.
        by_subscription: dict[tuple[str, ...], list[int]] = {}
        for position, member in enumerate(self.members):
            by_subscription.setdefault(group.members[member].topics, []).append(position)
        per_topic: dict[str, list[list[int]]] = {}
        space = self.space
        for topics, positions in by_subscription.items():
            for topic in topics:
                if space.count(topic) > 0:
                    per_topic.setdefault(topic, []).append(positions)
        # Topics with the same subscription groups share one merged list too.
        merged: dict[tuple[int, ...], list[int]] = {}
        self.subscribers: dict[str, list[int]] = {}
        for topic, lists in per_topic.items():
            if len(lists) == 1:
                self.subscribers[topic] = lists[0]
                continue
            key = tuple(id(positions) for positions in lists)
            subscribers = merged.get(key)
            if subscribers is None:
                subscribers = merged[key] = sorted(chain.from_iterable(lists))
            self.subscribers[topic] = subscribers

    @property
    def size(self) -> int:
        return len(self.members)

    def topics_in_space_order(self) -> list[str]:
        """Subscribed topics (with partitions) in partition-space order (topic name order)."""
        return [t for t in self.space.topics if t in self.subscribers]

    def topics_in_java_order(self) -> list[str]:
        """Subscribed topics in Java ``String`` order (Kafka's ``TreeSet`` of topic names)."""
        return sorted(self.subscribers, key=java_string_key)

    def is_homogeneous(self) -> bool:
        """Whether every member subscribes to every topic that has partitions."""
        size = len(self.members)
        return all(len(subs) == size for subs in self.subscribers.values())

    def subscribed_mask(self) -> npt.NDArray[np.bool_]:
        """A boolean per global partition index: does any member subscribe to its topic?"""
        mask = np.zeros(self.space.total, dtype=bool)
        for topic in self.subscribers:
            base = self.space.base(topic)
            mask[base : base + self.space.count(topic)] = True
        return mask

    def loads(self) -> npt.NDArray[np.float64]:
        """Per global partition index, its load (1.0 where the topic gives none)."""
        out = np.ones(self.space.total, dtype=np.float64)
        for topic, meta in self.group.topics.items():
            if meta.loads is not None and meta.partitions:
                base = self.space.base(topic)
                out[base : base + meta.partitions] = meta.loads
        return out

    def has_loads(self) -> bool:
        return any(meta.loads is not None for meta in self.group.topics.values())

    def previous_owners(self, *, subscribed_only: bool = True) -> IntArray:
        """Per global partition index, the position of the member that keeps a claim on it, or -1.

        Claims on partitions that do not exist are ignored, and (``subscribed_only``) so are claims
        on topics the claimant no longer subscribes to. When several members claim a partition the
        one with the highest generation wins; a tie at the highest generation means nobody keeps it
        (Kafka's rule for conflicting ownership in the sticky assignors).
        """
        owners = np.full(self.space.total, -1, dtype=np.int64)
        space = self.space
        subs = [self.group.members[m] for m in self.members]
        owneds = [sub.owned for sub in subs]
        if not any(owneds):
            return owners
        topic_number = {t: i for i, t in enumerate(space.topics)}
        members, topic, numbers = claim_columns(owneds, topic_number)
        counts = np.append(np.asarray(space.counts, dtype=np.int64), 0)  # topic -1: count 0
        valid = (numbers >= 0) & (numbers < counts[topic])
        if subscribed_only:
            # Members with the same subscription share a row of "subscribes to topic t".
            row_of: dict[tuple[str, ...], int] = {}
            member_row = np.fromiter(
                (row_of.setdefault(sub.topics, len(row_of)) for sub in subs),
                dtype=np.int64,
                count=len(subs),
            )
            subscribes = np.zeros((len(row_of), len(space.topics) + 1), dtype=bool)
            for topics, row in row_of.items():
                subscribes[row, [topic_number[t] for t in topics if t in topic_number]] = True
            valid &= subscribes[member_row[members], topic]
        if not valid.any():
            return owners
        bases = np.asarray(space.bases, dtype=np.int64)
        members, indices = members[valid], bases[topic[valid]] + numbers[valid]
        if int(np.bincount(indices, minlength=space.total).max()) <= 1:
            owners[indices] = members  # one claim per partition (the usual case): no contest
            return owners
        generations = np.fromiter((sub.generation for sub in subs), dtype=np.int64)[members]
        # Sort claims by partition, highest generation first; the first claim of each partition wins
        # unless the next claim on the same partition has the same generation. A member listing a
        # partition twice claims it once.
        order = np.lexsort((members, -generations, indices))
        indices, generations, members = indices[order], generations[order], members[order]
        repeated = np.zeros(indices.size, dtype=bool)
        repeated[1:] = (indices[1:] == indices[:-1]) & (members[1:] == members[:-1])
        if repeated.any():
            indices, generations, members = (a[~repeated] for a in (indices, generations, members))
        first = np.ones(indices.size, dtype=bool)
        first[1:] = indices[1:] != indices[:-1]
        tied = np.zeros(indices.size, dtype=bool)
        tied[:-1] = (indices[1:] == indices[:-1]) & (generations[1:] == generations[:-1])
        winners = first & ~tied
        owners[indices[winners]] = members[winners]
        return owners

    # -- building the result
    def result_from_owners(self, indices: IntArray, owners: IntArray) -> GroupAssignment:
        """The assignment giving ``indices[k]`` to member position ``owners[k]``."""
        size = len(self.members)
        if indices.size == 0:
            return GroupAssignment.from_indices(self.space, {m: [] for m in self.members})
        counts = np.bincount(owners, minlength=size)
        if indices.size > 1 and not bool(np.all(indices[1:] > indices[:-1])):
            grouped = indices[np.lexsort((indices, owners))]  # by member, then partition index
        elif bool(np.all(owners[1:] >= owners[:-1])):
            grouped = indices  # already member by member, each run ascending
        else:
            # Runs stay in (ascending) input order; numpy sorts 16-bit keys stably by radix.
            keys = owners.astype(np.uint16) if size <= 1 << 16 else owners
            grouped = indices[np.argsort(keys, kind="stable")]
        # Each member's partitions are a view of one array: no Python int per partition (a
        # million of them cost more than the assignment); GroupAssignment reads views as ints.
        ends = np.cumsum(counts).tolist()
        starts = [0, *ends[:-1]]
        assigned: dict[str, Sequence[int]] = {
            member: grouped[start:end]  # type: ignore[misc]
            for member, start, end in zip(self.members, starts, ends, strict=True)
        }
        return GroupAssignment.from_indices(self.space, assigned)

    def result_from_lists(self, per_member: Sequence[Sequence[int]]) -> GroupAssignment:
        """The assignment giving ``per_member[position]`` (global indices) to each member."""
        return GroupAssignment.from_indices(
            self.space,
            {m: sorted(parts) for m, parts in zip(self.members, per_member, strict=True)},
        )
