"""A member of a consumer group (KIP-848), as Kafka's ``ConsumerGroupMember`` holds it.

A member is a value: every heartbeat that changes it builds a new one (``attrs.evolve``), so the
coordinator can compare the member before and after a request (did the subscription change? the
assignment?) as Kafka's coordinator does.
"""

from __future__ import annotations

import base64
import enum
import uuid
from collections.abc import Iterable, Mapping

from attrs import field, frozen

#: A member epoch of 0 joins; -1 leaves; -2 is a static member leaving for a while.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

#: Partitions by topic id: what a member is assigned, or must give back.
Assignment = Mapping[uuid.UUID, frozenset[int]]


def assignment(value: Mapping[uuid.UUID, Iterable[int]] | None) -> dict[uuid.UUID, frozenset[int]]:
    """``value`` as an :data:`Assignment`: topics without partitions dropped."""
    if not value:
        return {}
    return {t: frozenset(ps) for t, ps in value.items() if ps}


class MemberState(enum.Enum):
    """Kafka's ``MemberState``: where the member is in reconciling towards its target."""

    #: The member owns exactly its assigned partitions at its epoch.
    STABLE = "stable"
    #: The member must give partitions back (acknowledge their revocation) before it can move on.
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    #: The member is at the target epoch, but some of its target partitions are still owned by
    #: other members, which must revoke them first.
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"


def _names(value: Iterable[str] | None) -> tuple[str, ...]:
    return tuple(sorted(set(value or ())))


@frozen
class ConsumerGroupMember:
    """One consumer-protocol member (Kafka's ``ConsumerGroupMember``).

    :param rebalance_timeout: seconds the member may take to revoke partitions (the client's
        ``max.poll.interval.ms``); past it, the member is fenced.
    :param subscribed_topic_names: sorted, as Kafka keeps them (a set).
    :param assigned_partitions: what the member owns now (at :attr:`member_epoch`).
    :param partitions_pending_revocation: what it still owns but must give back.
    """

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout: float = 300.0
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = field(default=(), converter=_names)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(factory=dict, converter=assignment)
    partitions_pending_revocation: Assignment = field(factory=dict, converter=assignment)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        """Kafka's ``isReconciledTo``: stable at the target epoch."""
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def owned(self) -> dict[uuid.UUID, frozenset[int]]:
        """Every partition the member still holds: assigned and pending revocation."""
        out = dict(self.assigned_partitions)
        for topic_id, partitions in self.partitions_pending_revocation.items():
            out[topic_id] = out.get(topic_id, frozenset()) | partitions
        return out


def new_member_id() -> str:
    """A member id as Kafka's coordinator makes one (``Uuid.randomUuid().toString()``: 16 random
    bytes, URL-safe base64 without padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
