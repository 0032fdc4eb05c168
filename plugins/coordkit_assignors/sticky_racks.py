"""Rack awareness for the sticky assignors (KIP-881, Kafka 3.5): Kafka's ``RackInfo``.

Rack-aware assignment is used when some member has a rack, the member racks meet the partitions'
replica racks, and some partition is not replicated on every replica rack (or the assignor is told to
prefer the rack-aware logic, as Kafka's tests do). A member *mismatches* a partition when it has a
rack and no replica of the partition lives there; a member without a rack matches everything.

Partitions are described by the id of their distinct replica-rack set, so the per-partition data is
one integer and the rack tests are table look-ups.
"""

from __future__ import annotations

import numpy as np

from coordkit_assignors.sticky_group import BoolArray, IntArray, StickyGroup


class StickyRacks:
    """:ivar enabled: whether the rack-aware assignment is used.
    :ivar member_rack: per member, the number of its rack, or -1.
    :ivar partition_set: per global partition, the id of its replica-rack set.
    :ivar matches: ``matches[set_id, rack]``: does the replica set include member rack ``rack``.
    :ivar consumers_per_set: per set id, how many members sit on one of its racks (Kafka's
        ``numConsumersByPartition``, used to assign the least-covered partitions first).
    """

    def __init__(self, group: StickyGroup, prefer_rack_aware: bool = False):
        self.enabled = False
        rack_number: dict[str, int] = {}
        self.member_rack: IntArray = np.array(
            [-1 if r is None else rack_number.setdefault(r, len(rack_number)) for r in group.racks],
            dtype=np.int64,
        )
        if not rack_number:
            return
        space = group.space
        self.partition_set: IntArray = np.zeros(space.total, dtype=np.int64)
        set_id: dict[tuple[str, ...], int] = {(): 0}
        for topic in group.topics:
            meta = group.group.topics[topic]
            if meta.replica_racks is None:
                continue  # no replica racks known: the empty set (id 0)
            base = space.base(topic)
            ids = [set_id.setdefault(racks, len(set_id)) for racks in meta.replica_racks]
            self.partition_set[base : base + len(ids)] = ids
        rack_sets = [frozenset(racks) for racks in set_id]
        used = np.zeros(len(rack_sets), dtype=bool)
        if group.total:
            used[np.unique(self.partition_set[group.all_partitions()])] = True
        used_sets = {rack_sets[i] for i in np.flatnonzero(used)}
        all_partition_racks = frozenset().union(*used_sets) if used_sets else frozenset()
        consumer_racks = set(rack_number)
        if consumer_racks.isdisjoint(all_partition_racks):
            return
        if not prefer_rack_aware and all(s == all_partition_racks for s in used_sets):
            return  # every partition is on every rack: racks cannot improve anything
        self.enabled = True
        racks_in_order = sorted(rack_number, key=rack_number.__getitem__)
        self.matches: BoolArray = np.array(
            [[rack in s for rack in racks_in_order] for s in rack_sets], dtype=bool
        ).reshape(len(rack_sets), len(racks_in_order))
        members_per_rack = np.bincount(
            self.member_rack[self.member_rack >= 0], minlength=len(rack_number)
        )
        self.consumers_per_set: IntArray = (
            (self.matches * members_per_rack[None, :]).sum(axis=1).astype(np.int64)
        )

    def mismatch(self, members: IntArray, partitions: IntArray) -> BoolArray:
        """Element-wise: does the member have a rack that holds no replica of the partition."""
        rack = self.member_rack[members]
        has_rack = rack >= 0
        return has_rack & ~self.matches[self.partition_set[partitions], np.where(has_rack, rack, 0)]

    def sort_by_rack_consumers(self, partitions: IntArray) -> IntArray:
        """Kafka's ``sortPartitionsByRackConsumers``: stable, fewest same-rack members first."""
        keys = self.consumers_per_set[self.partition_set[partitions]]
        return partitions[np.argsort(keys, kind="stable")]
