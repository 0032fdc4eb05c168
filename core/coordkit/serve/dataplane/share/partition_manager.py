"""A broker's share partitions (Kafka's ``SharePartitionManager``): each loaded on first use from
its persisted state (or started where ``share.auto.offset.reset`` says), its acquisition locks
timed, every change persisted before it is answered, and the records of a member that left
released.

A share partition is kept per (group, topic id, partition) with the leader epoch it was loaded
under; once this broker no longer leads the partition in that epoch, it is dropped and loaded
again from the store when it leads it anew (what another leader wrote meanwhile wins). A write
the store refuses (another leader wrote since) drops it too: the request gets
FENCED_STATE_EPOCH, and nothing of this leader's unwritten state survives, so an
acknowledgement is only answered once it is stored.

Everything here runs on the broker's event loop, but the share-group coordinator's listener
calls, which come from its thread and are handed to the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Container, Sequence
from functools import partial
from typing import Any, TypeVar

import attrs

from coordkit.errors import StoreError
from coordkit.serve import errors
from coordkit.serve.dataplane.share.in_flight import AcknowledgementBatch, AcquiredRange
from coordkit.serve.dataplane.share.persister import StaleStateError, StorePersister
from coordkit.serve.dataplane.share.share_partition import SharePartition, SharePartitionConfig
from coordkit.serve.dataplane.share.share_session import (
    DEFAULT_MAX_SESSIONS,
    ShareSession,
    ShareSessionCache,
)

log = logging.getLogger("coordkit.serve.share")

#: (group id, topic id, partition).
ShareKey = tuple[str, uuid.UUID, int]
T = TypeVar("T")


@attrs.frozen
class ShareSettings:
    """A broker's share-group settings (Kafka 4.4's broker configs of the same names)."""

    partition: SharePartitionConfig = attrs.field(factory=SharePartitionConfig)
    #: ``share.auto.offset.reset``: where a share partition without state starts (``latest``,
    #: ``earliest`` or ``by_duration:<ISO-8601 duration>``; a group config in Kafka, here the
    #: broker's default for every group).
    auto_offset_reset: str = "latest"
    max_share_sessions: int = DEFAULT_MAX_SESSIONS


@attrs.define(eq=False)
class LoadedPartition:
    """A share partition in memory: the leader epoch it was loaded under and the version of
    its state node (``None``: none written yet)."""

    partition: SharePartition
    leader_epoch: int
    version: int | None
    state_epoch: int = 0
    writing: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    timer: asyncio.TimerHandle | None = None


class SharePartitionManager:
    """The share partitions and share sessions of one broker."""

    def __init__(
        self,
        persister: StorePersister,
        settings: ShareSettings,
        run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]],
        clock: Callable[[], float] = time.monotonic,
        leads: Callable[[uuid.UUID, int, int], bool] = lambda _t, _p, _e: True,
    ) -> None:
        """``leads(topic id, partition, leader epoch)``: whether this broker still leads the
        partition in that epoch (a leader that lost it writes nothing more: Kafka's share
        coordinator refuses a write of an older leader epoch)."""
        self.persister = persister
        self._leads = leads
        self.settings = settings
        self._run_blocking = run_blocking
        self._clock = clock
        self.sessions = ShareSessionCache(settings.max_share_sessions)
        self._partitions: dict[ShareKey, LoadedPartition] = {}
        self._loading: dict[ShareKey, asyncio.Lock] = {}
        self._changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def now_ms(self) -> float:
        return self._clock() * 1000

    # -- loading ------------------------------------------------------------------------------

    async def load(
        self,
        key: ShareKey,
        leader_epoch: int,
        initial_offset: Callable[[], int],
        config: SharePartitionConfig | None = None,
    ) -> LoadedPartition:
        """The share partition of ``key`` under ``leader_epoch``: the one in memory, or its
        persisted state, or a new one at ``initial_offset()`` (persisted at once, so that a
        failover does not move a ``latest`` start past records produced meanwhile); ``config``:
        the group's settings (default: the broker's).

        :raises StoreError: the store failed; :raises LayoutError: its value is not a state.
        """
        self._loop = asyncio.get_running_loop()
        loaded = self._partitions.get(key)
        if loaded is not None and loaded.leader_epoch == leader_epoch:
            return loaded
        lock = self._loading.setdefault(key, asyncio.Lock())
        async with lock:
            loaded = self._partitions.get(key)
            if loaded is not None and loaded.leader_epoch == leader_epoch:
                return loaded
            self.drop(key)
            found = await self._blocking(lambda: self.persister.read(*key))
            config = config or self.settings.partition
            if found is None:
                partition = SharePartition(initial_offset(), config)
                loaded = LoadedPartition(partition, leader_epoch, None)
                await self._write(key, loaded)
            else:
                state, version = found
                partition = SharePartition.restored(state, config)
                loaded = LoadedPartition(partition, leader_epoch, version, state.state_epoch)
            self._partitions[key] = loaded
            return loaded

    async def revalidate(self, keys: Sequence[ShareKey]) -> None:
        """Drop the partitions of ``keys`` whose stored state changed under them (an offset
        reset or deletion by the admin apis, possibly in another process; another leader), so
        that they are read again: called when a member opens a share session."""
        for key in keys:
            loaded = self._partitions.get(key)
            if loaded is None:
                continue
            async with loaded.writing:
                stored = await self._blocking(partial(self.persister.version, *key))
            if stored != loaded.version and self._partitions.get(key) is loaded:
                log.info("share partition %s: its stored state changed; read again", key)
                self.drop(key)

    def loaded(self, key: ShareKey) -> LoadedPartition | None:
        return self._partitions.get(key)

    def drop(self, key: ShareKey) -> None:
        """Forget ``key``'s partition (it is read from the store again when next used)."""
        loaded = self._partitions.pop(key, None)
        if loaded is not None and loaded.timer is not None:
            loaded.timer.cancel()

    def share_keys(self) -> list[ShareKey]:
        return list(self._partitions)

    # -- changing -----------------------------------------------------------------------------

    def acquire(
        self,
        key: ShareKey,
        loaded: LoadedPartition,
        member_id: str,
        batches: Sequence[tuple[int, int]],
        max_records: int,
        held: Container[int] = frozenset(),
        aborted: Container[int] = frozenset(),
    ) -> list[AcquiredRange]:
        """Acquire for ``member_id`` (nothing to persist: an acquisition is not written, nor
        are the records of aborted transactions it archives, as Kafka's)."""
        ranges = loaded.partition.acquire(member_id, batches, max_records, self.now_ms(), held,
                                          aborted)  # fmt: skip
        if ranges:
            self._schedule(key, loaded)
        return ranges

    async def acknowledge(
        self, key: ShareKey, loaded: LoadedPartition, member_id: str,
        batches: Sequence[AcknowledgementBatch],
    ) -> int:  # fmt: skip
        """Apply and persist ``member_id``'s acknowledgements; the partition's error code."""
        code = loaded.partition.acknowledge(member_id, batches, self.now_ms())
        if code:
            return code
        self._schedule(key, loaded)
        self._wake()
        return await self.persist(key, loaded)

    async def persist(self, key: ShareKey, loaded: LoadedPartition) -> int:
        """Write the partition's current state (writes of one partition one after another,
        each of the state as it is when it starts); an error code."""
        try:
            await self._write(key, loaded)
        except StaleStateError:
            log.warning("share partition %s: its state was written by another leader", key)
            self.drop(key)
            return errors.FENCED_STATE_EPOCH
        except StoreError as exc:
            log.warning("share partition %s: state not written (%s)", key, exc)
            self.drop(key)
            return errors.COORDINATOR_NOT_AVAILABLE
        return errors.NONE

    async def _write(self, key: ShareKey, loaded: LoadedPartition) -> None:
        """:raises StaleStateError: this broker no longer leads the partition in the epoch it
        was loaded under, or another leader wrote its state since."""
        if not self._leads(key[1], key[2], loaded.leader_epoch):
            raise StaleStateError(f"{key}: no longer led in leader epoch {loaded.leader_epoch}")
        async with loaded.writing:
            state = loaded.partition.persisted(loaded.leader_epoch, loaded.state_epoch)
            version = loaded.version
            loaded.version = await self._blocking(
                lambda: self.persister.write(*key, state, version)
            )

    def release_member(self, group_id: str, member_id: str) -> None:
        """Release every record ``member_id`` holds in ``group_id``'s partitions and persist."""
        for key, loaded in list(self._partitions.items()):
            if key[0] == group_id and loaded.partition.release_member(member_id):
                self._changed_in_background(key, loaded)
        self.sessions.remove((group_id, member_id))

    def connection_closed(self, session: ShareSession) -> None:
        """The connection ``session`` was opened on closed: the session ends, and its member's
        records are released (Kafka 4.4's ``SharePartitionManager`` on a disconnect) — unless
        the member opened another session since."""
        if self.sessions.get(session.key) is session:
            self.release_member(*session.key)

    def _changed_in_background(self, key: ShareKey, loaded: LoadedPartition) -> None:
        self._schedule(key, loaded)
        self._wake()
        task = asyncio.get_running_loop().create_task(self.persist(key, loaded))
        _background.add(task)
        task.add_done_callback(_background.discard)

    # -- locks --------------------------------------------------------------------------------

    def _schedule(self, key: ShareKey, loaded: LoadedPartition) -> None:
        """Time the partition's next lock expiry."""
        if loaded.timer is not None:
            loaded.timer.cancel()
            loaded.timer = None
        deadline = loaded.partition.next_lock_deadline()
        if deadline is None:
            return
        delay = max(deadline - self.now_ms(), 0) / 1000
        loaded.timer = asyncio.get_running_loop().call_later(delay, self._expire, key, loaded)

    def _expire(self, key: ShareKey, loaded: LoadedPartition) -> None:
        loaded.timer = None
        if self._partitions.get(key) is not loaded:
            return
        if loaded.partition.expire_locks(self.now_ms()):
            self._changed_in_background(key, loaded)
        else:
            self._schedule(key, loaded)

    # -- waiting ------------------------------------------------------------------------------

    def changed(self) -> asyncio.Event:
        """Set at the next release of records (acknowledged, expired, a member gone)."""
        return self._changed

    def _wake(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    # -- the share-group coordinator's listener (called from its thread) ------------------------

    def on_member_left(self, group_id: str, member_id: str) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.release_member, group_id, member_id)

    def on_group_deleted(self, group_id: str) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._forget_group, group_id)

    def _forget_group(self, group_id: str) -> None:
        """The group was deleted (it had no members): its states go from memory and from the
        store (every coordkit process reads the same store)."""
        for key in [k for k in self._partitions if k[0] == group_id]:
            self.drop(key)
        self.sessions.remove_group(group_id)
        task = asyncio.get_running_loop().create_task(
            self._blocking(lambda: self.persister.delete_group(group_id))
        )
        _background.add(task)
        task.add_done_callback(_background.discard)

    async def _blocking(self, call: Callable[[], T]) -> T:
        """Run store work off the event loop (``BrokerContext.blocking``)."""
        result: T = await self._run_blocking(call)
        return result


#: Background writes (a reference kept until they finish).
_background: set[asyncio.Task[Any]] = set()
