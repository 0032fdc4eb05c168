"""Replicas and ISRs from the controller's side (the ISR half of Kafka's ``ReplicaStateMachine``).

* Dead brokers leave the ISRs of the partitions they do not lead (after the offline elections,
  availability first), keeping the last ISR member of a leaderless partition.
* Partition leaders change ISRs themselves (shrinking lagging followers, adding caught-up ones)
  and leave a notification under ``/isr_change_notification``; the controller re-reads the listed
  partitions, reconciles them with liveness (a replica may have joined just before its broker
  died) and deletes the notifications it consumed. A notification it cannot read is left alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordkit.engine import isr_notifications
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.partition_state import PartitionStateMachine, bulk
from coordkit.engine.events import StateChange
from coordkit.engine.fencing import FencedWriter
from coordkit.engine.states import TP
from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.store import Delete, Op


class ReplicaStateMachine:
    def __init__(
        self,
        context: ControllerContext,
        partitions: PartitionStateMachine,
        writer: FencedWriter,
        *,
        write_batch_ops: int,
    ):
        self.context = context
        self.partitions = partitions
        self.writer = writer
        self.write_batch_ops = write_batch_ops

    @bulk
    def shrink_dead(self, tps: Iterable[TP], live: frozenset[int]) -> list[StateChange]:
        """Drop brokers outside ``live`` from the ISRs of ``tps`` (leaders are elected first)."""
        parts = self.context.parts
        chosen = [
            tp
            for tp in tps
            if self.context.actionable(tp)
            and (state := parts[tp].state) is not None
            and not live.issuperset(state.isr)
        ]
        return self.partitions.persist(self.partitions.plan_liveness(tp, live) for tp in chosen)

    def consume_isr_notifications(self) -> list[TP]:
        """Refresh the partitions that leaders' notifications list; delete those notifications.

        :returns: the partitions refreshed (their states now as the leaders wrote them).
        """
        folder = isr_notifications.ISR_CHANGE_NOTIFICATION
        names = sorted(
            n for n in self.context.children(folder) if n.startswith(isr_notifications.PREFIX)
        )
        if not names:
            return []
        paths = [f"{folder}/{n}" for n in names]
        changed: set[TP] = set()
        consumed: list[str] = []
        for path, result in zip(paths, self.context.get_many(paths), strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, StoreError):
                raise result
            try:
                changed.update(isr_notifications.decode(path, result[0]))
            except LayoutError as exc:
                self.context.unreadable.record(path, exc.detail)
                continue
            consumed.append(path)
        refreshed = sorted(tp for tp in changed if tp in self.context.parts)
        self.context.refresh_states(refreshed)
        self._delete(consumed)
        return refreshed

    def _delete(self, paths: list[str]) -> None:
        for start in range(0, len(paths), self.write_batch_ops):
            commit_ignoring_missing(
                self.writer, [Delete(p) for p in paths[start : start + self.write_batch_ops]]
            )


def commit_ignoring_missing(writer: FencedWriter, ops: list[Op]) -> None:
    """Commit deletions, leaving out nodes someone else already removed."""
    remaining = list(ops)
    while remaining:
        try:
            writer.commit(remaining)
            return
        except NoNodeError as exc:
            if exc.op_index is None:
                return
            del remaining[exc.op_index]
