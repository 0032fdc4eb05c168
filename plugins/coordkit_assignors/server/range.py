"""Kafka 4's server-side ``range`` assignor (the group coordinator's ``RangeAssignor``).

Members in Kafka's order (static members first by instance id, then the rest by member id, Java
string order); each topic's partitions are cut into contiguous ranges over its subscribers in that
order, the first ``N % S`` subscribers taking one more. With identical subscriptions every topic's
``k``-th range goes to the same member, so co-partitioned topics line up. Kafka 4.4's range reads
neither the current target (it is not sticky) nor racks.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from coordkit.strategies.assignment import java_string_key
from coordkit.strategies.target_assignment import (
    GroupSpec,
    PartitionAssignorError,
    TargetAssignment,
    TopicDescriber,
)


class ServerRangeAssignor:
    name: ClassVar[str] = "range"
    #: Balanced per topic, not overall: with identical subscriptions the first members take the
    #: extra partition of every topic.
    balanced: ClassVar[bool] = False
    sticky: ClassVar[bool] = False

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
        members = group.members

        def order(member: str) -> tuple[int, bytes, bytes]:
            instance = members[member].instance_id
            if instance is not None:
                return 0, java_string_key(instance), b""
            return 1, java_string_key(member), b""

        # Java's sort is stable: static members with equal instance ids keep memberIds() order.
        sorted_members = sorted(members, key=order)
        subscribers: dict[uuid.UUID, int] = {}
        for member in sorted_members:
            for topic_id in members[member].subscribed_topic_ids:
                if topics.num_partitions(topic_id) == -1:
                    raise PartitionAssignorError("Member is subscribed to a non-existent topic")
                subscribers[topic_id] = subscribers.get(topic_id, 0) + 1
        next_range: dict[uuid.UUID, int] = dict.fromkeys(subscribers, 0)
        extra = {t: topics.num_partitions(t) % n for t, n in subscribers.items()}
        out: dict[str, dict[uuid.UUID, range]] = {}
        for member in sorted_members:
            assignment: dict[uuid.UUID, range] = {}
            for topic_id in members[member].subscribed_topic_ids:
                count = topics.num_partitions(topic_id)
                quota = count // subscribers[topic_id]
                if extra[topic_id] > 0:
                    quota += 1
                    extra[topic_id] -= 1
                start = next_range[topic_id]
                end = min(start + quota, count)
                next_range[topic_id] = end
                if start < end:
                    assignment[topic_id] = range(start, end)
            out[member] = assignment
        return TargetAssignment({m: out[m] for m in members})
