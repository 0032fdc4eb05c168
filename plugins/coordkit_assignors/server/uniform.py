"""Kafka 4's server-side ``uniform`` assignor (``UniformAssignor`` of the group coordinator).

Homogeneous groups take Kafka's ``UniformHomogeneousAssignmentBuilder``: ``N`` partitions over
``M`` members give ``N // M`` each and ``N % M`` members one more; every member, in member order,
keeps its current target up to its quota (topics, then partitions, in the order its target lists
them) and drops topics it no longer subscribes to. The ``N % M`` larger quotas go to the members
that fill them from their current target; a member that does not passes its larger quota on while
enough members remain to take the rest (Kafka 4.4; 3.x gave them to the first members); the partitions nobody holds
(topic by topic in Java's ``HashSet`` order of the topic ids, partitions ascending) and then the
ones revoked go, in that order, to the members still below quota, in member order.

Heterogeneous groups take ``UniformHeterogeneousAssignmentBuilder``: see :mod:`.uniform_general`.
Kafka 4.4's uniform assignor reads no racks.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

import numpy as np

from coordkit.strategies.partition_columns import TopicIndexer, TopicPartitions
from coordkit.strategies.target_assignment import (
    GroupSpec,
    PartitionAssignorError,
    SubscriptionType,
    TargetAssignment,
    TopicDescriber,
    current_owners,
    java_hash_set_order,
)
from coordkit_assignors.server.columns import Run, assignment_from_runs
from coordkit_assignors.server.uniform_general import heterogeneous_assignment


class ServerUniformAssignor:
    """Balance first, then stickiness to the current target."""

    name: ClassVar[str] = "uniform"
    balanced: ClassVar[bool] = True
    sticky: ClassVar[bool] = True

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
        if not group.members:
            return TargetAssignment({})
        if group.subscription_type is SubscriptionType.HOMOGENEOUS:
            return homogeneous_assignment(group, topics)
        return heterogeneous_assignment(group, topics)


def _missing_topic(topic_id: uuid.UUID) -> PartitionAssignorError:
    return PartitionAssignorError(
        f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
    )


def homogeneous_assignment(group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
    """Kafka's homogeneous builder (every member must subscribe to the first member's topics)."""
    member_ids = group.member_ids()
    first = group.members[member_ids[0]]
    topic_order = java_hash_set_order(first.subscribed_topic_ids)
    if not topic_order:
        return TargetAssignment({m: {} for m in member_ids})
    counts = []
    for topic_id in topic_order:
        count = topics.num_partitions(topic_id)
        if count == -1:
            raise _missing_topic(topic_id)
        counts.append(count)
    total = sum(counts)
    owners = current_owners(group, topics)

    # The partitions nobody holds, topic by topic in HashSet order: one pass over all topics,
    # then a run for each topic with any.
    unowned = np.flatnonzero(np.concatenate([owners[t] for t in topic_order]) < 0)
    offsets = np.zeros(len(topic_order) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    cuts = np.searchsorted(unowned, offsets).tolist()
    free: list[Run] = [
        (i, unowned[cuts[i] : cuts[i + 1]] - offsets[i])
        for i in range(len(topic_order))
        if cuts[i] < cuts[i + 1]
    ]
    revoked: list[Run] = []  # what members give up, in the order they give it up

    min_quota, extra = divmod(total, len(member_ids))
    indexer = TopicIndexer(topic_order)
    kept: dict[int, list[Run]] = {}
    unchanged: dict[int, TopicPartitions] = {}  # members keeping all of their current target
    unfilled: list[tuple[int, int]] = []  # (member position, remaining quota)
    for position, member in enumerate(member_ids):
        quota = min_quota
        takes_extra = extra > 0
        if takes_extra:
            quota += 1
        held = group.members[member].assignment
        keeps = kept[position] = []
        bounds = held.bounds.tolist()
        column = held.partitions
        for run, topic in enumerate(indexer.run_list(held)):
            if topic < 0:  # no longer subscribed
                continue
            start, end = bounds[run], bounds[run + 1]
            if end - start <= quota:
                quota -= end - start
                keeps.append((topic, column[start:end]))
            else:
                if quota:
                    keeps.append((topic, column[start : start + quota]))
                revoked.append((topic, column[start + quota : end]))
                quota = 0
        if len(keeps) == len(held) and (not keeps or keeps[-1][1].size == bounds[-1] - bounds[-2]):
            unchanged[position] = held
        # Kafka 4.4: a member that did not fill its extra partition from its current target
        # leaves the extra to a later member while enough later members remain to take them all.
        if quota > 0 and takes_extra and len(member_ids) - position > extra:
            quota -= 1
            takes_extra = False
        if takes_extra:
            extra -= 1
        if quota > 0:
            unfilled.append((position, quota))

    pending = sum(p.size for _, p in free) + sum(p.size for _, p in revoked)
    if pending > sum(quota for _, quota in unfilled):
        raise PartitionAssignorError("Partitions were left unassigned")
    # A member given partitions is not unchanged.
    for position, quota in unfilled:
        if pending <= 0:
            break
        unchanged.pop(position, None)
        pending -= quota
    return assignment_from_runs(
        member_ids, topic_order, unchanged, kept, [*free, *revoked], unfilled, len(free)
    )
