"""The built-in assignment metrics, one number per simulated rebalance.

Every metric reads the columnar arrays of :class:`~coordkit_assignors.lab.simulation.AssignmentStep`
(owner code per partition, topic position per partition, ...), never one object per partition.
Metrics about a rebalance (moves, revocations, rounds) do not apply to step 0, the first
assignment, and return ``None`` there.

Moves and their minimum
    ``moved`` counts partitions whose owner before the step is still in the group and whose owner
    after it is someone else. Partitions of members that left or crashed, new partitions and
    partitions of deleted topics must be (re)assigned anyway and are not moves.
    ``moved_min`` is a lower bound on the moves of any assignment that balances partition counts
    (max - min <= 1): a partition whose owner no longer subscribes to its topic must move; with
    identical subscriptions the ``N % M`` largest holders may keep ``ceil(N / M)`` and the rest
    ``N // M``, so whatever a member holds above its quota must move (the exact minimum there).
    With different subscriptions only the first term is counted, so the bound is weak.
    ``moved_excess = moved - moved_min``; a negative value means the strategy kept partitions
    where they were at the expense of balance.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from coordkit.lab import FunctionMetric
from coordkit.strategies.assignment import load_balance as assignment_load_balance
from coordkit.support.cputime import TIMING_METHOD
from coordkit_assignors.lab.simulation import ASSIGNMENT_KIND, AssignmentStep

#: The built-ins: functions of an :class:`AssignmentStep`.
StepMetric = functools.partial(FunctionMetric, kinds=(ASSIGNMENT_KIND,))


def _member_counts(step: AssignmentStep) -> np.ndarray:
    owners = step.owners
    held = owners[owners >= 0]
    return np.bincount(held, minlength=len(step.member_names))[: step.group_size]


def count_balance(step: AssignmentStep) -> float | None:
    if step.group_size == 0:
        return None
    counts = _member_counts(step)
    return float(counts.max() - counts.min())


def topic_balance(step: AssignmentStep) -> float | None:
    """The worst topic's spread: max - min partitions of that topic over its subscribers."""
    subscribers = step.subscriber_counts
    live = (subscribers > 0) & (np.asarray(step.space.counts) > 0)
    if not live.any():
        return None
    topics = len(step.space.topics)
    owners = step.owners
    assigned = owners >= 0
    keys = owners[assigned] * topics + step.topic_of[assigned]
    pairs, counts = np.unique(keys, return_counts=True)
    topic = pairs % topics
    highest = np.zeros(topics, dtype=np.int64)
    lowest = np.full(topics, np.iinfo(np.int64).max, dtype=np.int64)
    np.maximum.at(highest, topic, counts)
    np.minimum.at(lowest, topic, counts)
    holders = np.bincount(topic, minlength=topics)
    lowest = np.where(holders < subscribers, 0, lowest)  # a subscriber holding none has 0
    return float((highest - lowest)[live].max())


def load_balance(step: AssignmentStep) -> float | None:
    """Max over mean of the members' summed partition loads (1.0 is perfect)."""
    if step.group_size == 0:
        return None
    owners = step.owners
    assigned = owners >= 0
    loads = step.loads[assigned]
    top = float(loads.max()) if loads.size else 0.0
    if not math.isfinite(top) or top <= 0:
        return None
    # Scaled by the largest load first, so loads near the float limit cannot overflow the sums.
    per_member = np.bincount(
        owners[assigned], weights=loads / top, minlength=len(step.member_names)
    )[: step.group_size]
    return assignment_load_balance(per_member.tolist())


def _surviving_claims(step: AssignmentStep) -> np.ndarray:
    previous = step.previous_owners
    return (previous >= 0) & (previous < step.group_size)


def moved(step: AssignmentStep) -> float | None:
    if step.previous is None:
        return None
    previous, owners = step.previous_owners, step.owners
    return float(np.count_nonzero(_surviving_claims(step) & (owners >= 0) & (owners != previous)))


def moved_min(step: AssignmentStep) -> float | None:
    if step.previous is None:
        return None
    size = step.group_size
    if size == 0:
        return 0.0
    topic_of = step.topic_of
    assignable = step.subscriber_counts[topic_of] > 0
    claims = _surviving_claims(step) & assignable
    claimants = step.previous_owners[claims]
    row_of, rows = step.subscriptions
    still_subscribed = rows[row_of[claimants], topic_of[claims]]
    forced = int(np.count_nonzero(~still_subscribed))
    if not step.homogeneous:
        return float(forced)
    quota, extra = divmod(int(np.count_nonzero(assignable)), size)
    kept = np.sort(np.bincount(claimants[still_subscribed], minlength=size))[::-1]
    quotas = np.full(size, quota, dtype=np.int64)
    quotas[:extra] += 1
    return float(forced + int(np.maximum(kept - quotas, 0).sum()))


def moved_excess(step: AssignmentStep) -> float | None:
    done, least = moved(step), moved_min(step)
    return None if done is None or least is None else done - least


def unassigned(step: AssignmentStep) -> float | None:
    """Partitions of subscribed topics that nobody got (a correct assignor leaves none)."""
    assignable = step.subscriber_counts[step.topic_of] > 0
    return float(np.count_nonzero(assignable & (step.owners < 0)))


def revoked(step: AssignmentStep) -> float | None:
    return None if step.previous is None else float(step.revoked)


def orphaned(step: AssignmentStep) -> float | None:
    return None if step.previous is None else float(step.orphaned)


def rounds(step: AssignmentStep) -> float | None:
    return None if step.previous is None else float(step.rounds)


def rack_locality(step: AssignmentStep) -> float | None:
    """Fraction of partitions whose assignee's rack holds a replica (members and partitions
    without racks are left out; ``None`` when nothing has both)."""
    members = step.group.members
    racks = sorted({m.rack for m in members.values() if m.rack})
    if not racks or all(t.replica_racks is None for t in step.group.topics.values()):
        return None
    rack_id = {r: i for i, r in enumerate(racks)}
    member_rack = np.full(len(step.member_names), -1, dtype=np.int64)
    for code, member in enumerate(members.values()):
        if member.rack:
            member_rack[code] = rack_id[member.rack]
    space = step.space
    masks = np.zeros(space.total, dtype=np.int64)
    known = np.zeros(space.total, dtype=bool)
    mask_of: dict[tuple[str, ...], int] = {}  # few distinct replica rack lists in practice
    for topic, meta in step.group.topics.items():
        if meta.replica_racks is None or not meta.partitions:
            continue
        base = space.base(topic)
        masks[base : base + meta.partitions] = [
            mask_of[replicas]
            if replicas in mask_of
            else mask_of.setdefault(
                replicas, sum(1 << rack_id[r] for r in set(replicas) if r in rack_id)
            )
            for replicas in meta.replica_racks
        ]
        known[base : base + meta.partitions] = True
    owners = step.owners
    owner_rack = np.where(owners >= 0, member_rack[np.maximum(owners, 0)], -1)
    counted = known & (owner_rack >= 0)
    total = int(np.count_nonzero(counted))
    if total == 0:
        return None
    local = (masks[counted] >> owner_rack[counted]) & 1
    return float(local.sum()) / total


def assign_ms(step: AssignmentStep) -> float | None:
    return step.assign_seconds * 1000.0


BUILTIN_METRICS: tuple[FunctionMetric[AssignmentStep], ...] = (
    StepMetric(
        "count_balance",
        "max - min partitions per member",
        "partitions",
        "lower",
        count_balance,
        headline="Which balances partition counts best?",
        tradeoff="balance",
    ),
    StepMetric(
        "topic_balance",
        "worst topic's max - min partitions over its subscribers",
        "partitions",
        "lower",
        topic_balance,
    ),
    StepMetric(
        "load_balance",
        "max / mean of per-member load (partition loads, 1 each when not given)",
        "ratio",
        "lower",
        load_balance,
        headline="Which balances load best?",
        tradeoff="balance",
    ),
    StepMetric(
        "moved",
        "partitions moved from a member that stays to another member",
        "partitions",
        "lower",
        moved,
        headline="Which moves fewest partitions?",
        tradeoff="movement",
    ),
    StepMetric(
        "moved_min",
        "lower bound on moves for a count-balanced result",
        "partitions",
        "lower",
        moved_min,
    ),
    StepMetric(
        "moved_excess",
        "moved - moved_min (negative: kept partitions at the cost of balance)",
        "partitions",
        "lower",
        moved_excess,
        tradeoff="movement",
    ),
    StepMetric(
        "revoked",
        "partitions revoked from members that stay (eager: all they owned)",
        "partitions",
        "lower",
        revoked,
        headline="Which interrupts consumers least (revocations)?",
        tradeoff="interruption",
    ),
    StepMetric("orphaned", "partitions of crashed members", "partitions", "lower", orphaned),
    StepMetric(
        "rounds",
        "assignment rounds until stable",
        "rounds",
        "lower",
        rounds,
        tradeoff="interruption",
    ),
    StepMetric(
        "unassigned",
        "partitions of subscribed topics nobody got (should be 0)",
        "partitions",
        "lower",
        unassigned,
    ),
    StepMetric(
        "rack_locality",
        "fraction of partitions consumed on a rack holding a replica",
        "fraction",
        "higher",
        rack_locality,
    ),
    StepMetric(
        "assign_ms",
        "CPU time inside the assignor per rebalance (all rounds)",
        "ms",
        "lower",
        assign_ms,
        headline="Which is fastest?",
        measured=TIMING_METHOD,
    ),
)
