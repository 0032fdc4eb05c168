"""``rack-aware``: the server-side assignor Kafka 4 lacks, preferring replicas on the member's rack.

Rule: first ``uniform``'s target (balanced, sticky to the current target). Then, topic by topic,
the partitions that change hands this round (those not in their new owner's current target) are
dealt again among the members receiving them, each keeping its number of them: first every member
with a rack, in member order, takes the lowest of them with a replica on its rack; then every
member, in member order, fills what is left of its share with the lowest remaining. Counts per
member and per topic are ``uniform``'s, so it is as balanced and as sticky; a partition a member
already held never moves for the sake of a rack.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from coordkit.strategies.target_assignment import (
    GroupSpec,
    MemberAssignment,
    TargetAssignment,
    TopicDescriber,
)
from coordkit_assignors.server.uniform import ServerUniformAssignor


class ServerRackAwareAssignor:
    name: ClassVar[str] = "rack-aware"
    balanced: ClassVar[bool] = True
    sticky: ClassVar[bool] = True

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
        base = ServerUniformAssignor().assign(group, topics)
        kept: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in group.members}
        received: dict[uuid.UUID, dict[str, int]] = {}
        pool: dict[uuid.UUID, list[int]] = {}
        for member, target in base.members.items():
            current = group.members[member].assignment
            for topic_id, partitions in target.partitions.items():
                had = set(current.get(topic_id, ()))
                new = [p for p in partitions if p not in had]
                kept[member][topic_id] = [p for p in partitions if p in had]
                if new:
                    received.setdefault(topic_id, {})[member] = len(new)
                    pool.setdefault(topic_id, []).extend(new)
        for topic_id, shares in received.items():
            remaining = sorted(pool[topic_id])
            order = [m for m in group.members if m in shares]
            if topics.topics[topic_id].partition_racks is not None:
                for member in order:
                    rack = group.members[member].rack
                    if rack is None:
                        continue
                    local = [
                        p for p in remaining if rack in topics.racks_for_partition(topic_id, p)
                    ][: shares[member]]
                    kept[member][topic_id].extend(local)
                    shares[member] -= len(local)
                    taken = set(local)
                    remaining = [p for p in remaining if p not in taken]
            for member in order:
                share = shares[member]
                kept[member][topic_id].extend(remaining[:share])
                remaining = remaining[share:]
        return TargetAssignment(
            {
                m: MemberAssignment({t: sorted(ps) for t, ps in by_topic.items()})
                for m, by_topic in kept.items()
            }
        )
