"""Where each transactional id's state lives, and which broker coordinates it (Kafka's
``TransactionStateManager``).

**Placement.** A transactional id belongs to partition ``partition_for(id, n)`` of
``__transaction_state`` under the process's group-coordinator strategy (Kafka's rule:
``abs(hashCode(id)) % transaction.state.log.num.partitions``, the same function as a group's
over ``__consumer_offsets``, so the lab compares the strategies for both coordinators); ``n`` is
the partition count the topic has once it exists. The broker leading that partition coordinates
the id, and the partition's leader epoch is its **coordinator epoch**, written into its markers
(a partition refuses a marker of an older coordinator epoch: TRANSACTION_COORDINATOR_FENCED).
The topic is created, as Kafka creates it, at the first FindCoordinator for a transactional id.

**State.** Each id's :class:`~coordkit.serve.transactions.metadata.TransactionMetadata` is read
from the store when its coordinator first needs it under the current coordinator epoch (a broker
that leads the partition again after another led it reads it again), and every change is a
version-checked write (see :mod:`coordkit.serve.transactions.metadata`): the change takes effect
here only once written.
"""

from __future__ import annotations

import asyncio
import logging

from coordkit.engine import states
from coordkit.engine.errors import TopicExistsError
from coordkit.errors import BadVersionError, LayoutError, NodeExistsError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.serve import errors
from coordkit.serve.context import BrokerContext
from coordkit.serve.transactions.config import TransactionSettings
from coordkit.serve.transactions.metadata import (
    STATE_ROOT,
    TransactionMetadata,
    state_path,
    transactional_id_of,
)

log = logging.getLogger("coordkit.serve.transactions")

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionStateManager:
    """Broker ``ctx``'s view of the transaction state it coordinates."""

    def __init__(self, ctx: BrokerContext, settings: TransactionSettings) -> None:
        self.ctx = ctx
        self.settings = settings
        self._cache: dict[str, tuple[int, TransactionMetadata]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._partition_count: int | None = None

    # -- placement ----------------------------------------------------------------------------

    def partition_count(self) -> int:
        """Partitions of ``__transaction_state``: the count it has (once
        :meth:`refresh_partition_count` read it), else ``transaction.state.log.num.partitions``."""
        return self._partition_count or self.settings.num_partitions

    def refresh_partition_count(self) -> None:
        """Read the count ``__transaction_state`` has, once it exists (store work)."""
        if self._partition_count is not None:
            return
        path = layout.topic_path(TRANSACTION_STATE_TOPIC)
        try:
            data, _ = self.ctx.broker.store.get(path)
            self._partition_count = layout.TOPIC.decode(data, path).partition_count
        except (NoNodeError, LayoutError):
            return

    async def read_partition_count(self) -> None:
        """:meth:`refresh_partition_count` off the event loop, until the count is known (then
        at no cost: a produce path asks this)."""
        if self._partition_count is None:
            await self.ctx.blocking(self.refresh_partition_count)

    def partition_for(self, transactional_id: str) -> int:
        selection = self.ctx.broker.strategies.group_coordinator
        return int(selection.partition_for(transactional_id, self.partition_count()))

    def coordinator_epoch(self, partition: int) -> int | None:
        """The leader epoch of ``partition`` when this broker leads it, else ``None``."""
        found = self.ctx.leadership((TRANSACTION_STATE_TOPIC, partition))
        if found is None or found[0] != self.ctx.broker_id:
            return None
        return found[1]

    def leader_of(self, transactional_id: str) -> int | None:
        """The broker coordinating ``transactional_id`` (from the partition's state in the
        store); ``None`` when the topic or a leader is missing (created here if missing)."""
        store = self.ctx.broker.store
        self.refresh_partition_count()
        path = states.state_path((TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id)))
        try:
            data, stat = store.get(path)
        except NoNodeError:
            self.ensure_topic()
            return None
        try:
            state = states.decode_state(path, data, stat.version)
        except LayoutError:
            return None
        return state.leader if state.has_leader else None

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` unless it exists (replication factor
        ``transaction.state.log.replication.factor`` capped by the live brokers)."""
        if self.ctx.broker.store.exists(layout.topic_path(TRANSACTION_STATE_TOPIC)) is not None:
            return
        admin = self.ctx.admin
        factor = max(1, min(self.settings.replication_factor, len(admin.brokers())))
        try:
            admin.create_topic(TRANSACTION_STATE_TOPIC, self.settings.num_partitions, factor,
                               config=self.settings.topic_configs())  # fmt: skip
        except TopicExistsError:
            return
        log.info("broker %s created %s (replication factor %s)", self.ctx.broker_id,
                 TRANSACTION_STATE_TOPIC, factor)  # fmt: skip

    # -- state ----------------------------------------------------------------------------------

    def lock(self, transactional_id: str) -> asyncio.Lock:
        return self._locks.setdefault(transactional_id, asyncio.Lock())

    async def get(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """``(error, the id's state or None)``: NOT_COORDINATOR when this broker does not lead
        the id's partition, COORDINATOR_LOAD_IN_PROGRESS when the store cannot be read."""
        epoch = self.coordinator_epoch(self.partition_for(transactional_id))
        if epoch is None:
            self._cache.pop(transactional_id, None)
            return errors.NOT_COORDINATOR, None
        cached = self._cache.get(transactional_id)
        if cached is not None and cached[0] == epoch:
            return errors.NONE, cached[1]
        path = state_path(transactional_id)
        try:
            data, stat = await self.ctx.blocking(lambda: self.ctx.broker.store.get(path))
        except NoNodeError:
            return errors.NONE, None
        except StoreError as exc:
            log.warning("broker %s: transaction state of %r not read: %s", self.ctx.broker_id,
                        transactional_id, exc)  # fmt: skip
            return errors.COORDINATOR_LOAD_IN_PROGRESS, None
        try:
            found = TransactionMetadata.decode(transactional_id, path, data, stat.version)
        except LayoutError as exc:
            log.warning("broker %s: %s", self.ctx.broker_id, exc)
            return errors.COORDINATOR_NOT_AVAILABLE, None
        self._cache[transactional_id] = (epoch, found)
        return errors.NONE, found

    def cached(self, transactional_id: str) -> TransactionMetadata | None:
        found = self._cache.get(transactional_id)
        return None if found is None else found[1]

    async def write(self, metadata: TransactionMetadata) -> int:
        """Write ``metadata`` (a new state of its id) at the version last seen; on success it
        is the id's state here. NOT_COORDINATOR when another coordinator wrote meanwhile or
        this broker no longer leads the partition; COORDINATOR_NOT_AVAILABLE when the store
        fails."""
        transactional_id = metadata.transactional_id
        epoch = self.coordinator_epoch(self.partition_for(transactional_id))
        if epoch is None:
            self._cache.pop(transactional_id, None)
            return errors.NOT_COORDINATOR
        path, data, version = state_path(transactional_id), metadata.encode(), metadata.version
        store = self.ctx.broker.store

        def write() -> int:
            if version is None:
                store.create(path, data, make_parents=True)
                return 0
            return store.set(path, data, version=version).version

        try:
            metadata.version = await self.ctx.blocking(write)
        except (BadVersionError, NodeExistsError, NoNodeError):
            log.info("broker %s: transaction state of %r changed elsewhere: no longer its "
                     "coordinator", self.ctx.broker_id, transactional_id)  # fmt: skip
            self._cache.pop(transactional_id, None)
            return errors.NOT_COORDINATOR
        except StoreError as exc:
            log.warning("broker %s: transaction state of %r not written: %s",
                        self.ctx.broker_id, transactional_id, exc)  # fmt: skip
            self._cache.pop(transactional_id, None)
            return errors.COORDINATOR_NOT_AVAILABLE
        self._cache[transactional_id] = (epoch, metadata)
        return errors.NONE

    async def transactional_ids(self) -> list[str]:
        """Every transactional id with a state in the store (ListTransactions, the sweeps)."""
        store = self.ctx.broker.store
        await self.read_partition_count()
        try:
            names = await self.ctx.blocking(lambda: store.children(STATE_ROOT))
        except NoNodeError:
            return []
        return sorted(transactional_id_of(name) for name in names)

    def hosted(self, transactional_id: str) -> bool:
        return self.coordinator_epoch(self.partition_for(transactional_id)) is not None

    def epoch_of(self, transactional_id: str) -> int:
        """The coordinator epoch of ``transactional_id`` (-1 when not coordinated here)."""
        epoch = self.coordinator_epoch(self.partition_for(transactional_id))
        return -1 if epoch is None else epoch
