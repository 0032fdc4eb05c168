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

from coordkit.strategies.target_assignment import (
    GroupSpec,
    PartitionAssignorError,
    SubscriptionType,
    TargetAssignment,
    TopicDescriber,
    current_owners,
    java_hash_set_order,
)
from coordkit_assignors.server.columns import assignment_from_columns
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
    subscribed = set(topic_order)
    topic_index = {t: i for i, t in enumerate(topic_order)}
    counts = []
    for topic_id in topic_order:
        count = topics.num_partitions(topic_id)
        if count == -1:
            raise _missing_topic(topic_id)
        counts.append(count)
    total = sum(counts)
    owners = current_owners(group, topics)

    # The partitions nobody holds, topic by topic in HashSet order, as (topic, partition) columns.
    free = [np.flatnonzero(owners[t] < 0) for t in topic_order]
    free_topics = [np.repeat(np.int64(i), p.size) for i, p in enumerate(free)]
    revoked_topics: list[int] = []
    revoked_partitions: list[int] = []

    min_quota, extra = divmod(total, len(member_ids))
    kept: dict[str, dict[uuid.UUID, tuple[int, ...]]] = {}
    unfilled: list[tuple[int, int]] = []  # (member position, remaining quota)
    for position, member in enumerate(member_ids):
        quota = min_quota
        takes_extra = extra > 0
        if takes_extra:
            quota += 1
        keep: dict[uuid.UUID, tuple[int, ...]] = {}
        for topic_id, partitions in group.members[member].assignment.items():
            if topic_id not in subscribed:
                continue
            if len(partitions) <= quota:
                quota -= len(partitions)
                keep[topic_id] = partitions
            else:
                if quota:
                    keep[topic_id] = partitions[:quota]
                revoked_partitions.extend(partitions[quota:])
                revoked_topics.extend([topic_index[topic_id]] * (len(partitions) - quota))
                quota = 0
        kept[member] = keep
        # Kafka 4.4: a member that did not fill its extra partition from its current target
        # leaves the extra to a later member while enough later members remain to take them all.
        if quota > 0 and takes_extra and len(member_ids) - position > extra:
            quota -= 1
            takes_extra = False
        if takes_extra:
            extra -= 1
        if quota > 0:
            unfilled.append((position, quota))

    pending_topics = np.concatenate([*free_topics, np.asarray(revoked_topics, dtype=np.int64)])
    pending = np.concatenate([*free, np.asarray(revoked_partitions, dtype=np.int64)])
    quotas = np.asarray([q for _, q in unfilled], dtype=np.int64)
    receivers = np.repeat(np.asarray([m for m, _ in unfilled], dtype=np.int64), quotas)
    if pending.size > receivers.size:
        raise PartitionAssignorError("Partitions were left unassigned")
    receivers = receivers[: pending.size]
    return assignment_from_columns(
        member_ids, topic_order, kept, receivers, pending_topics, pending
    )
