"""The share-partition assignor contract (KIP-932): the share-group coordinator's target assignment.

Mirrors Kafka 4's ``ShareGroupPartitionAssignor``: the same inputs as a KIP-848 server-side
assignor (:class:`~coordkit.strategies.target_assignment.GroupSpec`: every member's subscribed
topic ids, rack and current target, listed in the order Kafka's coordinator iterates them;
:class:`~coordkit.strategies.target_assignment.TopicDescriber`: partition counts and racks) and
the same output (:class:`~coordkit.strategies.target_assignment.TargetAssignment`), with one
difference in what a result may be: in a share group a partition may go to **several** members
(records are leased one by one, so members share a partition when there are more members than
partitions), and a current target may list a partition under several members. What the broker
config ``group.share.assignors`` names is a :class:`ShareAssignor`; the first named is the one
share groups use (Kafka 4.4 takes one).

What every share assignor promises (held by :mod:`coordkit.testing.share_assignors`): it assigns
only partitions that exist of topics the member subscribes to, gives every subscribed partition
to at least one member when some member subscribes to its topic, and is deterministic (the same
spec gives the same target). Optional class attributes declare more: ``balanced`` (default
``True``: with identical subscriptions, member counts differ by at most one) and ``sticky``
(default ``False``: a member that stays keeps what it holds when another member joins, as far as
balance allows).
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from attrs import frozen

from coordkit.strategies.target_assignment import (
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    SubscriptionType,
    TargetAssignment,
    TopicDescriber,
    TopicDescription,
)

__all__ = [
    "DEFAULT_SHARE_ASSIGNOR",
    "GroupSpec",
    "MemberSpec",
    "PartitionAssignorError",
    "ShareAssignor",
    "ShareAssignorTraits",
    "SubscriptionType",
    "TargetAssignment",
    "TopicDescriber",
    "TopicDescription",
]

#: Kafka 4.4's ``group.share.assignors`` default.
DEFAULT_SHARE_ASSIGNOR = "simple"


@runtime_checkable
class ShareAssignor(Protocol):
    """A share-partition assignor: ``group.share.assignors`` names it by :attr:`name`."""

    name: ClassVar[str]

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
        """The new target assignment for every member of ``group`` (a partition may go to
        several members).

        :raises PartitionAssignorError: a member subscribes to a topic ``topics`` does not know.
        """
        ...


@frozen
class ShareAssignorTraits:
    """What a share assignor declares beyond what every one promises."""

    balanced: bool = True
    sticky: bool = False

    @classmethod
    def of(cls, assignor: object) -> ShareAssignorTraits:
        return cls(
            balanced=bool(getattr(assignor, "balanced", True)),
            sticky=bool(getattr(assignor, "sticky", False)),
        )
