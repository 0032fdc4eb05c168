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
* no partition ever had two different leaders with the same leader epoch, and a partition's
  leader epoch never went down from one version of its state node to the next (a topic deleted and
  created again starts a new generation of its partitions).

Writes are ordered by the version of the state node the store reports for each commit (a create
is version 0), not by the order observers happen to run in: commits of several threads (the
controller's writers, the leaders' ISR updates) reach the recorder in any order. The node's
creation zxid in the same reply tells apart a partition's incarnations, so a late-observed write
of a deleted topic is never mistaken for one of the topic created again under the same name.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

import attrs

from coordkit.engine import states
from coordkit.engine.instrument import InstrumentedStore
from coordkit.engine.states import TP
from coordkit.errors import LayoutError
from coordkit.kafka import layout
from coordkit.kafka.model import NO_LEADER
from coordkit.store import Check, Create, Delete, Op, SetData, Stat


@attrs.frozen
class ControllerElectionRecord:
    epoch: int
    broker_id: int
    sequence: int


@attrs.frozen
class StateWriteRecord:
    """One committed write of a partition state node.

    :param generation: how many deletions of the node had been observed before this write.
    :param sequence: observation order (across threads, not the store's commit order).
    :param version: the node's version after the write (0 for a create); ``None`` when the commit
        result did not say.
    :param created_zxid: the node's creation zxid from the commit result (``SetData`` replies
        carry it); it names the node's incarnation exactly. ``None`` for creates.
    """

    tp: TP
    generation: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    writer: int
    fenced: bool
    sequence: int
    version: int | None = None
    created_zxid: int | None = None


#: A partition's incarnation: ``(partition, generation shown in reports, creation zxid or None)``.
IncarnationKey = tuple[TP, int, int | None]


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
            self._record(broker_id, ops, results)

        store.add_commit_observer(on_commit)

    def _record(self, writer: int, ops: Sequence[Op], results: Sequence[Any] = ()) -> None:
        fenced = bool(ops) and isinstance(ops[0], Check) and ops[0].path == layout.CONTROLLER_EPOCH
        with self._lock:
            for index, op in enumerate(ops):
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
                version: int | None = None
                created_zxid: int | None = None
                if isinstance(op, Create):
                    version = 0
                else:
                    result = results[index] if index < len(results) else None
                    if isinstance(result, Stat):
                        version = result.version
                        created_zxid = result.czxid
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
                        version=version,
                        created_zxid=created_zxid,
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
        incarnations = incarnation_keys(writes)
        leaders: dict[tuple[IncarnationKey, int], set[int]] = {}
        for write, incarnation in zip(writes, incarnations, strict=True):
            if write.leader != NO_LEADER:
                leaders.setdefault((incarnation, write.leader_epoch), set()).add(write.leader)
        for ((tp, generation, _), leader_epoch), brokers in sorted(
            leaders.items(), key=_incarnation_order
        ):
            if len(brokers) > 1:
                problems.append(
                    f"partition {tp[0]}-{tp[1]} (generation {generation}) had leaders "
                    f"{sorted(brokers)} with the same leader epoch {leader_epoch}"
                )
        problems.extend(_epoch_regressions(writes, incarnations))
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


def incarnation_keys(writes: Sequence[StateWriteRecord]) -> list[IncarnationKey]:
    """The incarnation of each write's state node (same order as ``writes``).

    Writes whose reply named the node's creation zxid are grouped by it exactly; the generation
    shown for such a group is the lowest one any of its writes was observed in (a write observed
    late, after the topic's deletion, would otherwise count as the next generation). A create
    carries no zxid: it joins the one zxid group of its observed generation, or stands alone when
    there is none or several (never merged by guess).
    """
    shown: dict[tuple[TP, int], int] = {}
    for write in writes:
        if write.created_zxid is not None:
            key = (write.tp, write.created_zxid)
            shown[key] = min(shown.get(key, write.generation), write.generation)
    zxids_by_generation: dict[tuple[TP, int], list[int]] = {}
    for (tp, zxid), generation in shown.items():
        zxids_by_generation.setdefault((tp, generation), []).append(zxid)
    keys: list[IncarnationKey] = []
    for write in writes:
        if write.created_zxid is not None:
            keys.append((write.tp, shown[(write.tp, write.created_zxid)], write.created_zxid))
            continue
        candidates = zxids_by_generation.get((write.tp, write.generation), [])
        keys.append((write.tp, write.generation, candidates[0] if len(candidates) == 1 else None))
    return keys


def _incarnation_order(item: tuple[tuple[IncarnationKey, int], set[int]]) -> tuple[Any, ...]:
    ((tp, generation, zxid), leader_epoch), _ = item
    return (tp, generation, -1 if zxid is None else zxid, leader_epoch)


def _epoch_regressions(
    writes: Sequence[StateWriteRecord], incarnations: Sequence[IncarnationKey]
) -> list[str]:
    """Leader epochs that went down from one version of a state node to the next, and versions
    committed twice (a store must never accept two writes at one version of one node)."""
    by_node: dict[IncarnationKey, list[StateWriteRecord]] = {}
    for write, incarnation in zip(writes, incarnations, strict=True):
        if write.version is not None:
            by_node.setdefault(incarnation, []).append(write)
    problems: list[str] = []
    for (tp, generation, zxid), node_writes in sorted(
        by_node.items(), key=lambda item: (item[0][0], item[0][1], item[0][2] or -1)
    ):
        node_writes.sort(key=lambda w: (w.version or 0, w.sequence))
        name = f"partition {tp[0]}-{tp[1]} (generation {generation})"
        for before, after in itertools.pairwise(node_writes):
            if after.version == before.version and zxid is not None:
                problems.append(
                    f"{name}: version {after.version} of its state node was committed twice "
                    f"(by brokers {before.writer} and {after.writer})"
                )
            elif after.leader_epoch < before.leader_epoch:
                problems.append(
                    f"{name}: leader epoch went back from {before.leader_epoch} to "
                    f"{after.leader_epoch} (state versions {before.version} -> {after.version}, "
                    f"written by brokers {before.writer} -> {after.writer})"
                )
    return problems
