"""History checks: what reached the store, audited for split brain.

A :class:`HistoryRecorder` observes the commits of broker sessions (through
:class:`~coordkit.engine.instrument.InstrumentedStore`) and records every controller election (a
multi setting ``/controller_epoch``) and every partition state written, with the writer and
whether the multi was fenced by the epoch check. Only committed multis are seen, so the record is
what the store accepted, not what a controller believed. :meth:`HistoryRecorder.violations` then
checks:

* no controller epoch was won twice;
* no two brokers wrote controller-fenced partition states carrying the same controller epoch, and
  each such write came from the broker that won that epoch;
* no partition ever had two different leaders with the same leader epoch (a topic deleted and
  created again starts a new generation of its partitions).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import attrs

from coordkit import layout
from coordkit.engine import states
from coordkit.engine.instrument import InstrumentedStore
from coordkit.engine.states import TP
from coordkit.errors import LayoutError
from coordkit.model import NO_LEADER
from coordkit.store import Check, Create, Delete, Op, SetData


@attrs.frozen
class ControllerElectionRecord:
    epoch: int
    broker_id: int
    sequence: int


@attrs.frozen
class StateWriteRecord:
    tp: TP
    generation: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    writer: int
    fenced: bool
    sequence: int


class HistoryRecorder:
    """Records elections and state writes from the sessions it observes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sequence = 0
        self._generation: dict[TP, int] = {}
        self.elections: list[ControllerElectionRecord] = []
        self.writes: list[StateWriteRecord] = []

    def observe(self, store: InstrumentedStore, broker_id: int) -> None:
        """Record the commits of ``store``, a session of broker ``broker_id``."""

        def on_commit(ops: Sequence[Op], results: Sequence[Any]) -> None:
            self._record(broker_id, ops)

        store.add_commit_observer(on_commit)

    def _record(self, writer: int, ops: Sequence[Op]) -> None:
        fenced = bool(ops) and isinstance(ops[0], Check) and ops[0].path == layout.CONTROLLER_EPOCH
        with self._lock:
            for op in ops:
                self._sequence += 1
                if isinstance(op, SetData) and op.path == layout.CONTROLLER_EPOCH:
                    epoch = int(op.data.decode().strip())
                    self.elections.append(ControllerElectionRecord(epoch, writer, self._sequence))
                    continue
                if isinstance(op, Delete):
                    tp = states.parse_state_path(op.path)
                    if tp is not None:
                        self._generation[tp] = self._generation.get(tp, 0) + 1
                    continue
                if not isinstance(op, Create | SetData):
                    continue
                tp = states.parse_state_path(op.path)
                if tp is None:
                    continue
                try:
                    state = states.decode_state(op.path, op.data, -1)
                except LayoutError:
                    continue
                self.writes.append(
                    StateWriteRecord(
                        tp=tp,
                        generation=self._generation.get(tp, 0),
                        leader=state.leader,
                        leader_epoch=state.leader_epoch,
                        isr=state.isr,
                        controller_epoch=state.controller_epoch,
                        writer=writer,
                        fenced=fenced,
                        sequence=self._sequence,
                    )
                )

    # -- checks --------------------------------------------------------------------------------

    def violations(self) -> list[str]:
        """Every split-brain symptom found (empty when the history is sound)."""
        with self._lock:
            elections = list(self.elections)
            writes = list(self.writes)
        problems: list[str] = []
        winners: dict[int, set[int]] = {}
        for record in elections:
            winners.setdefault(record.epoch, set()).add(record.broker_id)
        for epoch, brokers in sorted(winners.items()):
            count = sum(1 for r in elections if r.epoch == epoch)
            if count > 1:
                problems.append(
                    f"controller epoch {epoch} was won {count} times (brokers {sorted(brokers)})"
                )
        writers: dict[int, set[int]] = {}
        for write in writes:
            if write.fenced:
                writers.setdefault(write.controller_epoch, set()).add(write.writer)
        for epoch, brokers in sorted(writers.items()):
            if len(brokers) > 1:
                problems.append(
                    f"controllers {sorted(brokers)} all wrote partition states in epoch {epoch}"
                )
            won = winners.get(epoch)
            if won is not None and not brokers <= won:
                problems.append(
                    f"epoch {epoch} was won by broker(s) {sorted(won)} but written by "
                    f"{sorted(brokers - won)}"
                )
        leaders: dict[tuple[TP, int, int], set[int]] = {}
        for write in writes:
            if write.leader != NO_LEADER:
                key = (write.tp, write.generation, write.leader_epoch)
                leaders.setdefault(key, set()).add(write.leader)
        for (tp, generation, leader_epoch), brokers in sorted(leaders.items()):
            if len(brokers) > 1:
                problems.append(
                    f"partition {tp[0]}-{tp[1]} (generation {generation}) had leaders "
                    f"{sorted(brokers)} with the same leader epoch {leader_epoch}"
                )
        return problems

    def epochs(self) -> list[int]:
        """Controller epochs won, in the order recorded."""
        with self._lock:
            return [r.epoch for r in sorted(self.elections, key=lambda r: r.sequence)]

    def leader_changes(self) -> int:
        """Partition state writes that changed a partition's leader (or created it)."""
        last: dict[tuple[TP, int], int] = {}
        changes = 0
        with self._lock:
            writes = sorted(self.writes, key=lambda w: w.sequence)
        for write in writes:
            key = (write.tp, write.generation)
            if last.get(key) != write.leader:
                changes += 1
            last[key] = write.leader
        return changes
