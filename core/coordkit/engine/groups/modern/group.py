"""A consumer group of the KIP-848 protocol (Kafka's ``ConsumerGroup``): its epochs, members,
target assignment and which member owns each partition now.

Three epochs move it: the *group epoch* is bumped when the members or what they subscribe to change;
the *assignment epoch* is the group epoch the target assignment was computed at; each *member
epoch* reaches the assignment epoch as the member reconciles. The group is Stable when every
member is stable at the assignment epoch.
"""

from __future__ import annotations

import enum
import threading
import uuid
from collections import Counter
from collections.abc import Iterable

from attrs import frozen

from coordkit.engine.groups.modern.java_order import java_hash_map_order
from coordkit.engine.groups.modern.member import (
    Assignment,
    ConsumerGroupMember,
)


class ConsumerGroupState(enum.Enum):
    """Kafka's ``ConsumerGroup.ConsumerGroupState``, named as the wire names them."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


#: Kafka's ``GroupType`` name of these groups, as ListGroups v5 reports it.
CONSUMER_GROUP_TYPE = "consumer"


@frozen
class SubscribedTopic:
    """A subscribed topic as the group's metadata saw it: its id and partition count."""

    name: str
    topic_id: uuid.UUID
    partitions: int


class ConsumerGroup:
    """A consumer group hosted by this coordinator; read and changed under :attr:`lock`."""

    def __init__(self, group_id: str, partition: int):
        self.group_id = group_id
        #: The ``__consumer_offsets`` partition the group belongs to.
        self.partition = partition
        self.lock = threading.RLock()
        self.dead = False
        # Kafka 4.4's new groups start at epoch 1 (so the first member's join makes it 2); the
        # target assignment is at 0 until the first one is computed.
        self.group_epoch = 1
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        #: How many members subscribe to each topic name, and to each regex (Kafka's
        #: ``subscribedTopicNames``): kept as members change, so a heartbeat needs no pass over
        #: every member.
        self._names: Counter[str] = Counter()
        self._regexes: Counter[str] = Counter()
        #: regex -> (when resolved, the topics it matched): resolved apart from the heartbeat
        #: that brought it (Kafka resolves regexes in the background), refreshed now and then.
        self.resolved_regexes: dict[str, tuple[float, frozenset[str]]] = {}
        #: instance id -> member id of the static members.
        self.static_members: dict[str, str] = {}
        #: member id -> its target assignment at :attr:`assignment_epoch`.
        self.target: dict[str, Assignment] = {}
        #: The subscribed topics, as of the last group epoch bump (Kafka's subscription metadata).
        self.subscription_metadata: dict[str, SubscribedTopic] = {}
        #: (topic id, partition) -> epoch of the member that owns it now.
        self._partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        #: member id -> (topic id, partition) -> the member epoch it holds the partition since.
        self._assignment_epochs: dict[str, dict[tuple[uuid.UUID, int], int]] = {}
        #: member id -> monotonic deadlines (session; revocation, with the epoch it is for).
        self.session_deadlines: dict[str, float] = {}
        self.rebalance_deadlines: dict[str, tuple[float, int]] = {}
        #: The server assignor of the last target computed, and when (monotonic seconds).
        self.assignor_name: str = ""
        self.assignment_computed_at = float("-inf")
        #: What changed since the group was last persisted (see :mod:`.persistence`).
        self.dirty_members: set[str] = set()
        self.removed_members: set[str] = set()
        #: The member ids that have a node, and whether the group's own node exists.
        self.persisted_members: set[str] = set()
        self.persisted_header: bytes | None = None
        self.persisted_key: tuple[object, ...] | None = None
        self.members_node = False

    # -- the state -------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if not member.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    # -- members ---------------------------------------------------------------------------------

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Put ``member`` in (replacing the one with its id), keeping the owners index."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
            self._count(old, -1)
        self._count(member, 1)
        self._track_assignment_epochs(old, member)
        self.members[member.member_id] = member
        self.dirty_members.add(member.member_id)
        self.removed_members.discard(member.member_id)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._hold(member)

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        """Take the member out with its target (its partitions become free)."""
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        self.dirty_members.discard(member_id)
        self.removed_members.add(member_id)
        self.session_deadlines.pop(member_id, None)
        self.rebalance_deadlines.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        self._count(member, -1)
        self._assignment_epochs.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == (
            member_id
        ):
            del self.static_members[member.instance_id]
        return member

    def _track_assignment_epochs(
        self, old: ConsumerGroupMember | None, new: ConsumerGroupMember
    ) -> None:
        """Each partition a member holds keeps the member epoch it was first given at (Kafka's
        partition assignment epochs, which an OffsetCommit at an older epoch is checked with)."""
        before = self._assignment_epochs.get(new.member_id, {})
        after: dict[tuple[uuid.UUID, int], int] = {}
        for topic_id, partitions in new.owned().items():
            for p in partitions:
                after[(topic_id, p)] = before.get((topic_id, p), new.member_epoch)
        if after:
            self._assignment_epochs[new.member_id] = after
        else:
            self._assignment_epochs.pop(new.member_id, None)

    def assignment_epoch_of(
        self, member_id: str, topic_id: uuid.UUID, partition: int
    ) -> int | None:
        """The epoch ``member_id`` holds the partition since, ``None`` when it does not hold it."""
        return self._assignment_epochs.get(member_id, {}).get((topic_id, partition))

    def _count(self, member: ConsumerGroupMember, sign: int) -> None:
        for name in member.subscribed_topic_names:
            self._names[name] += sign
            if not self._names[name]:
                del self._names[name]
        regex = member.subscribed_topic_regex
        if regex is not None:
            self._regexes[regex] += sign
            if not self._regexes[regex]:
                del self._regexes[regex]

    def subscribed_regexes(self) -> set[str]:
        return set(self._regexes)

    def subscriptions(
        self,
        replacing: ConsumerGroupMember | None = None,
        by: ConsumerGroupMember | None = None,
    ) -> tuple[set[str], set[str]]:
        """The topic names and regexes some member subscribes to, with ``replacing`` (a member of
        the group) swapped for ``by``."""
        names, regexes = set(self._names), set(self._regexes)
        if replacing is not None and replacing.member_id in self.members:
            for name in replacing.subscribed_topic_names:
                if self._names[name] == 1:
                    names.discard(name)
            regex = replacing.subscribed_topic_regex
            if regex is not None and self._regexes[regex] == 1:
                regexes.discard(regex)
        if by is not None:
            names.update(by.subscribed_topic_names)
            if by.subscribed_topic_regex is not None:
                regexes.add(by.subscribed_topic_regex)
        return names, regexes

    def _hold(self, member: ConsumerGroupMember) -> None:
        epoch = member.member_epoch
        for owned in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in owned.items():
                for p in partitions:
                    holder = self._partition_epochs.get((topic_id, p))
                    if holder is not None:
                        # Kafka's coordinator throws here: the invariant the protocol keeps.
                        raise AssertionError(
                            f"group {self.group_id!r}: partition {topic_id}-{p} is owned "
                            f"at epoch {holder}; {member.member_id} cannot take it"
                        )
                    self._partition_epochs[(topic_id, p)] = epoch

    def _release(self, member: ConsumerGroupMember) -> None:
        for owned in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in owned.items():
                for p in partitions:
                    self._partition_epochs.pop((topic_id, p), None)

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """Kafka's ``currentPartitionEpoch``: the owner's epoch, -1 when nobody owns it."""
        return self._partition_epochs.get((topic_id, partition), -1)

    def preferred_assignor(self, members: Iterable[ConsumerGroupMember]) -> str | None:
        """Kafka's ``computePreferredServerAssignor``: the assignor most members name."""
        counts: dict[str, int] = {}
        for member in members:
            if member.server_assignor is not None:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if not counts:
            return None
        best: str | None = None
        for name in java_hash_map_order(counts):
            if best is None or counts[name] > counts[best]:
                best = name
        return best

    def __repr__(self) -> str:
        return (
            f"<ConsumerGroup {self.group_id!r} {self.state.value} epoch={self.group_epoch} "
            f"assignment_epoch={self.assignment_epoch} members={len(self.members)}>"
        )
