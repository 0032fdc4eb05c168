"""Kafka's ``ShareGroup`` and ``ShareGroupMember`` (``coordinator.group.modern.share``): a share
group's epochs, members, target assignment and the subscribed topics it was computed from.

A share group has no revocation step: a member's assignment is its target as soon as it
heartbeats at a newer assignment epoch (Kafka's ``ShareGroupAssignmentBuilder``), and a partition
may be held by several members at once (records, not partitions, are leased one at a time).
"""

from __future__ import annotations

import enum
import threading
import uuid
from collections.abc import Iterable, Mapping

import attrs

from coordkit.engine.groups.modern.group import SubscribedTopic

__all__ = [
    "SHARE_GROUP_TYPE",
    "SHARE_PROTOCOL_TYPE",
    "Assignment",
    "ShareGroup",
    "ShareGroupMember",
    "ShareGroupState",
]

#: ListGroups' group type and protocol type of a share group (Kafka's ``Group.GroupType.SHARE``).
SHARE_GROUP_TYPE = "share"
SHARE_PROTOCOL_TYPE = "share"

#: topic id -> partitions (sorted).
Assignment = Mapping[uuid.UUID, tuple[int, ...]]


def assignment(value: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, tuple[int, ...]]:
    """``value`` with sorted partition tuples and no empty topics."""
    return {t: tuple(sorted(set(ps))) for t, ps in value.items() if ps}


class ShareGroupState(enum.Enum):
    """Kafka's ``ShareGroup.ShareGroupState``: what ListGroups and ShareGroupDescribe show."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@attrs.frozen
class ShareGroupMember:
    """One member, as the coordinator stores it (Kafka's ``ShareGroupMember``).

    :param member_id: chosen by the client (a UUID string), kept for the consumer's lifetime.
    :param previous_member_epoch: a heartbeat at this epoch is still accepted (its answer at the
        newer epoch may have been lost).
    :param assigned: what the member holds: its target at :attr:`member_epoch`.
    """

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Mapping[uuid.UUID, tuple[int, ...]] = attrs.field(factory=dict, converter=assignment)


class ShareGroup:
    """A share group hosted by this coordinator; read and changed under :attr:`lock`."""

    def __init__(self, group_id: str, partition: int):
        self.group_id = group_id
        self.partition = partition
        self.lock = threading.RLock()
        #: The coordinator let the group go (its offsets partition moved): requests on it are
        #: answered NOT_COORDINATOR and load it anew.
        self.dead = False
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.assignor_name = ""
        self.members: dict[str, ShareGroupMember] = {}
        #: member id -> its target at :attr:`assignment_epoch`.
        self.target: dict[str, dict[uuid.UUID, tuple[int, ...]]] = {}
        #: The subscribed topics that exist, by name: the target was computed from these.
        self.subscription_metadata: dict[str, SubscribedTopic] = {}
        #: member id -> monotonic time its session ends (not stored: renewed on load).
        self.session_deadlines: dict[str, float] = {}
        #: The bytes last written for the group (``None``: never stored).
        self.persisted: bytes | None = None

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(
        self, replacing: str | None = None, by: ShareGroupMember | None = None
    ) -> set[str]:
        """Every member's subscribed topic names, member ``replacing`` swapped for ``by``."""
        names = {
            t for m in self.members.values() if m.member_id != replacing
            for t in m.subscribed_topic_names
        }  # fmt: skip
        if by is not None:
            names.update(by.subscribed_topic_names)
        return names

    def remove_member(self, member_id: str) -> ShareGroupMember | None:
        self.session_deadlines.pop(member_id, None)
        self.target.pop(member_id, None)
        return self.members.pop(member_id, None)
