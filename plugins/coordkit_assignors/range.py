"""Placeholder while the real module is written."""

from __future__ import annotations

from typing import ClassVar

from coordkit.assignment import GroupAssignment, GroupSubscription, RebalanceProtocol


class RangeAssignor:
    name: ClassVar[str] = "range"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        raise NotImplementedError


class RangeCeilAssignor:
    name: ClassVar[str] = "range-ceil"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        raise NotImplementedError
