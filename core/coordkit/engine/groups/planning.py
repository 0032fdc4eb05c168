"""The group leader's work: turning members' subscriptions into an assignment with an assignor,
and deciding whether a consumer rebalances eagerly or cooperatively."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coordkit.engine.groups.protocol import JoinedMember
from coordkit.kafka.model import TopicPartition
from coordkit.strategies.assignment import (
    Assignor,
    GroupSubscription,
    MemberSubscription,
    RebalanceProtocol,
    TopicMetadata,
)


def rebalance_protocol(
    names: Sequence[str], assignors: Mapping[str, Assignor]
) -> RebalanceProtocol:
    """Kafka's consumer rule: cooperative only when every configured assignor (``names``, found in
    ``assignors``) supports it (a consumer must be able to follow whichever of them the group
    chooses); unknown names count as eager."""
    for name in names:
        assignor = assignors.get(name)
        if assignor is None or RebalanceProtocol.COOPERATIVE not in assignor.protocols:
            return RebalanceProtocol.EAGER
    return RebalanceProtocol.COOPERATIVE if names else RebalanceProtocol.EAGER


def compute_assignment(
    assignor: Assignor,
    members: Sequence[JoinedMember],
    topic_partitions: Mapping[str, int],
    *,
    cooperative: bool,
) -> dict[str, frozenset[TopicPartition]]:
    """Every member's partitions under ``assignor`` (the group's chosen protocol).

    Owned partitions of topics that no longer exist (or partitions beyond a topic's count), or
    that their member no longer subscribes to, are dropped from the input. Cooperatively, a
    partition that another member still owns is never handed over in the same round (Kafka's
    leader-side check after the assignor): its owner revokes it first and the next round assigns
    it.
    """

    def exists(tp: TopicPartition) -> bool:
        return tp.partition < topic_partitions.get(tp.topic, 0)

    subscription = GroupSubscription(
        topics={t: TopicMetadata(n) for t, n in topic_partitions.items()},
        members={
            m.member_id: MemberSubscription(
                topics=m.subscription.topics,
                instance_id=m.group_instance_id,
                owned=[
                    tp
                    for tp in m.subscription.owned
                    if exists(tp) and tp.topic in m.subscription.topics
                ],
                generation=m.subscription.generation,
                rack=m.subscription.rack,
            )
            for m in members
        },
    )
    result = assignor.assign(subscription)
    assigned = {
        m.member_id: frozenset(result.partitions(m.member_id))
        if m.member_id in result
        else frozenset()
        for m in members
    }
    if cooperative:
        owner = {tp: m.member_id for m in members for tp in m.subscription.owned}
        assigned = {
            member: frozenset(tp for tp in parts if owner.get(tp, member) == member)
            for member, parts in assigned.items()
        }
    return assigned
