"""Kafka's ``sticky`` and ``cooperative-sticky`` assignors (work in progress)."""

from __future__ import annotations

from typing import ClassVar

from coordkit.assignment import GroupAssignment, GroupSubscription, RebalanceProtocol


class StickyAssignor:
    name: ClassVar[str] = "sticky"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        raise NotImplementedError("sticky assignor is being written")


class CooperativeStickyAssignor:
    name: ClassVar[str] = "cooperative-sticky"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        raise NotImplementedError("cooperative-sticky assignor is being written")
