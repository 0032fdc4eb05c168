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
When nobody owns anything (a new group) and racks play no part, steps 1 and 2 do nothing and step 3
deals Kafka's sorted partitions round-robin to the members in id order: :func:`deal_new_group`
builds those lists directly, without a per-partition owner array.
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

    # 1. Keep owned partitions up to quota.
    keep, under_min, exactly_min, over_min = _quotas_kept(
        group, owned_count, min_quota, max_quota, extra
    )
    kept = _kept_claims(group, owned_member, owned_partition, owned_count, keep)
    owner[owned_partition[kept]] = owned_member[kept]
    sizes = keep.tolist()

    unassigned = group.all_partitions()
    unassigned = unassigned[owner[unassigned] < 0]
    newly[unassigned] = True

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


def _quotas_kept(
    group: StickyGroup, owned_count: IntArray, min_quota: int, max_quota: int, extra: int
) -> tuple[IntArray, list[int], list[int], int]:
    """Step 1's quotas: per member how many owned partitions it keeps; the members under
    ``minQuota`` and those at ``minQuota`` that may still get one more (both by member number);
    how many members keep ``maxQuota``.

    Kafka visits members in ``HashMap`` order: members owning ``minQuota`` or less keep all,
    members owning more keep ``maxQuota`` while fewer than ``N % M`` have done so, and ``minQuota``
    after. Only that choice depends on the order, and only when more than ``N % M`` members could
    keep ``maxQuota``; the members left at ``minQuota`` may get one more only if it was not made.
    """
    keep = np.minimum(owned_count, min_quota)
    over_min = 0
    if extra:
        candidates = np.flatnonzero(owned_count >= max_quota)
        if len(candidates) > extra:
            rank = np.empty(group.size, dtype=np.int64)
            rank[group.hash_order] = np.arange(group.size, dtype=np.int64)
            candidates = candidates[np.argsort(rank[candidates], kind="stable")]
        keep[candidates[:extra]] = max_quota
        over_min = min(len(candidates), extra)
    under_min: list[int] = np.flatnonzero(owned_count < min_quota).tolist()
    exactly_min: list[int] = np.flatnonzero(keep == min_quota).tolist() if over_min < extra else []
    return keep, under_min, exactly_min, over_min


def deal_new_group(group: StickyGroup, racks: StickyRacks) -> list[list[int]] | None:
    """Per member number, its partitions (global indices, ascending) when no member owns any
    partition and racks are not used; ``None`` otherwise.

    Every member is then under ``minQuota`` with the same deficit, so step 3's rounds visit the
    members in id order again and again, and the ``N % M`` partitions left after ``minQuota`` rounds
    go to the first members of the same order: member ``i`` gets sorted partitions ``i, i + M, ...``.
    (With fewer partitions than members, ``minQuota`` is 0 and the first ``N`` members get one.)
    """
    members = group.size
    if members == 0 or group.has_claims or racks.enabled:
        return None
    partitions = group.all_partitions()
    rounds = len(partitions) // members
    # One tolist of a contiguous (member, round) table creates the ints member by member.
    table = np.ascontiguousarray(partitions[: rounds * members].reshape(rounds, members).T)
    lists: list[list[int]] = table.tolist()
    for member, partition in enumerate(partitions[rounds * members :].tolist()):
        lists[member].append(partition)
    if not group.java_order_is_index_order:
        for member_partitions in lists:
            member_partitions.sort()
    return lists


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
