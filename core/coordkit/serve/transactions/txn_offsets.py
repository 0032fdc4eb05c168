"""Offsets committed inside a transaction, held by the group's coordinator until the
transaction ends (Kafka's ``OffsetMetadataManager``: its ``pendingTransactionalOffsets``,
``hasPendingTransactionalOffsets`` and ``replayEndTransactionMarker``).

TxnOffsetCommit puts a producer's offsets of a group here; they are nobody's committed offsets
yet, and an OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for a partition
that has one (:meth:`PendingTxnOffsets.unstable`). The transaction coordinator then writes its
marker to the group's ``__consumer_offsets`` partition, whose leader is the group's coordinator:
with a commit marker the producer's pending offsets of the groups of that partition are stored
as the groups' committed offsets (through the group coordinator's offset storage), with an abort
marker they are dropped (:meth:`PendingTxnOffsets.end`). A partition committed by a plain
OffsetCommit after the transaction's offset keeps that commit, as Kafka keeps the most recent
record of the two (Kafka orders them by their records' offsets in ``__consumer_offsets``,
coordkit by their commit times, to the millisecond).

**In the store**, beside the group's committed offsets, because the store is what a group
coordinator taking over a partition reads (Kafka's reads the transactional offset records of
``__consumer_offsets`` back): one node per offsets partition and producer,
``/coordkit/txn_offsets/<partition>/<producer id>``, holding the producer's pending offsets of
every group of that partition::

    {"version":1,"producerEpoch":0,"groups":{"g":[{"topic":"t","partition":0,"offset":5,
     "leaderEpoch":-1,"metadata":"","commitTimestamp":1700000000000}]}}

Every write is fenced, as the group coordinator's own, by the version of the offsets
partition's state node this broker took the partition over at, so a coordinator that lost the
partition writes nothing. Each broker keeps the nodes of a partition in memory once read, and
reads them again when it hosts the partition at another version (it may have moved away and
back meanwhile). A node the store hands back unreadable is logged and left alone.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

import attrs

from coordkit.engine.groups.protocol import ErrorCode
from coordkit.errors import LayoutError, NodeExistsError, NoNodeError, StoreError
from coordkit.kafka.model import TopicPartition
from coordkit.serve.context import BrokerContext
from coordkit.store import Check, Create, Delete, MetadataStore, SetData, paths
from coordkit.strategies.offsets import OffsetAndMetadata, OffsetStorage
from coordkit.support import jsontext

log = logging.getLogger("coordkit.serve.transactions")

ROOT = "/coordkit/txn_offsets"
LAYOUT_VERSION = 1

Offsets = dict[TopicPartition, OffsetAndMetadata]


class GroupOffsetsHost(Protocol):
    """What the pending offsets need of the group coordinator (engine's ``GroupCoordinator``)."""

    store: MetadataStore

    def partition_for(self, group_id: str) -> int: ...

    @property
    def offset_storage(self) -> OffsetStorage: ...


@attrs.frozen
class ProducerOffsets:
    """One producer's pending offsets of the groups of one offsets partition."""

    producer_epoch: int
    groups: dict[str, Offsets] = attrs.field(factory=dict)


def node_path(partition: int, producer_id: int) -> str:
    return paths.join(ROOT, str(partition), str(producer_id))


def encode(found: ProducerOffsets) -> bytes:
    groups = {
        group: [
            {"topic": tp.topic, "partition": tp.partition, "offset": value.offset,
             "leaderEpoch": value.leader_epoch, "metadata": value.metadata,
             "commitTimestamp": value.commit_timestamp}
            for tp, value in sorted(offsets.items())
        ]
        for group, offsets in sorted(found.groups.items())
    }  # fmt: skip
    value = {"version": LAYOUT_VERSION, "producerEpoch": found.producer_epoch, "groups": groups}
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _field(path: str, obj: Mapping[str, Any], name: str, kind: type) -> Any:
    if name not in obj:
        raise LayoutError(path, "missing", field=name)
    value = obj[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise LayoutError(path, f"expected {kind.__name__}, got {json.dumps(value)}", field=name)
    return value


def decode(path: str, data: bytes) -> ProducerOffsets:
    """A node's pending offsets; :class:`LayoutError` names what is wrong and where."""
    try:
        obj = jsontext.loads(data)
    except jsontext.JSONTextError as exc:
        raise LayoutError(
            path, f"pending transactional offsets are not valid JSON ({exc})"
        ) from None
    if not isinstance(obj, dict):
        raise LayoutError(path, f"expected a JSON object, got {type(obj).__name__}")
    if _field(path, obj, "version", int) != LAYOUT_VERSION:
        raise LayoutError(path, f"unknown version {obj['version']}", field="version")
    epoch = _field(path, obj, "producerEpoch", int)
    groups: dict[str, Offsets] = {}
    for group, entries in _field(path, obj, "groups", dict).items():
        if not isinstance(entries, list):
            raise LayoutError(path, f"expected a list, got {json.dumps(entries)}",
                              field=f"groups.{group}")  # fmt: skip
        offsets: Offsets = {}
        for entry in entries:
            if not isinstance(entry, dict):
                raise LayoutError(path, f"expected an object, got {json.dumps(entry)}",
                                  field=f"groups.{group}")  # fmt: skip
            try:
                tp = TopicPartition(_field(path, entry, "topic", str),
                                    _field(path, entry, "partition", int))  # fmt: skip
                offsets[tp] = OffsetAndMetadata(
                    _field(path, entry, "offset", int), _field(path, entry, "metadata", str),
                    _field(path, entry, "commitTimestamp", int),
                    _field(path, entry, "leaderEpoch", int),
                )  # fmt: skip
            except ValueError as exc:
                raise LayoutError(path, str(exc), field=f"groups.{group}") from None
        groups[group] = offsets
    return ProducerOffsets(epoch, groups)


@attrs.define
class _Loaded:
    """A partition's pending offsets as read at hosting version ``version``."""

    version: int
    producers: dict[int, ProducerOffsets]


class PendingTxnOffsets:
    """One broker's pending transactional offsets, by offsets partition and producer id.

    :param host: the broker's group coordinator (which partition a group belongs to, its offset
        storage, the store session).
    :param hosted_version: the version of an offsets partition's state node this broker hosts
        it at, ``None`` when it does not (catching up with the store first).
    :param fenced_write: the group coordinator's fenced write (``attempt(fence)`` until done;
        NOT_COORDINATOR when the partition moved).
    """

    def __init__(
        self,
        host: GroupOffsetsHost,
        hosted_version: Callable[[int], int | None],
        fenced_write: Callable[[int, str, Callable[[Check], bool]], ErrorCode],
    ) -> None:
        self.host = host
        self._hosted_version = hosted_version
        self._fenced_write = fenced_write
        self._lock = threading.RLock()
        self._partitions: dict[int, _Loaded] = {}

    # -- reading -----------------------------------------------------------------------------

    def _loaded(self, partition: int) -> dict[int, ProducerOffsets] | None:
        """The partition's pending offsets (read from the store when this broker hosts it at
        a version it has not read them at); ``None`` when it does not host it.

        :raises StoreError: the store could not be read."""
        version = self._hosted_version(partition)
        if version is None:
            self._partitions.pop(partition, None)
            return None
        found = self._partitions.get(partition)
        if found is not None and found.version == version:
            return found.producers
        producers: dict[int, ProducerOffsets] = {}
        root = paths.join(ROOT, str(partition))
        try:
            names = self.host.store.children(root)
        except NoNodeError:
            names = []
        nodes = [paths.join(root, name) for name in names]
        for path, answer in zip(nodes, self.host.store.get_many(nodes), strict=True):
            if isinstance(answer, NoNodeError):
                continue
            if isinstance(answer, StoreError):
                raise answer
            try:
                producer_id = int(paths.basename(path))
                producers[producer_id] = decode(path, answer[0])
            except (LayoutError, ValueError) as exc:
                log.warning("ignoring unreadable pending transactional offsets: %s", exc)
        self._partitions[partition] = _Loaded(version, producers)
        if producers:
            log.info("offsets partition %s: %s producers' transactional offsets pending",
                     partition, len(producers))  # fmt: skip
        return producers

    def unstable(self, group_id: str) -> set[TopicPartition]:
        """The partitions of ``group_id`` with an offset pending in an open transaction (Kafka's
        ``hasPendingTransactionalOffsets``): what a ``require_stable`` OffsetFetch answers
        UNSTABLE_OFFSET_COMMIT.

        :raises StoreError: the store could not be read."""
        with self._lock:
            producers = self._loaded(self.host.partition_for(group_id)) or {}
            return {tp for found in producers.values() for tp in found.groups.get(group_id, {})}

    # -- TxnOffsetCommit -----------------------------------------------------------------------

    def add(
        self,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> ErrorCode:
        """Hold ``offsets`` for the producer's open transaction (written to the store first)."""
        partition = self.host.partition_for(group_id)
        with self._lock:
            try:
                producers = self._loaded(partition)
            except StoreError as exc:
                log.warning("group %r: pending offsets not read: %s", group_id, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if producers is None:
                return ErrorCode.NOT_COORDINATOR
            before = producers.get(producer_id)
            groups = {g: dict(o) for g, o in (before.groups if before else {}).items()}
            groups.setdefault(group_id, {}).update(offsets)
            epoch = max(producer_epoch, before.producer_epoch if before else -1)
            after = ProducerOffsets(epoch, groups)
            error = self._write(partition, producer_id, after, exists=before is not None)
            if error is ErrorCode.NONE:
                producers[producer_id] = after
            return error

    def drop(self, group_id: str, partitions: Collection[TopicPartition] | None) -> ErrorCode:
        """Forget every producer's pending offsets of ``partitions`` of ``group_id`` (``None``:
        all of the group's): its offsets were deleted (OffsetDelete, DeleteGroups), whose
        tombstones remove the pending offsets of their partitions in Kafka too."""
        partition = self.host.partition_for(group_id)
        with self._lock:
            try:
                producers = self._loaded(partition)
            except StoreError as exc:
                log.warning("group %r: pending offsets not read: %s", group_id, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            for producer_id, found in list((producers or {}).items()):
                held = found.groups.get(group_id, {})
                kept = {} if partitions is None else {
                    tp: value for tp, value in held.items() if tp not in partitions}  # fmt: skip
                if len(kept) == len(held):
                    continue
                groups = {g: o for g, o in found.groups.items() if g != group_id}
                if kept:
                    groups[group_id] = kept
                after = ProducerOffsets(found.producer_epoch, groups)
                error = self._write(partition, producer_id, after if groups else None, exists=True)
                if error is not ErrorCode.NONE:
                    return error
                assert producers is not None
                if groups:
                    producers[producer_id] = after
                else:
                    del producers[producer_id]
            return ErrorCode.NONE

    # -- the transaction's marker --------------------------------------------------------------

    def end(self, partition: int, producer_id: int, commit: bool) -> ErrorCode:
        """The producer's pending offsets of offsets partition ``partition`` stored as its
        groups' committed offsets (``commit``) or dropped; then forgotten. NOT_COORDINATOR when
        this broker does not host the partition, COORDINATOR_NOT_AVAILABLE when the store did
        not take the writes (the marker is sent again)."""
        with self._lock:
            try:
                producers = self._loaded(partition)
            except StoreError as exc:
                log.warning("offsets partition %s: pending offsets not read: %s", partition, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if producers is None:
                return ErrorCode.NOT_COORDINATOR
            found = producers.get(producer_id)
            if found is None:
                return ErrorCode.NONE
            if commit:
                storage = self.host.offset_storage
                for group, offsets in found.groups.items():

                    def store(fence: Check, group: str = group, offsets: Offsets = offsets) -> bool:
                        # Kafka keeps the most recent of a transactional and a plain commit of
                        # a partition (by their records' offsets; here by their commit times).
                        existing = storage.fetch(group, list(offsets))
                        newer = {tp: value for tp, value in offsets.items()
                                 if (old := existing.get(tp)) is None
                                 or value.commit_timestamp > old.commit_timestamp}  # fmt: skip
                        if newer:
                            storage.commit(group, newer, fence=[fence])
                        return True

                    error = self._fenced_write(partition, f"group {group!r}: transactional "
                                               f"offsets of producer {producer_id}", store)  # fmt: skip
                    if error is not ErrorCode.NONE:
                        return error
            error = self._write(partition, producer_id, None, exists=True)
            if error is ErrorCode.NONE:
                producers.pop(producer_id, None)
            return error

    # -- the store -----------------------------------------------------------------------------

    def _write(
        self, partition: int, producer_id: int, value: ProducerOffsets | None, *, exists: bool
    ) -> ErrorCode:
        """The producer's node written (``None``: deleted), fenced by the partition's state."""
        path = node_path(partition, producer_id)
        create = not exists

        def attempt(fence: Check) -> bool:
            nonlocal create
            if value is None:
                try:
                    self.host.store.commit([fence, Delete(path)])
                except NoNodeError as exc:
                    if exc.op_index != 1:
                        raise
                return True
            data = encode(value)
            try:
                self.host.store.commit(
                    [fence, Create(path, data) if create else SetData(path, data)]
                )
                return True
            except NoNodeError as exc:
                if exc.op_index != 1:
                    raise
                self.host.store.ensure_path(paths.parent(path))
                create = True
            except NodeExistsError:
                create = False
            return False

        return self._fenced_write(partition, f"pending offsets of producer {producer_id}", attempt)


def pending_txn_offsets(ctx: BrokerContext) -> PendingTxnOffsets:
    """Broker ``ctx``'s pending offsets, over its group coordinator's hosting and fence."""
    groups = ctx.broker.group_coordinator

    def hosted_version(partition: int) -> int | None:
        return groups.hosting.version(partition) if groups.hosting.hosts(partition) else None

    return PendingTxnOffsets(groups, hosted_version, groups.persistence.fenced_write)
