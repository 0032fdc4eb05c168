"""Kafka's ``GeneralAssignmentBuilder``: the sticky assignment when subscriptions differ.

1. Members keep the owned partitions they still subscribe to (rack-aware: and whose replicas are on
   their rack; anything else dropped means "revocation required").
2. Unassigned partitions, topics ordered by how many members subscribe to them (then by name), go
   one by one to the least loaded subscriber (fewest partitions, then smallest id); rack-aware
   first to rack-matching subscribers only.
3. Balancing: partitions are visited in that order and moved from a member with at least two more
   partitions than some other subscriber of the topic, back to their previous owner when that
   member has two fewer, otherwise to the least loaded subscriber, until the assignment is
   balanced; if the balance score (sum of pairwise count differences) did not improve, the moves
   are reverted.

Step 2 at scale is water-filling: consecutive topics with the same subscribers form one run, and a
run of ``n`` partitions over members with counts ``s`` takes the ``n`` smallest ``(level, member)``
slots with ``level >= s[member]``, which arrays compute directly. Step 3 keeps Kafka's
partition-by-partition semantics but finds the next movable partition with array scans, and decides
"balanced" from per-topic-group maxima and minima (with a remembered violating pair to avoid
rechecking), instead of Kafka's scan over every member and partition; the least loaded subscriber
after each move comes from :mod:`.sticky_minima`.
"""

from __future__ import annotations

import gc
import heapq
import itertools

import numpy as np

from coordkit_assignors.sticky_group import BoolArray, IntArray, StickyGroup
from coordkit_assignors.sticky_java import java_string_hash
from coordkit_assignors.sticky_minima import choose_tracker
from coordkit_assignors.sticky_movements import PartitionMovements
from coordkit_assignors.sticky_racks import StickyRacks


class _Subscriptions:
    """Members grouped by their assignable topics ("classes"), and topics by their subscribers."""

    def __init__(self, group: StickyGroup):
        class_of_set: dict[frozenset[int], int] = {}
        self.member_class: IntArray = np.array(
            [class_of_set.setdefault(s, len(class_of_set)) for s in group.member_topics],
            dtype=np.int64,
        )
        self.class_topics = list(class_of_set)
        classes = len(self.class_topics)
        self.class_members: list[IntArray] = [
            np.flatnonzero(self.member_class == k) for k in range(classes)
        ]
        topics = len(group.topics)
        # subscribes[k, t]: does class k subscribe to topic t
        self.subscribes: BoolArray = np.zeros((classes, topics), dtype=bool)
        for k, topic_set in enumerate(self.class_topics):
            if topic_set:
                self.subscribes[k, list(topic_set)] = True
        class_sizes = np.array([len(m) for m in self.class_members], dtype=np.int64)
        self.topic_consumers: IntArray = (
            (self.subscribes * class_sizes[:, None]).sum(axis=0).astype(np.int64)
        )
        # Topics with the same subscribing classes share a "signature" (the same eligible members).
        rows, signature = np.unique(self.subscribes.T, axis=0, return_inverse=True)
        self.topic_signature: IntArray = signature.reshape(-1).astype(np.int64)
        # signature_rows[s, k]: does class k subscribe to the topics of signature s
        self.signature_rows: BoolArray = rows.reshape(-1, classes)
        self.signature_classes: list[tuple[int, ...]] = [
            tuple(np.flatnonzero(row).tolist()) for row in self.signature_rows
        ]
        # the eligible members of each signature, ascending (that is, in Java id order)
        self.signature_members: list[IntArray] = [
            np.flatnonzero(row[self.member_class]) for row in self.signature_rows
        ]
        class_capacity = (self.subscribes * group.topic_counts[None, :]).sum(axis=1)
        # the most partitions each member could hold: all of its topics'
        self.max_assignment: IntArray = class_capacity.astype(np.int64)[self.member_class]


def general_assign(group: StickyGroup, racks: StickyRacks) -> IntArray:
    """The owner (member number) of every global partition index, -1 outside assignable topics."""
    owner = np.full(group.space.total, -1, dtype=np.int64)
    if group.size == 0:
        return owner
    subs = _Subscriptions(group)

    # 1. Keep owned partitions the member still subscribes to (and, rack-aware, whose racks match).
    member, partition = group.owned_member, group.owned_partition
    keep = subs.subscribes[subs.member_class[member], group.partition_topic[partition]]
    if racks.enabled and len(partition):
        keep &= ~racks.mismatch(member, partition)
    revocation_required = not bool(keep.all())
    owner[partition[keep]] = member[keep]
    sizes = np.bincount(member[keep], minlength=group.size).astype(np.int64)
    initializing = int(sizes.max()) == 0

    # 2. Assign the unassigned partitions to the least loaded subscribers.
    topic_order = np.lexsort((np.arange(len(group.topics)), subs.topic_consumers))
    sorted_partitions = group.partitions_of_topics(topic_order)
    unassigned = sorted_partitions[owner[sorted_partitions] < 0]
    remaining = unassigned
    if racks.enabled and len(remaining):
        remaining = _assign_rack_matching(group, subs, racks, remaining, owner, sizes)
    _water_fill_runs(group, subs, remaining, owner, sizes)

    # 3. Balance the members and topics that can still change.
    movable_topic = subs.topic_consumers >= 2
    class_in_play: BoolArray = np.any(subs.subscribes & movable_topic[None, :], axis=1)
    participating = (sizes < subs.max_assignment) | class_in_play[subs.member_class]
    if not participating.any():
        return owner
    in_play = movable_topic[group.partition_topic[sorted_partitions]]
    reassignable = sorted_partitions[in_play]
    unassigned = unassigned[movable_topic[group.partition_topic[unassigned]]]
    balancer = _Balancer(group, subs, owner, sizes, np.flatnonzero(participating), reassignable)
    before_owner, before_sizes = owner.copy(), sizes.copy()
    if not revocation_required:
        balancer.perform(unassigned)
    performed = balancer.perform(reassignable)
    players = np.flatnonzero(participating)
    if (
        not initializing
        and performed
        and _balance_score(sizes[players]) >= _balance_score(before_sizes[players])
    ):
        return before_owner
    return owner


def _balance_score(sizes: IntArray) -> int:
    """Kafka's ``getBalanceScore``: the sum over member pairs of their count difference."""
    ordered = np.sort(sizes)
    n = len(ordered)
    return int((ordered * (2 * np.arange(n, dtype=np.int64) - (n - 1))).sum())


def water_fill(counts: IntArray, n: int) -> IntArray:
    """Positions (into ``counts``) receiving ``n`` items one by one, each to the position with the
    fewest items so far, ties to the lowest position; ``counts`` are the starting counts."""
    if n == 0 or len(counts) == 0:
        return np.zeros(0, dtype=np.int64)
    ordered = np.sort(counts)
    prefix = np.concatenate(([0], np.cumsum(ordered)))

    def below(level: int) -> int:
        """How many slots lie below ``level``: sum of max(0, level - count)."""
        k = int(np.searchsorted(ordered, level, side="left"))
        return k * level - int(prefix[k])

    low, high = int(ordered[0]), int(ordered[0]) + n  # below(low) == 0 < n <= below(high)
    while high - low > 1:  # the largest level with below(level) < n
        middle = (low + high) // 2
        if below(middle) < n:
            low = middle
        else:
            high = middle
    level = low
    last = n - below(level)  # slots taken at the last level
    smallest = int(ordered[0])
    rows = level - smallest + 1
    width = len(counts)
    if rows * width <= 4 * (n + width):
        grid = np.arange(smallest, level + 1, dtype=np.int64)[:, None] >= counts[None, :]
        at_last = np.flatnonzero(grid[-1])
        grid[-1, at_last[last:]] = False
        return np.nonzero(grid)[1]
    # Sparse levels: enumerate slots below the last level explicitly, then sort by (level, position).
    depth = np.maximum(level - counts, 0)
    positions = np.repeat(np.arange(width, dtype=np.int64), depth)
    starts = np.concatenate(([0], np.cumsum(depth)[:-1]))
    levels = counts[positions] + (np.arange(len(positions)) - np.repeat(starts, depth))
    below_last = positions[np.lexsort((positions, levels))]
    return np.concatenate((below_last, np.flatnonzero(counts <= level)[:last]))


def _water_fill_runs(
    group: StickyGroup, subs: _Subscriptions, partitions: IntArray, owner: IntArray, sizes: IntArray
) -> None:
    """Kafka's ``maybeAssign`` without racks: each partition to its least loaded subscriber."""
    if len(partitions) == 0:
        return
    signature = subs.topic_signature[group.partition_topic[partitions]]
    breaks = np.flatnonzero(signature[1:] != signature[:-1]) + 1
    bounds = [0, *breaks.tolist(), len(partitions)]
    for start, end in itertools.pairwise(bounds):
        eligible = subs.signature_members[int(signature[start])]
        picks = water_fill(sizes[eligible], end - start)
        owner[partitions[start:end]] = eligible[picks]
        sizes[eligible] += np.bincount(picks, minlength=len(eligible))


def _assign_rack_matching(
    group: StickyGroup,
    subs: _Subscriptions,
    racks: StickyRacks,
    partitions: IntArray,
    owner: IntArray,
    sizes: IntArray,
) -> IntArray:
    """Kafka's ``maybeAssign`` with rack matching: each partition to the least loaded subscriber that
    has no rack or a rack holding a replica; returns the partitions nobody matched, in order."""
    # One heap of (count, member) per (class, rack) with rack -1 for members without a rack.
    heaps: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for m, (k, r) in enumerate(
        zip(subs.member_class.tolist(), racks.member_rack.tolist(), strict=True)
    ):
        heaps.setdefault((k, r), []).append((int(sizes[m]), m))
    for heap in heaps.values():
        heapq.heapify(heap)
    classes_of_topic = [
        np.flatnonzero(subs.subscribes[:, t]).tolist() for t in range(len(group.topics))
    ]
    racks_of_set = [[-1, *np.flatnonzero(row).tolist()] for row in racks.matches]
    candidates_cache: dict[tuple[int, int], list[list[tuple[int, int]]]] = {}
    left: list[int] = []
    topics = group.partition_topic[partitions].tolist()
    sets = racks.partition_set[partitions].tolist()
    for partition, topic, set_id in zip(partitions.tolist(), topics, sets, strict=True):
        key = (topic, set_id)
        candidates = candidates_cache.get(key)
        if candidates is None:
            candidates = [
                heaps[(k, r)]
                for k in classes_of_topic[topic]
                for r in racks_of_set[set_id]
                if (k, r) in heaps
            ]
            candidates_cache[key] = candidates
        best: list[tuple[int, int]] | None = None
        for heap in candidates:
            if heap and (best is None or heap[0] < best[0]):
                best = heap
        if best is None:
            left.append(partition)
            continue
        count, member = best[0]
        heapq.heapreplace(best, (count + 1, member))
        owner[partition] = member
        sizes[member] = count + 1
    return np.array(left, dtype=np.int64)


class _Balancer:
    """Kafka's ``performReassignments`` over arrays.

    Members taking part are those that can still gain partitions or hold partitions of a topic with
    two or more subscribers; partitions taking part belong to such topics. Moves are applied one at
    a time, as Kafka does, with scalar state in Python lists (fast to read and write one element)
    mirrored in numpy arrays (fast to scan); the mirrors are built only once a move is needed.
    """

    def __init__(
        self,
        group: StickyGroup,
        subs: _Subscriptions,
        owner: IntArray,
        sizes: IntArray,
        players: IntArray,
        reassignable: IntArray,
    ):
        self.group = group
        self.subs = subs
        self.owner = owner
        self.sizes = sizes
        self.signature_of = subs.topic_signature[np.maximum(group.partition_topic, 0)]
        self.signature_classes = subs.signature_classes
        self.signature_members = subs.signature_members
        self.signature_min: IntArray = np.array(
            [int(sizes[m].min()) if len(m) else 0 for m in subs.signature_members], dtype=np.int64
        )
        # Counts of the members taking part, for Kafka's first test (max - min <= 1) in O(1).
        player_counts = sizes[players].tolist()
        self.histogram: dict[int, int] = {}
        for count in player_counts:
            self.histogram[count] = self.histogram.get(count, 0) + 1
        self.lowest, self.highest = min(player_counts), max(player_counts)
        # Reassignable partitions grouped by signature, for the full balance check.
        by_signature = np.argsort(self.signature_of[reassignable], kind="stable")
        self.check_partitions = reassignable[by_signature]
        check_signatures = self.signature_of[self.check_partitions]
        boundary = np.ones(len(check_signatures), dtype=bool)
        boundary[1:] = check_signatures[1:] != check_signatures[:-1]
        self.check_starts = np.flatnonzero(boundary)
        self.check_ends = np.append(self.check_starts[1:], len(check_signatures))
        self.check_signature_ids = check_signatures[self.check_starts]
        self.witness: tuple[int, int] | None = None
        self.hot = False

    def _warm_up(self) -> None:
        """Build the scalar mirrors and per-class heaps before the first move."""
        group, subs = self.group, self.subs
        self.hot = True
        self.owner_list: list[int] = self.owner.tolist()
        self.size_list: list[int] = self.sizes.tolist()
        self.signature_list: list[int] = self.signature_of.tolist()
        self.topic_list: list[int] = group.partition_topic.tolist()
        self.base_list: list[int] = group.topic_bases.tolist()
        # Previous owners, kept only where they may take the partition back (Kafka would otherwise
        # hand a partition to a member not subscribed to its topic).
        previous = group.previous_owners()
        ok = np.zeros(len(previous), dtype=bool)
        idx = np.flatnonzero((previous >= 0) & (group.partition_topic >= 0))
        ok[idx] = subs.subscribes[subs.member_class[previous[idx]], group.partition_topic[idx]]
        self.previous = np.where(ok, previous, -1)
        self.previous_list: list[int] = self.previous.tolist()
        self.tracker = choose_tracker(
            self.size_list,
            self.sizes,
            subs.member_class.tolist(),
            subs.class_members,
            subs.signature_rows,
            subs.signature_members,
        )
        # from now on the tracker keeps the per-signature minima (list and array)
        self.signature_min = self.tracker.minimum_array
        self.signature_min_list = self.tracker.minimum
        self.movements = PartitionMovements([java_string_hash(t) for t in group.topics])

    # -- balance
    def _balanced(self) -> bool:
        """Kafka's ``isBalanced``: counts within one, or no partition can go to a subscriber with two
        fewer partitions than its owner."""
        if self.highest - self.lowest <= 1:
            return True
        sizes = self.size_list if self.hot else self.sizes
        if self.witness is not None:
            partition, member = self.witness
            owner = self.owner_list[partition] if self.hot else self.owner[partition]
            if sizes[owner] >= sizes[member] + 2:
                return False
        if len(self.check_partitions) == 0:
            return True
        owner_counts = self.sizes[self.owner[self.check_partitions]]
        largest = np.maximum.reduceat(owner_counts, self.check_starts)
        gaps = largest - self.signature_min[self.check_signature_ids]
        worst = int(np.argmax(gaps))
        if gaps[worst] <= 1:
            self.witness = None
            return True
        start, end = int(self.check_starts[worst]), int(self.check_ends[worst])
        partition = int(self.check_partitions[start + int(np.argmax(owner_counts[start:end]))])
        members = self.signature_members[int(self.check_signature_ids[worst])]
        member = int(members[int(np.argmin(self.sizes[members]))])  # fewest, then smallest id
        self.witness = (partition, member)
        return False

    def _next_movable(self, partitions: list[int], array: IntArray, start: int) -> int:
        """Position of the first partition at or after ``start`` that Kafka would move now."""
        owner, sizes, signature, lowest, previous = (
            self.owner_list,
            self.size_list,
            self.signature_list,
            self.signature_min_list,
            self.previous_list,
        )
        total = len(partitions)
        end = min(total, start + 16)
        for position in range(start, end):  # a move is often right here: check a few one by one
            partition = partitions[position]
            held = sizes[owner[partition]]
            if held > lowest[signature[partition]] + 1:
                return position
            before = previous[partition]
            if before >= 0 and held > sizes[before] + 1:
                return position
        start, chunk = end, 256
        while start < total:
            end = min(total, start + chunk)
            window = array[start:end]
            held_array = self.sizes[self.owner[window]]
            movable = held_array > self.signature_min[self.signature_of[window]] + 1
            before_array = self.previous[window]
            has_previous = before_array >= 0
            movable |= has_previous & (
                held_array > self.sizes[np.where(has_previous, before_array, 0)] + 1
            )
            hits = np.flatnonzero(movable)
            if len(hits):
                return start + int(hits[0])
            start = end
            chunk = min(chunk * 4, 1 << 16)
        return -1

    def perform(self, array: IntArray) -> bool:
        """One ``performReassignments`` call over ``array`` (in order); True if anything moved."""
        if self._balanced():
            return False
        if not self.hot:
            self._warm_up()
        partitions: list[int] = array.tolist()
        # Moves allocate many short-lived, acyclic objects; collection passes over the caller's
        # (large) input would only cost time.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._perform(partitions, array)
        finally:
            if collecting:
                gc.enable()

    def _perform(self, partitions: list[int], array: IntArray) -> bool:
        performed = False
        while True:
            modified = False
            position = 0
            while position < len(partitions) and not self._balanced():
                position = self._next_movable(partitions, array, position)
                if position < 0:
                    break
                partition = partitions[position]
                held = self.size_list[self.owner_list[partition]]
                previous = self.previous_list[partition]
                if previous >= 0 and held > self.size_list[previous] + 1:
                    self._reassign(partition, previous)
                else:
                    self._reassign(
                        partition, self.tracker.least_loaded(self.signature_list[partition])
                    )
                performed = modified = True
                position += 1
            if not modified:
                return performed

    def _reassign(self, partition: int, new: int) -> None:
        topic = self.topic_list[partition]
        owner = self.owner_list
        moving = self.movements.partition_to_move(partition, owner[partition], new, topic)
        old = owner[moving]
        self.movements.move(moving, old, new, topic, moving - self.base_list[topic])
        owner[moving] = new
        self.owner[moving] = new
        sizes = self.size_list
        for member, step in ((old, -1), (new, 1)):
            before = sizes[member]
            after = before + step
            sizes[member] = after
            self.sizes[member] = after
            histogram = self.histogram
            histogram[before] -= 1
            histogram[after] = histogram.get(after, 0) + 1
            self.highest = max(self.highest, after)
            self.lowest = min(self.lowest, after)
            if not histogram[before]:
                del histogram[before]
                if before == self.highest:
                    self.highest = before - 1
                if before == self.lowest:
                    self.lowest = before + 1
        self.tracker.moved(old, new)
