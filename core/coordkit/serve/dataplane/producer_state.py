"""Idempotent producers: producer ids from the store, and each partition's producer state.

Producer ids come in blocks of :data:`BLOCK_SIZE` claimed from ``/latest_producer_id_block``,
in Kafka's format (``{"version":1,"broker":B,"block_start":"S","block_end":"E"}``, both ends
inclusive) with a version-checked write, so two brokers (of this process or another) never hand
out the same id. A broker hands out its block's ids one by one and claims the next block when
it runs out.

Per partition, :class:`ProducerStates` keeps each producer's epoch and its last
:data:`BATCHES_KEPT` batches (Kafka's ``ProducerStateEntry``), and checks every batch a leader
is asked to append as Kafka's ``ProducerAppendInfo`` does:

* a batch equal (epoch, first and last sequence) to one of the last five is a duplicate: it is
  not appended again and the producer gets the original's offset;
* an older producer epoch is fenced (INVALID_PRODUCER_EPOCH); a newer one must start at
  sequence 0; within an epoch each batch must follow the last one (OUT_OF_ORDER_SEQUENCE_NUMBER);
* a producer the partition has no state for may start at any sequence (Kafka since 2.5,
  KIP-360: its state may have gone with retention), so UNKNOWN_PRODUCER_ID is never answered.

Transactions (Kafka's ``ProducerStateManager``): a producer's first transactional batch opens
its transaction at that batch's offset, and the end-transaction marker a coordinator writes
(:mod:`coordkit.serve.dataplane.transaction_index`) completes it; a non-transactional batch of a
producer with an open transaction is INVALID_TXN_STATE, and a control batch from a client
INVALID_RECORD (only coordinators write markers). The first offset of the oldest transaction not
yet decided, or decided by a marker the high watermark has not passed, is the log's first
unstable offset: read_committed consumers read below it (the last stable offset).

Verification (KIP-890 part 1, :mod:`coordkit.serve.transactions.verification`): before a
leader asks the coordinator about a producer's first transactional batch it takes a
**verification guard** for the producer (:meth:`ProducerStates.start_verification`); any
transactional batch or marker recorded for the producer clears it, and a transactional batch of a
producer without an open transaction is appended only with the guard it was verified under
(else INVALID_TXN_STATE, Kafka's "Record was not part of an ongoing transaction").

Followers apply the same state from the batches they copy, so a new leader keeps deduplicating
and knows the open transactions.

Limits: producer state lives as long as the partition's log in this process and is rebuilt from
the batches when a log is loaded (no expiry, no ``.snapshot`` files: Kafka rebuilds from the log
too when it finds none).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Iterable

import attrs

from coordkit.errors import BadVersionError, LayoutError, NodeExistsError, NoNodeError
from coordkit.protocol.records import BatchHeader
from coordkit.serve import errors
from coordkit.serve.dataplane.transaction_index import CompletedTxn, read_end_txn_marker
from coordkit.store import MetadataStore
from coordkit.support import jsontext

#: Kafka's ``ProducerIdBlockZNode.path`` and block size.
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
BLOCK_SIZE = 1000
BLOCK_VERSION = 1
#: Batches remembered per producer for duplicate detection (Kafka's ``NUM_BATCHES_TO_RETAIN``).
BATCHES_KEPT = 5
NO_PRODUCER_ID = -1
#: Attribute bits of a batch: transactional, control.
TRANSACTIONAL = 0x10
CONTROL = 0x20
_MAX_SEQUENCE = 2**31 - 1
_CLAIM_ATTEMPTS = 50

log = logging.getLogger("coordkit.serve")


# -- producer ids -------------------------------------------------------------------------------


@attrs.frozen
class ProducerIdBlock:
    """Producer ids ``first..last`` (inclusive), claimed by broker ``broker``."""

    broker: int
    first: int
    last: int

    def encode(self) -> bytes:
        return json.dumps(
            {"version": BLOCK_VERSION, "broker": self.broker,
             "block_start": str(self.first), "block_end": str(self.last)},
            separators=(",", ":"),
        ).encode()  # fmt: skip

    @classmethod
    def decode(cls, path: str, data: bytes) -> ProducerIdBlock:
        try:
            obj = jsontext.loads(data)
            block = cls(_whole(obj["broker"]), _whole(obj["block_start"]), _whole(obj["block_end"]))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise LayoutError(path, f"not a producer id block ({exc})") from None
        if not 0 <= block.first <= block.last:
            raise LayoutError(path, f"producer id block {block.first}..{block.last} is empty")
        return block


def _whole(value: object) -> int:
    """A whole number written as a number or, as Kafka writes the block's ends, a string."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"{value!r} is not a whole number")
    return int(value)


def claim_block(store: MetadataStore, broker_id: int) -> ProducerIdBlock:
    """The next free block of producer ids, written to the store for ``broker_id``.

    :raises StoreError: the store is unreachable, or other brokers kept winning the race.
    :raises LayoutError: the node holds something else than a producer id block.
    """
    for _ in range(_CLAIM_ATTEMPTS):
        try:
            data, stat = store.get(PRODUCER_ID_BLOCK)
        except NoNodeError:
            block = ProducerIdBlock(broker_id, 0, BLOCK_SIZE - 1)
            try:
                store.create(PRODUCER_ID_BLOCK, block.encode())
            except NodeExistsError:
                continue  # another broker claimed the first block meanwhile
            return block
        if data:
            previous = ProducerIdBlock.decode(PRODUCER_ID_BLOCK, data)
            block = ProducerIdBlock(broker_id, previous.last + 1, previous.last + BLOCK_SIZE)
        else:
            # Kafka's brokers create the node empty at start (a persistent root); no block has
            # been handed out yet, so this is the first (Kafka's ZkProducerIdManager).
            block = ProducerIdBlock(broker_id, 0, BLOCK_SIZE - 1)
        try:
            store.set(PRODUCER_ID_BLOCK, block.encode(), version=stat.version)
        except BadVersionError:
            continue  # another broker claimed it: take the one after
        return block
    raise BadVersionError(
        f"no producer id block claimed in {_CLAIM_ATTEMPTS} attempts", path=PRODUCER_ID_BLOCK
    )


class ProducerIds:
    """One broker's supply of producer ids (thread safe: claims run off the event loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._block: ProducerIdBlock | None = None
        self._next = 0

    def next_id(self, store: MetadataStore, broker_id: int) -> int:
        with self._lock:
            if self._block is None or self._next > self._block.last:
                self._block = claim_block(store, broker_id)
                self._next = self._block.first
            self._next += 1
            return self._next - 1


# -- producer state per partition -----------------------------------------------------------------


@attrs.frozen
class BatchMetadata:
    """What a producer's batch was appended as: sequences and offsets."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerEntry:
    """One producer's epoch and its last batches, oldest first; the coordinator epoch of its
    last marker and the first offset of its open transaction (-1: none)."""

    __slots__ = ("batches", "coordinator_epoch", "current_txn_first_offset", "epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_KEPT)
        self.coordinator_epoch = -1
        self.current_txn_first_offset = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def update_epoch(self, epoch: int) -> None:
        """A new epoch forgets the old one's batches (Kafka's ``maybeUpdateProducerEpoch``)."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch


def last_sequence(header: BatchHeader) -> int:
    """The batch's last sequence number (sequences wrap from 2**31-1 to 0)."""
    return (header.base_sequence + header.last_offset_delta) % (_MAX_SEQUENCE + 1)


def _in_sequence(last: int, first: int) -> bool:
    return first == last + 1 or (first == 0 and last == _MAX_SEQUENCE)


class VerificationGuard:
    """The token of one verification of a producer's first transactional batch in a partition
    (Kafka's ``VerificationGuard``): equal only to itself."""

    __slots__ = ()


class ProducerStates:
    """The producer state of one partition's log."""

    def __init__(self) -> None:
        self._entries: dict[int, ProducerEntry] = {}
        #: Producers being verified with their coordinator (Kafka's ``verificationStates``).
        self._verifying: dict[int, VerificationGuard] = {}
        #: Open transactions: first offset → producer id (Kafka's ``ongoingTxns``).
        self._ongoing: dict[int, int] = {}
        #: Transactions a marker completed that the high watermark may not have passed yet:
        #: first offset → the marker's offset (Kafka's ``unreplicatedTxns``).
        self._unreplicated: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def entries(self) -> list[tuple[int, ProducerEntry]]:
        """Every producer with a batch in the log, by id (DescribeProducers)."""
        return sorted(self._entries.items())

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self._entries.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0

    def start_verification(self, producer_id: int) -> VerificationGuard | None:
        """The guard a leader verifies the producer's transactional batch under, ``None`` when
        the producer's transaction is open here already (nothing to verify: Kafka's
        ``maybeStartTransactionVerification``). A guard taken before is kept."""
        if self.has_ongoing_transaction(producer_id):
            return None
        guard = self._verifying.get(producer_id)
        if guard is None:
            guard = self._verifying[producer_id] = VerificationGuard()
        return guard

    def check(
        self,
        header: BatchHeader,
        pending: dict[int, tuple[int, int]],
        verified: VerificationGuard | None = None,
        *,
        verification: bool = False,
    ) -> int | BatchMetadata:
        """The verdict on a batch a leader is asked to append by a client: an error code
        (``NONE``: append it) or the metadata of the batch it duplicates. ``pending`` holds
        ``(epoch, last seq)`` of batches of the same request checked before it; this one is
        added when accepted. With ``verification`` a transactional batch opening a transaction
        needs the producer's current guard, ``verified``."""
        if header.attributes & CONTROL:
            return errors.INVALID_RECORD  # Kafka's LogValidator: clients write no markers
        producer_id = header.producer_id
        transactional = bool(header.attributes & TRANSACTIONAL)
        if producer_id == NO_PRODUCER_ID:
            return errors.INVALID_RECORD if transactional else errors.NONE
        if producer_id < 0 or header.base_sequence < 0 or header.producer_epoch < 0:
            return errors.INVALID_RECORD
        entry = self._entries.get(producer_id)
        first, last = header.base_sequence, last_sequence(header)
        if entry is not None and header.producer_epoch == entry.epoch:
            for batch in entry.batches:
                if (batch.first_seq, batch.last_seq) == (first, last):
                    return batch
        if (
            verification
            and transactional
            and not self.has_ongoing_transaction(producer_id)
            and (verified is None or self._verifying.get(producer_id) is not verified)
        ):
            # Not verified, or its transaction ended since (Kafka checks this before sequences).
            return errors.INVALID_TXN_STATE
        known = pending.get(producer_id)
        if known is None and entry is not None:
            known = (entry.epoch, entry.last_seq)
        if known is not None:
            epoch, last_seq = known
            if header.producer_epoch < epoch:
                return errors.INVALID_PRODUCER_EPOCH
            if header.producer_epoch > epoch:
                if first != 0:
                    return errors.OUT_OF_ORDER_SEQUENCE_NUMBER
            elif not _in_sequence(last_seq, first):
                return errors.OUT_OF_ORDER_SEQUENCE_NUMBER
        if entry is not None and entry.current_txn_first_offset >= 0 and not transactional:
            return errors.INVALID_TXN_STATE  # a plain write while its transaction is open
        pending[producer_id] = (header.producer_epoch, last)
        return errors.NONE

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int:
        """The verdict on an end-transaction marker a coordinator asks to append (Kafka's
        ``ProducerAppendInfo.appendEndTxnMarker``): an older producer epoch is
        INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED."""
        entry = self._entries.get(producer_id)
        if entry is None:
            return errors.NONE
        if producer_epoch < entry.epoch:
            return errors.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return errors.TRANSACTION_COORDINATOR_FENCED
        return errors.NONE

    def record(self, header: BatchHeader, batch: bytes | None = None) -> CompletedTxn | None:
        """Remember an appended batch (``header`` with its offsets assigned; ``batch``: its
        bytes, read for a control batch's marker). A marker that ends an open transaction
        returns it completed."""
        if header.attributes & TRANSACTIONAL:
            # The transaction is open here now, or a marker ended it: the guard has done its work.
            self._verifying.pop(header.producer_id, None)
        if header.attributes & CONTROL:
            return self._record_marker(header, batch)
        if header.producer_id < 0 or header.base_sequence < 0:
            return None
        entry = self._entries.get(header.producer_id)
        if entry is None:
            entry = self._entries[header.producer_id] = ProducerEntry(header.producer_epoch)
        elif header.producer_epoch < entry.epoch:
            return None  # an old epoch's batch replayed by a follower: the newer state stands
        entry.update_epoch(header.producer_epoch)
        entry.batches.append(
            BatchMetadata(
                first_seq=header.base_sequence,
                last_seq=last_sequence(header),
                first_offset=header.base_offset,
                last_offset=header.last_offset,
                timestamp=header.max_timestamp,
            )
        )
        if header.attributes & TRANSACTIONAL and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = header.base_offset
            self._ongoing[header.base_offset] = header.producer_id
        return None

    def _record_marker(self, header: BatchHeader, batch: bytes | None) -> CompletedTxn | None:
        marker = read_end_txn_marker(batch) if batch is not None else None
        if marker is None or header.producer_id < 0:
            return None  # a marker the cleaner emptied: its transaction is gone too
        entry = self._entries.get(header.producer_id)
        if entry is None:
            entry = self._entries[header.producer_id] = ProducerEntry(header.producer_epoch)
        completed = None
        first = entry.current_txn_first_offset
        if first >= 0:
            # Kafka's lastStableOffset(completedTxn): the next open transaction of another
            # producer, else the offset after this marker.
            others = [offset for offset, owner in self._ongoing.items()
                      if owner != header.producer_id]  # fmt: skip
            completed = CompletedTxn(
                producer_id=header.producer_id,
                first_offset=first,
                last_offset=header.base_offset,
                aborted=not marker.commit,
                last_stable_offset=min(others) if others else header.base_offset + 1,
            )
            self._ongoing.pop(first, None)
            self._unreplicated[first] = header.base_offset
        entry.update_epoch(header.producer_epoch)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.current_txn_first_offset = -1
        return completed

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction that is open, or whose marker is at or
        past ``high_watermark``; ``None`` when there is none (Kafka's
        ``firstUnstableOffset`` after ``onHighWatermarkUpdated``)."""
        for first, marker in list(self._unreplicated.items()):
            if marker < high_watermark:
                del self._unreplicated[first]
        unstable = [*self._ongoing, *self._unreplicated]
        return min(unstable) if unstable else None

    def open_transactions(self) -> list[tuple[int, int]]:
        """``(producer id, first offset)`` of every open transaction, oldest first."""
        return sorted(((producer, first) for first, producer in self._ongoing.items()),
                      key=lambda pair: pair[1])  # fmt: skip

    def rebuild(self, batches: Iterable[tuple[BatchHeader, bytes]]) -> None:
        """Start over from a log's remaining batches (after truncation)."""
        self._entries.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        for header, batch in batches:
            self.record(header, batch)
