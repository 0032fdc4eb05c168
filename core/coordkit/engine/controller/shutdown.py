"""Controlled shutdown (Kafka's ``doControlledShutdown``): move leadership off a broker that asks.

The broker is marked shutting down (it may no longer be elected; the mark lasts until it
deregisters), leadership of every multi-replica partition it leads moves to another live ISR
member through the ``controlled-shutdown`` election, and it leaves the ISR of the partitions it
follows. The reply lists the partitions it still leads (no other replica in the ISR).
"""

from __future__ import annotations

import itertools
from typing import Protocol

from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.partition_map import PartitionInfo
from coordkit.engine.controller.partition_state import PartitionStateMachine, Plan, bulk
from coordkit.engine.errors import BrokerNotAvailableError, StaleBrokerEpochError
from coordkit.engine.states import TP
from coordkit.kafka import layout
from coordkit.strategies.elections import (
    LeaderAndIsr,
    PartitionElectionInput,
    PartitionLeaderElection,
)

#: A ControlledShutdown request's broker epoch before KIP-380 (v0-1): not checked.
UNKNOWN_BROKER_EPOCH = -1


class ControllerClient(Protocol):
    """How a broker reaches the controller when it runs in another process (Kafka's
    ControlledShutdown request), handed to the broker by whoever runs it."""

    def controlled_shutdown(
        self, controller_id: int, broker_id: int, broker_epoch: int, timeout: float
    ) -> list[TP]:
        """Ask controller ``controller_id`` to move leadership off ``broker_id``; the partitions
        it still leads.

        :raises ControllerUnavailableError: no answer, or the controller refused (moved, or a
            newer registration of the broker).
        """
        ...


class ControlledShutdown:
    def __init__(
        self,
        context: ControllerContext,
        partitions: PartitionStateMachine,
        election: PartitionLeaderElection,
    ):
        self.context = context
        self.partitions = partitions
        self._election = election

    @bulk
    def shut_down(self, broker_id: int, broker_epoch: int = UNKNOWN_BROKER_EPOCH) -> list[TP]:
        """:param broker_epoch: the czxid of the registration asking (Kafka's
        ControlledShutdown v2+); an earlier one than the live registration is refused."""
        context = self.context
        if broker_id not in context.live:
            raise BrokerNotAvailableError(
                f"controlled shutdown of broker {broker_id}: it is not registered under "
                f"{layout.BROKER_IDS}"
            )
        live_epoch = context.live[broker_id][1]
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < live_epoch:
            raise StaleBrokerEpochError(
                f"controlled shutdown of broker {broker_id}: broker epoch {broker_epoch} is "
                f"older than its registration's ({live_epoch})"
            )
        context.shutting_down.add(broker_id)
        # Only partitions whose state names the broker can change (as leader or ISR member): one
        # vectorised query over column rows, and each partition's object comes with it, so a
        # third of 2,000,000 partitions are not looked up again one by one.
        named = context.parts.naming_parts(broker_id)
        unreadable, deleting = context.unreadable_states, context.deleting
        if unreadable or deleting:  # as context.actionable (the usual case: nothing to skip)
            named = [(tp, p) for tp, p in named if tp not in unreadable and tp[0] not in deleting]
        planner = _Planner(context, self._election, broker_id, context.live_ids())
        self.partitions.persist(itertools.starmap(planner.plan_part, named))
        return sorted(context.parts.naming(broker_id, as_leader_only=True))


class _Planner:
    """One shutdown's plans. Elections are functions of their input (the election kit checks
    it), and live and shutting-down brokers are fixed for the shutdown, so an outcome is decided
    once per distinct (assignment, ISR) and reused: a cluster has few distinct ones, and a third
    of 2,000,000 partitions may be the broker's."""

    def __init__(
        self,
        context: ControllerContext,
        election: PartitionLeaderElection,
        broker_id: int,
        live: frozenset[int],
    ):
        self.context = context
        self.election = election
        self.broker_id = broker_id
        self.live = live
        self.shutting_down = frozenset(self.context.shutting_down)
        self._elected: dict[tuple[tuple[int, ...], tuple[int, ...]], LeaderAndIsr | None] = {}
        self._shrunk: dict[tuple[int, ...], tuple[int, ...]] = {}

    def plan(self, tp: TP) -> Plan | None:
        """Decide ``tp`` again from the context (after a conflict re-read it)."""
        return self.plan_part(tp, self.context.parts.get(tp))

    def plan_part(self, tp: TP, part: PartitionInfo | None) -> Plan | None:
        broker_id = self.broker_id
        if (
            part is None
            or part.state is None
            or len(part.replicas) < 2
            or broker_id not in part.replicas
        ):
            return None
        state = part.state
        if state.leader == broker_id:
            key = (part.replicas, state.isr)
            try:
                result = self._elected[key]
            except KeyError:
                result = self._elected[key] = self.election.elect(
                    PartitionElectionInput(
                        part.replicas, state.isr, self.live, shutting_down=self.shutting_down
                    )
                )
            if result is None:
                return None
            return Plan(tp, result.leader, result.isr, result.reason, self.plan, part)
        if broker_id in state.isr and len(state.isr) > 1:
            isr = self._shrunk.get(state.isr)
            if isr is None:
                isr = self._shrunk[state.isr] = tuple(r for r in state.isr if r != broker_id)
            return Plan(tp, state.leader, isr, None, self.plan, part)
        return None
