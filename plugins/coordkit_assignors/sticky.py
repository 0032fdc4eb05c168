"""Kafka's ``sticky`` and ``cooperative-sticky`` assignors (``AbstractStickyAssignor``, Kafka 3.x).

Balance first, then stickiness: member partition counts differ by at most one (or the larger
member's partitions are not available to the smaller one), and as many previously owned partitions
as possible stay where they were. Identical subscriptions use the constrained assignment
(:mod:`.sticky_constrained`), different ones the general assignment (:mod:`.sticky_general`); both
are rack-aware when members and replicas have racks (:mod:`.sticky_racks`).

``cooperative-sticky`` computes the same assignment, then withholds every partition that changes
owner from its new owner for this round: the previous owner, who still claims it, revokes it first,
and the next rebalance hands it over. A partition is never revoked and assigned in the same round.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from coordkit.strategies.assignment import GroupAssignment, GroupSubscription, RebalanceProtocol
from coordkit_assignors.sticky_constrained import constrained_assign, deal_new_group
from coordkit_assignors.sticky_general import general_assign
from coordkit_assignors.sticky_group import BoolArray, IntArray, StickyGroup
from coordkit_assignors.sticky_racks import StickyRacks


class _AbstractStickyAssignor:
    name: ClassVar[str]
    protocols: ClassVar[tuple[RebalanceProtocol, ...]]
    cooperative: ClassVar[bool] = False
    #: When a member leaves, only its partitions move (the conformance kit checks it).
    sticky: ClassVar[bool] = True

    def __init__(self, *, prefer_rack_aware: bool = False):
        """:param prefer_rack_aware: use the rack-aware logic whenever members and replicas have
        racks in common, even if every partition is on every rack (Kafka's test-only switch)."""
        self.prefer_rack_aware = prefer_rack_aware

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        sticky = StickyGroup(group)
        racks = StickyRacks(sticky, self.prefer_rack_aware)
        withheld: BoolArray | None = None
        if sticky.all_subscriptions_equal:
            dealt = deal_new_group(sticky, racks)
            if dealt is not None:
                # Nobody owned anything, so nothing changes owner and nothing is withheld.
                return _from_lists(sticky, dealt, {})
            result = constrained_assign(sticky, racks)
            owner = result.owner
            if self.cooperative:
                # Kafka's constrained builder marks the partitions it hands out that a member owned
                # (revoked above quota, or claimed twice). We withhold any handed-out partition that
                # another member still lists: the same set, plus owned partitions dropped for a rack
                # mismatch, which Kafka 3.5's builder does not mark (it would hand them over while
                # their owner still has them).
                withheld = result.newly_assigned & _claimed_by_another(sticky, owner)
        else:
            owner = general_assign(sticky, racks)
            if self.cooperative:
                # Kafka's computePartitionsTransferringOwnership: assigned to a member that did not
                # own it while another member did.
                withheld = _claimed_by_another(sticky, owner) & ~_claimed_by_owner(sticky, owner)
        return _build(sticky, owner, withheld)


def _claimed_by_owner(sticky: StickyGroup, owner: IntArray) -> BoolArray:
    """Per partition: does its assigned member list it among its owned partitions."""
    mask = np.zeros(len(owner), dtype=bool)
    hits = sticky.claim_member == owner[sticky.claim_partition]
    mask[sticky.claim_partition[hits]] = True
    return mask


def _claimed_by_another(sticky: StickyGroup, owner: IntArray) -> BoolArray:
    """Per partition: does a member other than its assigned one list it among its owned partitions."""
    claimers = np.bincount(sticky.claim_partition, minlength=len(owner))
    return (owner >= 0) & (claimers > _claimed_by_owner(sticky, owner))


def _group_by_member(
    sticky: StickyGroup, partitions: IntArray, owners: IntArray
) -> list[list[int]]:
    # Narrower keys sort faster; numpy sorts 16-bit keys stably by radix.
    keys = owners.astype(np.uint16 if sticky.size <= 1 << 16 else np.int32)
    order = np.argsort(keys, kind="stable")
    flat: list[int] = partitions[order].tolist()
    ends = np.cumsum(np.bincount(owners, minlength=sticky.size)).tolist()
    out, start = [], 0
    for end in ends:
        out.append(flat[start:end])
        start = end
    return out


def _build(sticky: StickyGroup, owner: IntArray, withheld: BoolArray | None) -> GroupAssignment:
    assigned = owner >= 0
    if withheld is not None:
        assigned &= ~withheld
    partitions = np.flatnonzero(assigned)
    per_member = _group_by_member(sticky, partitions, owner[partitions])
    held: dict[str, list[int]] = {}
    if withheld is not None and withheld.any():
        moving = np.flatnonzero(withheld)
        for number, indices in enumerate(_group_by_member(sticky, moving, owner[moving])):
            if indices:
                held[sticky.member_ids[number]] = indices
    return _from_lists(sticky, per_member, held)


def _from_lists(
    sticky: StickyGroup, per_member: list[list[int]], held: dict[str, list[int]]
) -> GroupAssignment:
    ids = sticky.member_ids
    return GroupAssignment.from_indices(
        sticky.space, {ids[n]: per_member[n] for n in sticky.input_positions}, held
    )


class StickyAssignor(_AbstractStickyAssignor):
    """Kafka's ``sticky`` assignor (eager protocol: members revoke everything before rejoining)."""

    name: ClassVar[str] = "sticky"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)


class CooperativeStickyAssignor(_AbstractStickyAssignor):
    """Kafka's ``cooperative-sticky`` assignor: partitions that move wait one rebalance."""

    name: ClassVar[str] = "cooperative-sticky"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (
        RebalanceProtocol.COOPERATIVE,
        RebalanceProtocol.EAGER,
    )
    cooperative: ClassVar[bool] = True
