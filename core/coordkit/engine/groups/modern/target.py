"""Computing a consumer group's target assignment with its server-side assignor (Kafka's
``TargetAssignmentBuilder``): every member's subscribed topic ids, rack, instance id and current
target handed to the assignor the group prefers, in the order Kafka's coordinator iterates them.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping

from coordkit.engine.groups.modern.group import ConsumerGroup, SubscribedTopic
from coordkit.engine.groups.modern.java_order import java_hash_map_order, java_hash_set_order
from coordkit.engine.groups.modern.member import Assignment, ConsumerGroupMember, assignment
from coordkit.engine.groups.modern.protocol import HeartbeatError
from coordkit.engine.groups.modern.topics import INTERNAL_TOPICS, TopicsImage
from coordkit.engine.groups.protocol import ErrorCode
from coordkit.strategies.target_assignment import (
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    ServerAssignor,
    TopicDescriber,
    TopicDescription,
)

log = logging.getLogger("coordkit.engine.groups")

#: Seconds after which a resolved regex is matched against the topics again (new topics join).
REGEX_REFRESH = 1.0


@functools.lru_cache(maxsize=256)
def _compiled(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


class TargetAssignmentBuilder:
    """The target assignments of the groups of one coordinator.

    :param assignors: ``group.consumer.assignors``, in order (the first is the default).
    """

    def __init__(
        self,
        assignors: Mapping[str, ServerAssignor],
        topics: TopicsImage,
        interval: float = 0.0,
    ):
        self.assignors = dict(assignors)
        self.default_assignor = next(iter(self.assignors), "")
        self.topics = topics
        #: ``group.consumer.assignment.interval.ms``, in seconds.
        self.interval = interval

    def due(self, group: ConsumerGroup, now: float) -> bool:
        """Whether the group needs a new target and may have one now."""
        return group.group_epoch > group.assignment_epoch and (
            now - group.assignment_computed_at >= self.interval
        )

    def maybe_compute(self, group: ConsumerGroup, now: float) -> bool:
        if not self.due(group, now):
            return False
        self.compute(group)
        group.assignment_computed_at = now
        return True

    def matches(self, regex: str) -> frozenset[str]:
        """The topics a subscription regex matches (internal topics never)."""
        pattern = _compiled(regex)
        return frozenset(
            t for t in self.topics.names() if t not in INTERNAL_TOPICS and pattern.fullmatch(t)
        )

    @staticmethod
    def member_topics(group: ConsumerGroup, member: ConsumerGroupMember) -> set[str]:
        """The topic names the member subscribes to: its names, and what its regex matched when
        it was last resolved (nothing before its first resolution)."""
        names = set(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex
        if regex is not None and regex in group.resolved_regexes:
            names.update(group.resolved_regexes[regex][1])
        return names

    def refresh_regexes(self, group: ConsumerGroup, now: float) -> bool:
        """Resolve the group's new regexes and those resolved :data:`REGEX_REFRESH` ago; when that
        changes what the group subscribes to, bump the group epoch. Whether it bumped."""
        subscribed = group.subscribed_regexes()
        changed = False
        for regex in list(group.resolved_regexes):
            if regex not in subscribed:
                del group.resolved_regexes[regex]
        for regex in subscribed:
            resolved = group.resolved_regexes.get(regex)
            if resolved is not None and now - resolved[0] < REGEX_REFRESH:
                continue
            names = self.matches(regex)
            group.resolved_regexes[regex] = (now, names)
            changed = changed or resolved is None or resolved[1] != names
        if not changed:
            return False
        metadata = self.subscription_metadata(group)
        new_regex = any(now == at for at, _ in group.resolved_regexes.values())
        if metadata == group.subscription_metadata and not new_regex:
            return False
        group.subscription_metadata = metadata
        group.group_epoch += 1
        log.info("group %r: group epoch bumped to %d (regex subscriptions resolved)",
                 group.group_id, group.group_epoch)  # fmt: skip
        return True

    def subscription_metadata(
        self,
        group: ConsumerGroup,
        replacing: ConsumerGroupMember | None = None,
        by: ConsumerGroupMember | None = None,
    ) -> dict[str, SubscribedTopic]:
        """Kafka's subscription metadata: the subscribed topics that exist, with ``replacing``
        swapped for ``by`` (a heartbeat's member before and after)."""
        names, regexes = group.subscriptions(replacing, by)
        for regex in regexes:
            if regex in group.resolved_regexes:
                names |= group.resolved_regexes[regex][1]
        return self.topics.topics(names)

    def compute(self, group: ConsumerGroup) -> None:
        """A new target for every member at the group epoch (Kafka's ``TargetAssignmentBuilder``)."""
        name = group.preferred_assignor(group.members.values()) or self.default_assignor
        assignor = self.assignors[name]
        metadata = group.subscription_metadata
        ids = {name: topic.topic_id for name, topic in metadata.items()}
        order = java_hash_map_order(group.members)
        specs = {}
        for member_id in order:
            member = group.members[member_id]
            specs[member_id] = MemberSpec(
                subscribed_topic_ids=[
                    ids[t]
                    for t in java_hash_set_order(self.member_topics(group, member))
                    if t in ids
                ],
                rack=member.rack_id,
                instance_id=member.instance_id,
                assignment={
                    t: sorted(ps) for t, ps in group.target.get(member_id, {}).items()
                    if t in {topic.topic_id for topic in metadata.values()}
                },
            )  # fmt: skip
        describer = TopicDescriber(
            TopicDescription(
                topic.topic_id, topic.name, topic.partitions,
                self.topics.partition_racks(topic.name) if self._racks_matter(group) else None,
            )
            for topic in metadata.values()
        )  # fmt: skip
        try:
            result = assignor.assign(GroupSpec(specs), describer)
        except PartitionAssignorError as exc:
            log.error("group %r: target assignment failed: %s", group.group_id, exc)
            raise HeartbeatError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Failed to compute a new target assignment for epoch {group.group_epoch}: {exc}",
            ) from None
        target: dict[str, Assignment] = {
            m: assignment(result.members[m].as_sets()) if m in result else {} for m in group.members
        }
        group.dirty_members.update(m for m, a in target.items() if group.target.get(m) != a)
        group.target = target
        group.assignment_epoch = group.group_epoch
        group.assignor_name = name
        log.info("group %r: target assignment for epoch %d computed with %r", group.group_id,
                 group.group_epoch, name)  # fmt: skip

    @staticmethod
    def _racks_matter(group: ConsumerGroup) -> bool:
        return any(m.rack_id is not None for m in group.members.values())
