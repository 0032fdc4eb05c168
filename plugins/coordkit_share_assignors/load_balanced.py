"""``load-balanced``: coordkit's share assignor that evens out partition *load*, not counts.

Each partition weighs what the describer says (``TopicDescription.loads``: a backlog, a rate;
1 each when the describer has none, so it evens out counts). Heaviest first, each partition goes
to the subscriber that would carry the least load afterwards (ties: the one holding it now, then
the fewest partitions, then the coordinator's order): Graham's longest-processing-time rule, at
most 4/3 of the best possible maximum load. A member that got nothing (more members than
partitions) then shares the partition with the most load per holder. It is sticky only through
its tie-break: with equal loads, a member keeps what it holds where balance allows.
"""

from __future__ import annotations

from typing import ClassVar

from coordkit.strategies.share_assignment import GroupSpec, TargetAssignment, TopicDescriber
from coordkit_share_assignors.sharing import (
    Held,
    TopicPartition,
    as_target,
    share_with_idle_members,
    subscribed_partitions,
    subscribers,
)


def partition_weight(topics: TopicDescriber, tp: TopicPartition) -> float:
    topic = topics.topics.get(tp[0])
    if topic is None or topic.loads is None:
        return 1.0
    return max(topic.loads[tp[1]], 0.0)


class LoadBalancedShareAssignor:
    """``load-balanced``: every member's summed partition load as even as the greedy rule gets."""

    name: ClassVar[str] = "load-balanced"
    balanced: ClassVar[bool] = True
    sticky: ClassVar[bool] = False

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
        partitions = subscribed_partitions(group, topics)
        by_topic = subscribers(group)
        order = {m: i for i, m in enumerate(group.members)}
        current: dict[TopicPartition, set[str]] = {}
        for member, spec in group.members.items():
            for topic_id, ps in spec.assignment.items():
                for p in ps:
                    current.setdefault((topic_id, p), set()).add(member)
        load = dict.fromkeys(group.members, 0.0)
        held: Held = {m: [] for m in group.members}

        def weight(tp: TopicPartition) -> float:
            return partition_weight(topics, tp)

        for tp in sorted(partitions, key=lambda tp: (-weight(tp), tp)):
            candidates = by_topic.get(tp[0], [])
            if not candidates:
                continue
            w = weight(tp)
            owners = current.get(tp, set())
            member = min(
                candidates,
                key=lambda m: (load[m] + w, m not in owners, len(held[m]), order[m]),
            )
            held[member].append(tp)
            load[member] += w
        share_with_idle_members(group, held, weight)
        return TargetAssignment(as_target(group, held))


__all__ = ["LoadBalancedShareAssignor", "partition_weight"]
