"""Unclean leader elections an admin asks for (Kafka's ElectLeaders with election type UNCLEAN,
KIP-460): a partition without a live leader gets the first live in-sync replica, else the first
live replica in assignment order, whatever the topic's ``unclean.leader.election.enable`` says
(Kafka's ``PartitionChangeBuilder`` with ``Election.UNCLEAN``). A partition with a live leader
is left alone, as is one no live replica can lead. The states are read afresh first, as the
preferred election does.
"""

from __future__ import annotations

from collections.abc import Sequence

from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.partition_state import PartitionStateMachine, Plan
from coordkit.engine.states import TP
from coordkit.engine.strategies import Strategies
from coordkit.strategies.elections import PartitionElectionInput


class UncleanElections:
    def __init__(
        self, context: ControllerContext, partitions: PartitionStateMachine, strategies: Strategies
    ) -> None:
        self.context = context
        self.partitions = partitions
        self._election = strategies.partition_election("offline-unclean")

    def elect(self, partitions: Sequence[TP]) -> list[TP]:
        """Elect ``partitions`` that have no live leader; returns those that got one."""
        tps = [tp for tp in partitions if self.context.actionable(tp)]
        self.context.refresh_states(tps)
        live = self.context.live_ids()
        changes = self.partitions.persist(self._plan(tp, live) for tp in tps)
        return [c.tp for c in changes if c.leader_changed]

    def _plan(self, tp: TP, live: frozenset[int]) -> Plan | None:
        part = self.context.parts.get(tp)
        if part is None or part.state is None or part.state.leader in live:
            return None
        state = part.state
        result = self._election.elect(PartitionElectionInput(part.replicas, state.isr, live))
        if result is None:
            return None
        return Plan(tp, result.leader, result.isr, result.reason, lambda t: self._plan(t, live))
