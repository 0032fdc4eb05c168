"""Replication of record batches between the brokers of one ``coordkit serve`` process.

Every broker of a partition's replica set keeps its own log (:mod:`coordkit.serve.dataplane.log`). Each
broker runs a follower fetch loop (Kafka's ``ReplicaFetcherThread``, here an asyncio task on the
process's event loop, copying in memory): for every partition it follows, it first truncates its
log where it diverges from the current leader's (by leader epoch, once per leader epoch), then
copies the batches it lacks as they are. The loop wakes at every leader append and otherwise
every ``replica.fetch.wait.max.ms``.

The engine's :class:`~coordkit.engine.replication.ReplicationModel` stays the one place that
decides the high watermark and the ISR: leaders and followers report their real log ends to it
(:meth:`ReplicationModel.report_log_ends`, with ``external_fetch`` on, so the engine's own
fetchers move nothing), the high watermark is the smallest log end over the ISR (Kafka's rule,
counting members being added), and the engine's replica fetchers keep shrinking the ISR of a
follower whose broker has not fetched for ``replica.lag.time.max.ms`` and expanding it when a
follower caught up, written through the store as Kafka's AlterPartition. A broker that stops
leaves the ISR through the controller, as in the engine.

Consumers read only below the high watermark and ListOffsets' latest is the high watermark
(read_committed = read_uncommitted here: no transactions, so the last stable offset is the high
watermark). A produce with acks=all is answered once the high watermark passed its records.

A partition's replicas on brokers of other ``coordkit serve`` processes copy from its leader
over Kafka's protocol (:mod:`coordkit.serve.dataplane.remote_replicas`); their fetches report their log
ends here (:meth:`Replicas.follower_fetched`), so they count for the high watermark and the ISR
as the followers of this process do.

Limits: records live in memory unless the server has a data directory (then a whole server
that starts again loads its logs, and its leaders report their log ends at their first full
round, so that the high watermark moves from there); a broker stopped in-process does not come
back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence

from coordkit.engine.config import EngineConfig
from coordkit.engine.replication import ReplicationModel
from coordkit.engine.states import TP
from coordkit.kafka.model import NO_LEADER
from coordkit.protocol.errors import ProtocolError
from coordkit.serve import errors
from coordkit.serve.dataplane.broker_logs import LocalBroker
from coordkit.serve.dataplane.log import PartitionLog

log = logging.getLogger("coordkit.serve")

#: Bytes a follower copies per partition and round (Kafka's ``replica.fetch.max.bytes``).
REPLICA_FETCH_MAX_BYTES = 1024 * 1024
#: How often a waiting acks=all produce re-reads the high watermark, which also moves when the
#: ISR shrinks (the engine's threads do that, without waking the event loop).
_HW_RECHECK_SECONDS = 0.05


class Replicas:
    """The replica logs of every broker in ``contexts``, kept in step through ``model``."""

    def __init__(
        self,
        model: ReplicationModel,
        contexts: Sequence[LocalBroker],
        config: EngineConfig | None = None,
    ) -> None:
        self.model = model
        model.external_fetch = True
        self.contexts = {ctx.broker_id: ctx for ctx in contexts}
        for ctx in contexts:
            ctx.logs.replicas = self
        self.fetch_wait = (config or EngineConfig()).replica_fetch_wait_max
        self._paused: set[int] = set()
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._wake: asyncio.Event | None = None
        # (follower, partition) → the leader epoch it last truncated for.
        self._checked_epoch: dict[tuple[int, TP], int] = {}
        # (follower, partition) → the log end last reported to the model; all are reported
        # again every ``fetch_wait`` (cheap, and it heals anything the model changed meanwhile).
        self._reported: dict[tuple[int, TP], int] = {}
        self._full_report_at: dict[int, float] = {}
        # Per follower: partitions whose leader appended since its last round (so that a round
        # costs what was appended, not the number of partitions; a full round every
        # ``fetch_wait`` visits every partition, for leader changes and liveness).
        self._pending: dict[int, set[TP]] = {broker_id: set() for broker_id in self.contexts}

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start every broker's follower loop (on the running event loop)."""
        self._wake = asyncio.Event()
        for broker_id in self.contexts:
            self._tasks[broker_id] = asyncio.create_task(
                self._follow(broker_id), name=f"coordkit-serve-follower-{broker_id}"
            )

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()

    def pause(self, broker_id: int) -> None:
        """Stop broker ``broker_id`` fetching (a stuck follower), without stopping the broker."""
        self._paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        self._paused.discard(broker_id)
        self._notify()

    # -- leaders --------------------------------------------------------------------------------

    def appended(self, ctx: LocalBroker, tp: TP, partition_log: PartitionLog, count: int) -> None:
        """Leader ``ctx`` appended ``count`` records to ``tp``: tell the model, wake followers
        (those of other processes are waiting in a fetch, on the broker's logs)."""
        state = self.model.log(tp)
        for replica in () if state is None else state.replicas:
            pending = self._pending.get(replica)
            if replica != ctx.broker_id and pending is not None:
                pending.add(tp)
        moved = self.model.report_log_ends(
            ctx.broker_id, {tp: partition_log.log_end}, fetched=False, appended=count
        )
        if moved:
            ctx.logs.appended()
        self._notify()

    def follower_fetched(self, ctx: LocalBroker, follower: int, tp: TP, offset: int) -> None:
        """Broker ``follower`` of another process fetched ``tp`` from leader ``ctx`` at
        ``offset``: its log ends there (Kafka's follower fetch state), which may move the high
        watermark."""
        if self.model.report_log_ends(follower, {tp: offset}, fetched=True):
            ctx.logs.appended()  # wakes consumers and acks=all waits

    def high_watermark(self, tp: TP, partition_log: PartitionLog) -> int:
        """The leader's high watermark of ``tp`` (never past its own log end)."""
        state = self.model.log(tp)
        hw = 0 if state is None else state.hw
        return min(hw, partition_log.log_end)

    async def wait_committed(self, ctx: LocalBroker, tp: TP, offset: int, timeout: float) -> int:
        """Wait until ``tp``'s high watermark reaches ``offset`` (acks=all): ``NONE``,
        ``NOT_LEADER_OR_FOLLOWER`` (the leadership moved meanwhile) or ``REQUEST_TIMED_OUT``;
        or, as Kafka's ``Partition.checkEnoughReplicasReachOffset``, ``NOT_ENOUGH_REPLICAS_AFTER_
        APPEND`` when the high watermark reached it but the maximal ISR is by then smaller than
        ``min.insync.replicas`` (the high watermark does not move under it: only an ISR that
        shrank between the two is seen so)."""
        deadline = time.monotonic() + timeout
        while True:
            changed = ctx.logs.changed()
            state = self.model.log(tp)
            if state is None or state.leader != ctx.broker_id:
                return errors.NOT_LEADER_OR_FOLLOWER
            if state.hw >= offset:
                if len({*state.isr, *state.adding}) < state.effective_min_isr():
                    return errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                return errors.NONE
            left = deadline - time.monotonic()
            if left <= 0:
                return errors.REQUEST_TIMED_OUT
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), min(left, _HW_RECHECK_SECONDS))

    def _notify(self) -> None:
        wake = self._wake
        if wake is not None:
            self._wake = asyncio.Event()
            wake.set()

    # -- followers ------------------------------------------------------------------------------

    async def _follow(self, broker_id: int) -> None:
        ctx = self.contexts[broker_id]
        while ctx.broker.alive:
            wake = self._wake
            copied = False
            if broker_id not in self._paused:
                try:
                    copied = self.fetch_round(broker_id)
                except Exception:
                    log.exception("broker %s: replica fetch round failed", broker_id)
            if copied:
                await asyncio.sleep(0)  # let others run; fetch again at once
                continue
            if wake is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), self.fetch_wait)
            else:
                await asyncio.sleep(self.fetch_wait)

    def fetch_round(self, broker_id: int) -> bool:
        """One fetch round of broker ``broker_id``: truncate where needed, copy what its leaders
        have, report its log ends. Returns whether it copied anything."""
        ctx = self.contexts[broker_id]
        if not ctx.broker.alive:
            return False
        ends: dict[TP, int] = {}
        copied = False
        now = time.monotonic()
        full = now >= self._full_report_at.get(broker_id, 0.0)
        pending = self._pending[broker_id]
        if full:
            self._full_report_at[broker_id] = now + self.fetch_wait
            pending.clear()
            chosen = self.model.partitions()
        else:
            chosen = [(tp, state) for tp in pending if (state := self.model.log(tp)) is not None]
            pending.clear()
        for tp, state in chosen:
            leader = state.leader
            if leader == broker_id:
                # A leader reports its log end at each append; a log loaded from disk has had
                # none yet, so full rounds report it too (the high watermark moves from there).
                own_log = ctx.logs.find(tp) if full else None
                if own_log is not None and self._reported.get((broker_id, tp)) != own_log.log_end:
                    ends[tp] = self._reported[(broker_id, tp)] = own_log.log_end
                continue
            if leader == NO_LEADER or broker_id not in state.replicas:
                continue
            source = self.contexts.get(leader)
            if source is None or not source.broker.alive or self.model.down(leader):
                continue
            leader_log = source.logs.find(tp) or PartitionLog()
            own = ctx.logs.get(tp)
            key = (broker_id, tp)
            if self._checked_epoch.get(key) != state.leader_epoch:
                cut = own.truncate_to(own.divergence(leader_log))
                if cut:
                    log.info("broker %s: %s-%s truncated by %s records to offset %s "
                             "(leader %s, epoch %s)", broker_id, *tp, cut, own.log_end, leader,
                             state.leader_epoch)  # fmt: skip
                self._checked_epoch[key] = state.leader_epoch
            if own.log_end < leader_log.log_start:
                # The leader's retention passed this log's end: start again at the leader's
                # log start (Kafka's follower on OFFSET_OUT_OF_RANGE, truncateFullyAndStartAt).
                log.info("broker %s: %s-%s starts again at the leader's log start %s",
                         broker_id, *tp, leader_log.log_start)  # fmt: skip
                own.truncate_fully_and_start_at(leader_log.log_start)
            if leader_log.log_end > own.log_end:
                try:
                    data = leader_log.read(own.log_end, REPLICA_FETCH_MAX_BYTES)
                    own.append_copied(data)
                    if own.log_end < leader_log.log_end:
                        pending.add(tp)  # more than one round's bytes: the rest next round
                except (IndexError, ProtocolError) as exc:
                    # The leader's log no longer continues ours: check the epochs again.
                    log.info("broker %s: %s-%s diverged from leader %s (%s)", broker_id, *tp,
                             leader, exc)  # fmt: skip
                    self._checked_epoch.pop(key, None)
                    pending.add(tp)
                    continue
                copied = True
            # A follower's log start follows its leader's (Kafka's fetcher hands the leader's
            # log start to maybeIncrementLogStartOffset); retention then deletes below it.
            own.maybe_increment_log_start(leader_log.log_start)
            if full or self._reported.get(key) != own.log_end:
                ends[tp] = self._reported[key] = own.log_end
        for tp in self.model.report_log_ends(broker_id, ends, fetched=True):
            moved = self.model.log(tp)
            leader_ctx = None if moved is None else self.contexts.get(moved.leader)
            if leader_ctx is not None:
                leader_ctx.logs.appended()  # wakes consumers and acks=all waits
        return copied
