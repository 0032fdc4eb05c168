"""Preferred-replica elections and the automatic leader rebalance.

A preferred election moves leadership back to each partition's first assigned replica when it is
live and in the ISR, reading the states afresh first (the preferred replica may have just
rejoined), as Kafka does. The automatic rebalance (``auto.leader.rebalance.enable``) runs every
``leader.imbalance.check.interval.seconds``: per preferred broker, the share of partitions it
should lead but does not; above ``leader.imbalance.per.broker.percentage`` its partitions get a
preferred election.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from coordkit.engine.config import EngineConfig
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.partition_state import PartitionStateMachine, Plan
from coordkit.engine.fencing import FencedWriter
from coordkit.engine.states import TP
from coordkit.engine.strategies import Strategies
from coordkit.errors import BadVersionError, LayoutError, NoNodeError
from coordkit.kafka.layout import PREFERRED_REPLICA_ELECTION, decode_preferred_election
from coordkit.store import Delete
from coordkit.strategies.elections import PartitionElectionInput

log = logging.getLogger("coordkit.engine.controller")


class PreferredLeaders:
    def __init__(
        self,
        context: ControllerContext,
        partitions: PartitionStateMachine,
        writer: FencedWriter,
        *,
        config: EngineConfig,
        broker_id: int,
        strategies: Strategies,
    ):
        self.context = context
        self.partitions = partitions
        self.writer = writer
        self.config = config
        self.broker_id = broker_id
        self._election = strategies.partition_election(config.preferred_election)

    def elect(self, partitions: Sequence[TP] | None) -> list[TP]:
        """A preferred election for ``partitions`` (all by default); returns those whose leader
        moved."""
        chosen = list(self.context.parts) if partitions is None else list(partitions)
        tps = [tp for tp in chosen if self.context.actionable(tp)]
        self.context.refresh_states(tps)
        live = self.context.live_ids()
        changes = self.partitions.persist(self._plan(tp, live) for tp in tps)
        return [c.tp for c in changes if c.leader_changed]

    def process_request(self) -> list[TP]:
        """Serve ``/admin/preferred_replica_election`` (Kafka's JSON, the partitions listed):
        elect their preferred replicas, then delete the node. An unreadable request is left
        alone (and reported)."""
        try:
            data, stat = self.context.store.get(PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return []
        try:
            listed = decode_preferred_election(data)
        except LayoutError as exc:
            self.context.unreadable.record(PREFERRED_REPLICA_ELECTION, exc.detail)
            return []
        self.context.unreadable.clear(PREFERRED_REPLICA_ELECTION)
        known = [tp for tp in listed if tp in self.context.parts]
        moved = self.elect(known)
        log.info(
            "controller %s: preferred replica election for %d partitions (%d moved)",
            self.broker_id,
            len(known),
            len(moved),
        )
        try:
            self.writer.commit([Delete(PREFERRED_REPLICA_ELECTION, stat.version)])
        except (BadVersionError, NoNodeError):
            pass  # rewritten meanwhile: the next pass serves the new request
        return moved

    def _plan(self, tp: TP, live: frozenset[int]) -> Plan | None:
        part = self.context.parts.get(tp)
        if part is None or part.state is None or part.state.leader == part.replicas[0]:
            return None
        state = part.state
        result = self._election.elect(PartitionElectionInput(part.replicas, state.isr, live))
        if result is None:
            return None
        return Plan(tp, result.leader, result.isr, result.reason, lambda t: self._plan(t, live))

    def imbalance(self) -> dict[int, float]:
        """Per preferred broker: partitions it should lead but does not / partitions it should
        lead (Kafka's leader imbalance ratio)."""
        total: dict[int, int] = {}
        off: dict[int, int] = {}
        for tp, replicas, state in self.context.parts.states():
            if not replicas or not self.context.actionable(tp):
                continue
            preferred = replicas[0]
            total[preferred] = total.get(preferred, 0) + 1
            if state is not None and state.leader != preferred:
                off[preferred] = off.get(preferred, 0) + 1
        return {b: off.get(b, 0) / n for b, n in total.items()}

    def rebalance(self) -> list[TP]:
        """Kafka's checkAndTriggerAutoLeaderRebalance."""
        live = self.context.live_ids()
        threshold = self.config.leader_imbalance_per_broker_percentage / 100
        over = {b for b, ratio in self.imbalance().items() if ratio > threshold and b in live}
        if not over:
            return []
        candidates = [
            tp
            for tp, replicas, state in self.context.parts.states()
            if replicas[0] in over
            and state is not None
            and state.leader != replicas[0]
            and self.context.actionable(tp)
        ]
        log.info(
            "controller %s: leader imbalance above %.0f%% on brokers %s; preferred election for %d "
            "partitions",
            self.broker_id,
            threshold * 100,
            sorted(over),
            len(candidates),
        )
        return self.elect(candidates)
