"""Kafka's ``ConstrainedAssignmentBuilder``: the sticky assignment when every member subscribes to the
same topics.

With ``N`` partitions and ``M`` members every member gets ``minQuota = N // M`` or
``maxQuota = ceil(N / M)`` partitions, and ``N % M`` members get ``maxQuota``:

1. Members keep owned partitions up to their quota, visited in Kafka's ``HashMap`` order (which
   decides who may keep ``maxQuota``); each keeps its owned partitions sorted by partition number,
   then topic, so that no member keeps a whole topic.
2. Rack-aware only: the unassigned partitions, least-covered racks first, go round-robin to
   rack-matching members under quota.
3. The rest are dealt round-robin to the members under ``minQuota`` (sorted by id), then one each to
   the members at ``minQuota`` that may still reach ``maxQuota``.

Step 3 is a counting problem: it is computed with array operations, not one step per partition.
"""

from __future__ import annotations

import numpy as np

from coordkit_assignors.sticky_group import BoolArray, IntArray, StickyGroup
from coordkit_assignors.sticky_racks import StickyRacks


class ConstrainedAssignment:
    """:ivar owner: per global partition index, its member number (-1 outside the assignable topics).
    :ivar newly_assigned: per global partition index, whether it was not kept from an owner's claim
        (a partition that changes hands can only be among these).
    """

    def __init__(self, owner: IntArray, newly_assigned: BoolArray):
        self.owner = owner
        self.newly_assigned = newly_assigned


def constrained_assign(group: StickyGroup, racks: StickyRacks) -> ConstrainedAssignment:
    members = group.size
    total = group.total
    owner = np.full(group.space.total, -1, dtype=np.int64)
    newly = np.zeros(group.space.total, dtype=bool)
    if members == 0:
        return ConstrainedAssignment(owner, newly)
    min_quota, extra = divmod(total, members)
    max_quota = min_quota + (1 if extra else 0)

    owned_member, owned_partition = group.owned_member, group.owned_partition
    if racks.enabled and len(owned_partition):
        matching = ~racks.mismatch(owned_member, owned_partition)
        owned_member, owned_partition = owned_member[matching], owned_partition[matching]
    owned_count = np.bincount(owned_member, minlength=members)

    # 1. Keep owned partitions up to quota, members in Kafka's HashMap order.
    keep = np.zeros(members, dtype=np.int64)
    under_min: list[int] = []
    exactly_min: list[int] = []
    over_min = 0  # members that keep (or will get) maxQuota
    counts = owned_count.tolist()
    for member in group.hash_order.tolist():
        count = counts[member]
        if count < min_quota:
            keep[member] = count
            under_min.append(member)
        elif count >= max_quota and over_min < extra:
            keep[member] = max_quota
            over_min += 1
            if over_min == extra:
                exactly_min.clear()
        else:
            keep[member] = min_quota
            if over_min < extra:
                exactly_min.append(member)
    kept = _kept_claims(group, owned_member, owned_partition, owned_count, keep)
    owner[owned_partition[kept]] = owned_member[kept]
    sizes = keep.tolist()

    unassigned = group.all_partitions()
    unassigned = unassigned[owner[unassigned] < 0]
    newly[unassigned] = True
    under_min.sort()
    exactly_min.sort()

    # 2. Rack-aware round-robin within racks.
    if racks.enabled and len(unassigned):
        unassigned = racks.sort_by_rack_consumers(unassigned)
        unassigned, over_min = _assign_rack_aware_round_robin(
            unassigned,
            owner,
            sizes,
            under_min,
            exactly_min,
            racks,
            min_quota,
            max_quota,
            extra,
            over_min,
        )

    # 3. Round-robin to the members under minQuota, then one each to members at minQuota.
    owner[unassigned] = _deal_round_robin(len(unassigned), under_min, exactly_min, sizes, min_quota)
    return ConstrainedAssignment(owner, newly)


def _kept_claims(
    group: StickyGroup,
    owned_member: IntArray,
    owned_partition: IntArray,
    owned_count: IntArray,
    keep: IntArray,
) -> BoolArray:
    """Which claims are kept: each member's first ``keep`` claims by (partition number, topic)."""
    kept = np.ones(len(owned_partition), dtype=bool)
    trimmed = owned_count > keep
    if not trimmed.any():
        return kept
    positions = np.flatnonzero(trimmed[owned_member])
    member = owned_member[positions]
    partition = owned_partition[positions]
    topic = group.partition_topic[partition]
    number = partition - group.topic_bases[topic]
    order = np.lexsort((topic, number, member))
    positions, member = positions[order], member[order]
    starts = np.concatenate(([0], np.cumsum(np.bincount(member, minlength=group.size))[:-1]))
    rank = np.arange(len(positions)) - starts[member]
    kept[positions[rank >= keep[member]]] = False
    return kept


def _assign_rack_aware_round_robin(
    unassigned: IntArray,
    owner: IntArray,
    sizes: list[int],
    under_min: list[int],
    exactly_min: list[int],
    racks: StickyRacks,
    min_quota: int,
    max_quota: int,
    extra: int,
    over_min: int,
) -> tuple[IntArray, int]:
    """Kafka's ``assignRackAwareRoundRobin``; returns the partitions left unassigned.

    Kafka also hands rack-matching partitions to members at ``minQuota`` without checking that
    fewer than ``N % M`` members exceed ``minQuota``; when too many do it later fails ("doesn't
    reach minQuota"). We stop handing out extras at that count, so those groups get an assignment.
    """
    member_rack = racks.member_rack.tolist()
    matches = racks.matches.tolist()
    partition_set = racks.partition_set
    rack_count = racks.matches.shape[1]

    def rack_tally(members: list[int]) -> list[int]:
        tally = [0] * rack_count
        for m in members:
            if member_rack[m] >= 0:
                tally[member_rack[m]] += 1
        return tally

    under_tally = rack_tally(under_min)
    min_tally = rack_tally(exactly_min)
    matching_racks = [[r for r, hit in enumerate(row) if hit] for row in matches]

    def next_rack_consumer(row: list[bool], candidates: list[int], first: int) -> int:
        size = len(candidates)
        for i in range(size):
            index = (first + i) % size
            rack = member_rack[candidates[index]]
            if rack >= 0 and row[rack]:
                return index
        return -1

    left: list[int] = []
    next_under = 0
    for partition, set_id in zip(
        unassigned.tolist(), partition_set[unassigned].tolist(), strict=True
    ):
        row = matches[set_id]
        consumer = -1
        if under_min and any(under_tally[r] for r in matching_racks[set_id]):
            index = next_rack_consumer(row, under_min, next_under)
            consumer = under_min[index]
            count = sizes[consumer] + 1
            if count >= min_quota:
                under_min.pop(index)
                under_tally[member_rack[consumer]] -= 1
                if count < max_quota:
                    exactly_min.append(consumer)
                    min_tally[member_rack[consumer]] += 1
            else:
                index += 1
            next_under = index % len(under_min) if under_min else 0
        elif exactly_min and over_min < extra and any(min_tally[r] for r in matching_racks[set_id]):
            index = next_rack_consumer(row, exactly_min, 0)
            consumer = exactly_min[index]
            if sizes[consumer] + 1 == max_quota:
                exactly_min.pop(index)
                min_tally[member_rack[consumer]] -= 1
                over_min += 1
        if consumer >= 0:
            owner[partition] = consumer
            sizes[consumer] += 1
        else:
            left.append(partition)
    return np.array(left, dtype=np.int64), over_min


def _deal_round_robin(
    count: int, under_min: list[int], exactly_min: list[int], sizes: list[int], min_quota: int
) -> IntArray:
    """Kafka's ``assignRoundRobin`` as arrays: the owners of the next ``count`` partitions.

    Members under ``minQuota`` are visited in order, round after round, each leaving the rotation
    when it reaches ``minQuota`` (and joining the tail of the ``minQuota`` queue); once none is left,
    each further partition goes to the head of that queue.
    """
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    under = np.array(under_min, dtype=np.int64)
    deficit = min_quota - np.array([sizes[m] for m in under_min], dtype=np.int64)
    rounds = int(deficit.max()) if len(under) else 0
    # Slot (round r, member i) exists while r < deficit[i]; Kafka fills slots round by round.
    grid = np.arange(rounds, dtype=np.int64)[:, None] < deficit[None, :]
    _, columns = np.nonzero(grid)
    dealt = under[columns]
    if len(dealt) >= count:
        return dealt[:count]
    reached_min = under[np.lexsort((np.arange(len(under)), deficit))]
    queue = np.concatenate((np.array(exactly_min, dtype=np.int64), reached_min))
    needed = count - len(dealt)
    if needed > len(queue):
        raise RuntimeError("sticky constrained assignment: more partitions than quota slots")
    return np.concatenate((dealt, queue[:needed]))
