"""One broker's transaction coordinator (Kafka's ``TransactionCoordinator``, the classic
protocol: transaction version 1).

* **InitProducerId** gives a transactional id its producer id (from the broker's block, see
  :mod:`coordkit.serve.dataplane.producer_state`) and bumps its epoch, which fences every older
  producer of the id (PRODUCER_FENCED at the coordinator, INVALID_PRODUCER_EPOCH at the partitions
  once a marker of the new epoch reached them). An open transaction is aborted first, with the
  next epoch (Kafka's ``PrepareEpochFence``), and the caller told CONCURRENT_TRANSACTIONS to
  retry; so is a transaction still completing. The timeout must be within
  ``transaction.max.timeout.ms`` (INVALID_TRANSACTION_TIMEOUT).
* **AddPartitionsToTxn** / **AddOffsetsToTxn** (the group's ``__consumer_offsets`` partition) add
  partitions: the transaction is ``Ongoing`` from the first.
* **EndTxn** writes ``PrepareCommit``/``PrepareAbort``, answers, then has every partition's
  leader append the marker (:mod:`coordkit.serve.transactions.markers`) and writes
  ``CompleteCommit``/``CompleteAbort``. A retried EndTxn of a completed transaction is answered
  NONE; of one completing, CONCURRENT_TRANSACTIONS.
* Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` the coordinator goes over
  the ids of the partitions it leads: an ``Ongoing`` transaction past its timeout is aborted with
  the next epoch (its producer is fenced), and a ``PrepareCommit``/``PrepareAbort`` left by a
  coordinator that failed (this broker leads the partition now) gets its markers and completes,
  as Kafka's coordinator does when it loads a partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Callable, Iterable

import attrs

from coordkit.engine.states import TP
from coordkit.errors import LayoutError, StoreError
from coordkit.serve import errors
from coordkit.serve.context import BrokerContext
from coordkit.serve.transactions.config import TransactionSettings
from coordkit.serve.transactions.markers import TransactionMarkerChannelManager, TxnMarker
from coordkit.serve.transactions.metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TxnState,
)
from coordkit.serve.transactions.state_manager import TransactionStateManager
from coordkit.serve.transactions.txn_offsets import pending_txn_offsets

log = logging.getLogger("coordkit.serve.transactions")

NO_PRODUCER_ID = -1


@attrs.frozen
class InitProducerIdResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


def wall_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    """Broker ``ctx``'s coordinator of the transactional ids of the ``__transaction_state``
    partitions it leads."""

    def __init__(
        self,
        ctx: BrokerContext,
        settings: TransactionSettings | None = None,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.ctx = ctx
        self.settings = settings or TransactionSettings()
        self.clock = clock
        self.states = TransactionStateManager(ctx, self.settings)
        self.markers = TransactionMarkerChannelManager(ctx)
        #: The offsets producers committed inside transactions to the groups this broker
        #: coordinates (the group coordinator's part, kept beside: see .txn_offsets).
        self.txn_offsets = pending_txn_offsets(ctx)
        #: Kafka's in-memory ``lastProducerEpoch``: the epoch before the last bump, by id.
        self._last_epochs: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    async def close(self) -> None:
        tasks = [*self._tasks, *([self._sweeper] if self._sweeper else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await asyncio.to_thread(self.markers.close)

    # -- InitProducerId -------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_id: int, expected_epoch: int
    ) -> InitProducerIdResult:
        if not transactional_id:
            return InitProducerIdResult(errors.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            return InitProducerIdResult(errors.INVALID_TRANSACTION_TIMEOUT)
        expected = (expected_id, expected_epoch) if expected_id >= 0 else None
        async with self.states.lock(transactional_id):
            error, found = await self.states.get(transactional_id)
            if error:
                return InitProducerIdResult(error)
            if found is None:
                producer_id = await self._next_producer_id()
                if producer_id < 0:
                    return InitProducerIdResult(errors.COORDINATOR_NOT_AVAILABLE)
                found = TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH,
                                            timeout_ms, TxnState.EMPTY)  # fmt: skip
            if found.pending:
                return InitProducerIdResult(errors.CONCURRENT_TRANSACTIONS)
            if expected is not None and not self._valid_producer(found, expected):
                return InitProducerIdResult(errors.PRODUCER_FENCED)
            if found.state.preparing or found.state == TxnState.PREPARE_EPOCH_FENCE:
                return InitProducerIdResult(errors.CONCURRENT_TRANSACTIONS)
            if found.state == TxnState.ONGOING:
                # Kafka's prepareFenceProducerEpoch: the open transaction is aborted with the
                # next epoch; the producer retries and gets the epoch after it.
                error = await self._abort_fencing(found)
                return InitProducerIdResult(error or errors.CONCURRENT_TRANSACTIONS)
            return await self._bump(found, timeout_ms, expected)

    def _valid_producer(self, found: TransactionMetadata, expected: tuple[int, int]) -> bool:
        """Kafka's ``isValidProducerId``: the state was just made, or the caller names the
        id's producer id (its epoch is checked by the bump)."""
        return found.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == found.producer_id

    async def _bump(
        self, found: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitProducerIdResult:
        """Kafka's ``prepareIncrementProducerEpoch`` (or ``prepareProducerIdRotation`` once the
        epochs of the producer id are used up), written as ``Empty``. A caller naming its epoch
        must be the current producer (bumped) or retry the last bump (answered it again)."""
        producer_id, epoch, last = found.producer_id, found.producer_epoch + 1, found.producer_epoch
        if expected is not None and found.producer_epoch != NO_PRODUCER_EPOCH:
            previous = self._last_epochs.get(found.transactional_id, NO_PRODUCER_EPOCH)
            if expected[1] == found.producer_epoch:
                pass
            elif expected[1] == previous:
                epoch, last = found.producer_epoch, previous
            else:
                return InitProducerIdResult(errors.PRODUCER_FENCED)
        if epoch >= MAX_PRODUCER_EPOCH:
            producer_id = await self._next_producer_id()
            if producer_id < 0:
                return InitProducerIdResult(errors.COORDINATOR_NOT_AVAILABLE)
            epoch, last = 0, NO_PRODUCER_EPOCH
        now = self.clock()
        bumped = attrs.evolve(found, producer_id=producer_id, producer_epoch=epoch,
                              timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=set(),
                              start_ms=-1, last_update_ms=now)  # fmt: skip
        error = await self.states.write(bumped)
        if error:
            return InitProducerIdResult(error)
        self._last_epochs[found.transactional_id] = last
        return InitProducerIdResult(errors.NONE, producer_id, epoch)

    async def _next_producer_id(self) -> int:
        supply = self.ctx.logs.producer_ids
        store, broker_id = self.ctx.broker.store, self.ctx.broker_id
        try:
            return await self.ctx.blocking(lambda: supply.next_id(store, broker_id))
        except (StoreError, LayoutError) as exc:
            log.warning("broker %s: no producer id handed out: %s", broker_id, exc)
            return NO_PRODUCER_ID

    # -- AddPartitionsToTxn, AddOffsetsToTxn ------------------------------------------------------

    async def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[TP]
    ) -> int:
        """Add ``partitions`` to the id's transaction: one error code for all of them."""
        if not transactional_id:
            return errors.INVALID_REQUEST
        async with self.states.lock(transactional_id):
            error, found = await self.states.get(transactional_id)
            if error or found is None:
                return error or errors.INVALID_PRODUCER_ID_MAPPING
            if found.producer_id != producer_id:
                return errors.INVALID_PRODUCER_ID_MAPPING
            if found.producer_epoch != producer_epoch:
                return errors.PRODUCER_FENCED
            if found.pending or found.state.preparing:
                return errors.CONCURRENT_TRANSACTIONS
            if found.state == TxnState.ONGOING and partitions <= found.partitions:
                return errors.NONE
            if found.state not in (TxnState.ONGOING, *_COMPLETED):
                return errors.INVALID_TXN_STATE
            now = self.clock()
            start = found.start_ms if found.state == TxnState.ONGOING else now
            ongoing = attrs.evolve(found, state=TxnState.ONGOING,
                                   partitions=found.partitions | partitions, start_ms=start,
                                   last_update_ms=now)  # fmt: skip
            return await self.states.write(ongoing)

    async def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[TP]
    ) -> dict[TP, int]:
        """A partition leader's check that ``partitions`` are in the producer's transaction
        (Kafka's ``handleVerifyPartitionsInTransaction``): each NONE if added, else
        TRANSACTION_ABORTABLE; nothing written. The state's pending writes are not waited for:
        the leader's append checks its own producer state again."""
        if not transactional_id:
            return dict.fromkeys(partitions, errors.INVALID_REQUEST)
        async with self.states.lock(transactional_id):
            error, found = await self.states.get(transactional_id)
        if error or found is None:
            code = error or errors.INVALID_PRODUCER_ID_MAPPING
        elif found.producer_id != producer_id:
            code = errors.INVALID_PRODUCER_ID_MAPPING
        elif found.producer_epoch != producer_epoch:
            code = errors.PRODUCER_FENCED
        elif found.state.preparing:
            code = errors.CONCURRENT_TRANSACTIONS
        else:
            return {tp: errors.NONE if tp in found.partitions else errors.TRANSACTION_ABORTABLE
                    for tp in partitions}  # fmt: skip
        return dict.fromkeys(partitions, code)

    # -- EndTxn ---------------------------------------------------------------------------------

    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> int:
        if not transactional_id:
            return errors.INVALID_REQUEST
        async with self.states.lock(transactional_id):
            error, found = await self.states.get(transactional_id)
            if error or found is None:
                return error or errors.INVALID_PRODUCER_ID_MAPPING
            if found.producer_id != producer_id:
                return errors.INVALID_PRODUCER_ID_MAPPING
            if found.producer_epoch != producer_epoch:
                return errors.PRODUCER_FENCED
            if found.pending:
                return errors.CONCURRENT_TRANSACTIONS
            state = found.state
            if state == TxnState.ONGOING:
                return await self._prepare(found, commit)
            if state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
                return errors.NONE  # a retry of what was done
            if state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
                return errors.CONCURRENT_TRANSACTIONS
            return errors.INVALID_TXN_STATE

    async def _prepare(self, found: TransactionMetadata, commit: bool) -> int:
        """``PrepareCommit``/``PrepareAbort`` written, then the markers sent in the background."""
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        prepared = attrs.evolve(found, state=state, last_update_ms=self.clock())
        error = await self.states.write(prepared)
        if not error:
            self._complete_later(prepared)
        return error

    async def _abort_fencing(self, found: TransactionMetadata) -> int:
        """Abort ``found``'s open transaction with the next producer epoch (Kafka's
        ``PrepareEpochFence`` then ``PrepareAbort``): the producer of the old epoch is fenced."""
        if found.producer_epoch + 1 >= MAX_PRODUCER_EPOCH:
            return errors.INVALID_TXN_STATE  # Kafka's exhausted epoch: never reached in practice
        fenced = attrs.evolve(found, producer_epoch=found.producer_epoch + 1)
        self._last_epochs[found.transactional_id] = NO_PRODUCER_EPOCH
        return await self._prepare(fenced, commit=False)

    def _complete_later(self, prepared: TransactionMetadata) -> None:
        prepared.pending = True
        task = asyncio.get_running_loop().create_task(self._complete(prepared))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _complete(self, prepared: TransactionMetadata) -> None:
        """Markers to every partition, then ``CompleteCommit``/``CompleteAbort`` written."""
        transactional_id = prepared.transactional_id
        commit = prepared.state == TxnState.PREPARE_COMMIT
        epoch = self.states.epoch_of(transactional_id)
        marker = TxnMarker(prepared.producer_id, prepared.producer_epoch, commit, epoch)

        def still_coordinator() -> bool:
            # Another broker leads the partition now (or led it meanwhile): its coordinator
            # completes the transaction with its own epoch.
            return (
                self.states.cached(transactional_id) is prepared
                and self.states.epoch_of(transactional_id) == epoch
            )

        try:
            written = await self.markers.write(marker, prepared.partitions, still_coordinator)
        finally:
            prepared.pending = False
        if not written:
            return
        async with self.states.lock(transactional_id):
            if self.states.cached(transactional_id) is not prepared:
                return
            done = attrs.evolve(prepared, partitions=set(), last_update_ms=self.clock(),
                                state=TxnState.COMPLETE_COMMIT if commit else
                                TxnState.COMPLETE_ABORT)  # fmt: skip
            error = await self.states.write(done)
        if error:
            log.info("broker %s: transaction of %r completed, its state not written (%s)",
                     self.ctx.broker_id, transactional_id, error)  # fmt: skip

    # -- timeouts and failover ------------------------------------------------------------------

    async def _sweep_forever(self) -> None:
        interval = self.settings.abort_timed_out_cleanup_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            if not self.ctx.broker.alive:
                return  # the broker stopped (or crashed): it coordinates nothing any more
            try:
                await self.sweep()
            except (StoreError, LayoutError) as exc:
                log.warning("broker %s: transaction sweep failed: %s", self.ctx.broker_id, exc)

    async def sweep(self) -> None:
        """Abort the timed-out transactions and complete the prepared ones of the ids this
        broker coordinates (Kafka's ``abortTimedOutTransactions`` and the completion of a
        loaded partition's prepared transactions)."""
        for transactional_id in await self.states.transactional_ids():
            if not self.states.hosted(transactional_id):
                continue
            async with self.states.lock(transactional_id):
                error, found = await self.states.get(transactional_id)
                if error or found is None or found.pending:
                    continue
                if found.state.preparing:
                    self._complete_later(found)
                elif found.state == TxnState.ONGOING and (
                    found.start_ms + found.timeout_ms < self.clock()
                ):
                    log.info("broker %s: aborting the transaction of %r, open past its %s ms",
                             self.ctx.broker_id, transactional_id, found.timeout_ms)  # fmt: skip
                    await self._abort_fencing(found)

    # -- DescribeTransactions, ListTransactions ----------------------------------------------------

    async def describe(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """``(error, state)``: TRANSACTIONAL_ID_NOT_FOUND for an id without state."""
        async with self.states.lock(transactional_id):
            error, found = await self.states.get(transactional_id)
        if error:
            return error, None
        return (errors.TRANSACTIONAL_ID_NOT_FOUND, None) if found is None else (errors.NONE, found)

    async def listing(self) -> list[TransactionMetadata]:
        """The state of every id this broker coordinates."""
        found = []
        for transactional_id in await self.states.transactional_ids():
            if self.states.hosted(transactional_id):
                _error, metadata = await self.describe(transactional_id)
                if metadata is not None:
                    found.append(metadata)
        return found


_COMPLETED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
_COORDINATORS: weakref.WeakKeyDictionary[BrokerContext, TransactionCoordinator] = (
    weakref.WeakKeyDictionary()
)


def coordinator_of(ctx: BrokerContext) -> TransactionCoordinator:
    """Broker ``ctx``'s transaction coordinator, made and started (on the running loop) at
    its first use."""
    found = _COORDINATORS.get(ctx)
    if found is None:
        found = _COORDINATORS[ctx] = TransactionCoordinator(ctx, ctx.settings.transactions)
        found.start()
    return found


def start_coordinators(contexts: Iterable[BrokerContext]) -> None:
    """Every broker's coordinator started with the server (so that one taking over a
    ``__transaction_state`` partition completes what a failed coordinator prepared)."""
    for ctx in contexts:
        coordinator_of(ctx)


async def close_coordinators(contexts: Iterable[BrokerContext]) -> None:
    for ctx in contexts:
        found = _COORDINATORS.pop(ctx, None)
        if found is not None:
            await found.close()
