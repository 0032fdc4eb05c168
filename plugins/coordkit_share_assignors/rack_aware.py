"""``rack-aware``: coordkit's share assignor that gives a member the partitions with a replica on
its rack (``rack.id`` of the client, ``broker.rack`` of the brokers), so share fetches stay in
the rack, while keeping partition counts as even as ``simple``'s.

Every member gets a quota, as even as possible over the partitions of the topics it subscribes
to (with differing subscriptions: topic by topic, each topic's partitions spread over its
subscribers). A partition goes first to a subscriber on one of its replicas' racks with quota
left (the one with most quota left, then one holding it now, then the coordinator's order), and
only then to any subscriber with quota left; a member that got nothing (more members than
partitions) shares one, preferring its rack. Without racks it is a sticky, balanced assignor.
"""

from __future__ import annotations

from typing import ClassVar

from coordkit.strategies.share_assignment import (
    GroupSpec,
    SubscriptionType,
    TargetAssignment,
    TopicDescriber,
)
from coordkit_share_assignors.sharing import (
    Held,
    TopicPartition,
    as_target,
    share_with_idle_members,
    subscribed_partitions,
    subscribers,
)


def _quotas(count: int, members: list[str]) -> dict[str, int]:
    base, extra = divmod(count, len(members)) if members else (0, 0)
    return {m: base + (1 if i < extra else 0) for i, m in enumerate(members)}


class RackAwareShareAssignor:
    """``rack-aware``: partitions to members on their replicas' racks, counts kept even."""

    name: ClassVar[str] = "rack-aware"
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

        def on_rack(member: str, tp: TopicPartition) -> bool:
            rack = group.members[member].rack
            return rack is not None and rack in topics.racks_for_partition(*tp)

        # Quotas: over all partitions for identical subscriptions, else topic by topic (the
        # members holding more of a topic first, so that quotas follow what is held).
        quota: dict[str, int] = dict.fromkeys(group.members, 0)
        held_count = {
            m: sum(len(ps) for ps in s.assignment.values()) for m, s in group.members.items()
        }
        if group.subscription_type is SubscriptionType.HOMOGENEOUS:
            ranked = sorted(group.members, key=lambda m: (-held_count[m], order[m]))
            quota.update(_quotas(len(partitions), ranked))
        else:
            for topic_id, members in by_topic.items():
                ranked = sorted(members, key=lambda m: (-held_count[m], order[m]))
                for m, q in _quotas(topics.num_partitions(topic_id), ranked).items():
                    quota[m] += q
        held: Held = {m: [] for m in group.members}
        left: list[TopicPartition] = []
        # First pass: partitions to rack-local subscribers with quota left.
        for tp in partitions:
            local = [m for m in by_topic.get(tp[0], []) if quota[m] > 0 and on_rack(m, tp)]
            if not local:
                left.append(tp)
                continue
            owners = current.get(tp, set())
            member = min(local, key=lambda m: (-quota[m], m not in owners, order[m]))
            held[member].append(tp)
            quota[member] -= 1
        # Second pass: the rest to any subscriber, quota left first.
        for tp in left:
            candidates = by_topic.get(tp[0], [])
            if not candidates:
                continue
            owners = current.get(tp, set())
            member = min(
                candidates,
                key=lambda m: (quota[m] <= 0, -quota[m], m not in owners, order[m]),
            )
            held[member].append(tp)
            quota[member] -= 1
        share_with_idle_members(group, held, lambda tp: 1.0, on_rack)
        return TargetAssignment(as_target(group, held))


__all__ = ["RackAwareShareAssignor"]
