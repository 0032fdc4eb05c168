"""What coordkit's own share assignors have in common: the partitions a member may take, and
handing idle members a share of the partitions already given out (a share group's members may
share a partition: records are leased one at a time, so a member without a partition of its own
still gets work)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence

from coordkit.strategies.share_assignment import (
    GroupSpec,
    PartitionAssignorError,
    TopicDescriber,
)

TopicPartition = tuple[uuid.UUID, int]
#: member -> the partitions it gets, in the order given.
Held = dict[str, list[TopicPartition]]


def subscribed_partitions(group: GroupSpec, topics: TopicDescriber) -> list[TopicPartition]:
    """Every partition of a subscribed topic, topics by id and partitions in order.

    :raises PartitionAssignorError: a member subscribes to a topic ``topics`` does not hold.
    """
    out: list[TopicPartition] = []
    for topic_id in sorted(group.subscribed_topic_ids()):
        count = topics.num_partitions(topic_id)
        if count == -1:
            raise PartitionAssignorError(
                f"Members are subscribed to topic {topic_id} which doesn't exist in the topic "
                "metadata."
            )
        out.extend((topic_id, p) for p in range(count))
    return out


def subscribers(group: GroupSpec) -> dict[uuid.UUID, list[str]]:
    """topic id -> the members subscribing to it, in the group's order."""
    out: dict[uuid.UUID, list[str]] = {}
    for member, spec in group.members.items():
        for topic_id in spec.subscribed_topic_ids:
            out.setdefault(topic_id, []).append(member)
    return out


def share_with_idle_members(
    group: GroupSpec,
    held: Held,
    weight: Callable[[TopicPartition], float],
    prefers: Callable[[str, TopicPartition], bool] = lambda member, tp: False,
) -> None:
    """Give each member that got nothing one partition of its topics, sharing it: the one with
    the most weight per holder (ties: a preferred one, then the fewest holders, then order)."""
    holders: dict[TopicPartition, int] = {}
    for partitions in held.values():
        for tp in partitions:
            holders[tp] = holders.get(tp, 0) + 1
    for member, spec in group.members.items():
        if held.get(member):
            continue
        mine = set(spec.subscribed_topic_ids)
        candidates: Sequence[TopicPartition] = [tp for tp in holders if tp[0] in mine]
        if not candidates:
            continue
        best = min(
            candidates,
            key=lambda tp: (
                -weight(tp) / (holders[tp] + 1),
                not prefers(member, tp),
                holders[tp],
                tp,
            ),
        )
        held.setdefault(member, []).append(best)
        holders[best] += 1


def as_target(
    group: GroupSpec, held: Mapping[str, Sequence[TopicPartition]]
) -> dict[str, dict[uuid.UUID, list[int]]]:
    out: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in group.members}
    for member, partitions in held.items():
        for topic_id, p in partitions:
            out[member].setdefault(topic_id, []).append(p)
    return out
