"""Transactions in a partition's log: the end-transaction markers a coordinator writes (Kafka's
control batches) and each segment's aborted transaction index (``.txnindex``), as Kafka keeps
them.

* A **marker** is a control batch (attributes: transactional and control) of the producer's id
  and epoch holding one record: key ``version int16 = 0, type int16`` (0 abort, 1 commit; Kafka's
  ``ControlRecordType``), value ``version int16 = 0, coordinator epoch int32`` (Kafka's
  ``EndTxnMarker``). :func:`end_txn_marker` makes one, :func:`read_end_txn_marker` reads one.
* A transaction is **completed** by its marker (:class:`CompletedTxn`: the producer, the
  transaction's first offset, the marker's offset, aborted or not).
* An aborted one is appended to the **transaction index** of the segment its marker went to
  (:class:`TransactionIndex`): entries of 34 bytes, ``version int16 = 0, producer id int64,
  first offset int64, last offset int64, last stable offset int64`` (Kafka's ``AbortedTxn``),
  big-endian, in the order the markers came. A read_committed fetch lists the aborted
  transactions that overlap what it read (:meth:`TransactionIndex.collect`, Kafka's
  ``collectAbortedTxns``), so the consumer drops their records.

Kafka creates a ``.txnindex`` file at the first entry, so a segment without an aborted
transaction has none.
"""

from __future__ import annotations

import struct

import attrs

from coordkit.protocol import records
from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.wire import Buffer

#: Kafka's ``ControlRecordType``: the key's type of an end-transaction marker.
ABORT = 0
COMMIT = 1
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")
#: Kafka's ``AbortedTxn``.
ABORTED_TXN_VERSION = 0
_ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ABORTED_TXN.size


class CorruptTransactionIndexError(ValueError):
    """A ``.txnindex`` that is not whole entries of version 0 (Kafka's
    ``CorruptIndexException``)."""


@attrs.frozen
class EndTxnMarker:
    """What a marker says: committed or aborted, by which coordinator epoch."""

    commit: bool
    coordinator_epoch: int


def end_txn_marker(
    producer_id: int, producer_epoch: int, marker: EndTxnMarker, timestamp: int
) -> bytes:
    """A control batch holding ``marker`` (base offset 0: the leader assigns its offset)."""
    key = _CONTROL_KEY.pack(CONTROL_KEY_VERSION, COMMIT if marker.commit else ABORT)
    value = _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, marker.coordinator_epoch)
    batch = records.new_batch([(key, value)], timestamp=timestamp, producer_id=producer_id,
                              producer_epoch=producer_epoch, is_transactional=True)  # fmt: skip
    return records.encode_batch(attrs.evolve(batch, is_control=True))


def read_end_txn_marker(raw: Buffer) -> EndTxnMarker | None:
    """The marker a control batch holds; ``None`` for a batch the cleaner emptied (Kafka reads
    such a batch as no marker).

    :raises ProtocolError: a record that is not a version-0 end-transaction marker.
    """
    batch = records.decode_batch(raw, verify_crc=False)
    if not batch.records:
        return None
    record = batch.records[0]
    key, value = record.key or b"", record.value or b""
    if len(key) < _CONTROL_KEY.size or len(value) < _END_TXN_VALUE.size:
        raise ProtocolError(
            f"control record at offset {record.offset}: key or value too short for an "
            "end-transaction marker",
            kind="record batch",
        )
    version, kind = _CONTROL_KEY.unpack_from(key)
    value_version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    if version != CONTROL_KEY_VERSION or kind not in (ABORT, COMMIT) or value_version != 0:
        raise ProtocolError(
            f"control record at offset {record.offset}: key version {version} type {kind}, "
            f"value version {value_version} is not an end-transaction marker",
            kind="record batch",
        )
    return EndTxnMarker(commit=kind == COMMIT, coordinator_epoch=coordinator_epoch)


@attrs.frozen
class CompletedTxn:
    """A transaction its marker ended: ``first_offset`` its first record, ``last_offset`` the
    marker's offset; ``last_stable_offset`` the log's once it ended (the first offset of the
    next open transaction of another producer, else the offset after the marker)."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool
    last_stable_offset: int

    def as_aborted(self) -> AbortedTxn:
        return AbortedTxn(self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)  # fmt: skip


@attrs.frozen
class AbortedTxn:
    """One entry of a transaction index. ``last_stable_offset``: the log's last stable offset
    once the transaction was aborted (the first offset of the next open transaction, else the
    offset after its marker), which ends a search early (Kafka's ``TxnIndexSearchResult``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ABORTED_TXN.pack(ABORTED_TXN_VERSION, self.producer_id, self.first_offset,
                                 self.last_offset, self.last_stable_offset)  # fmt: skip


class TransactionIndex:
    """A segment's aborted transactions, in the order their markers were appended."""

    def __init__(self, entries: list[AbortedTxn] | None = None) -> None:
        self.entries: list[AbortedTxn] = entries or []

    def __len__(self) -> int:
        return len(self.entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TransactionIndex) and self.entries == other.entries

    __hash__ = None  # type: ignore[assignment]

    def append(self, entry: AbortedTxn) -> None:
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {entry.last_offset} is not past the last one "
                f"indexed ({self.entries[-1].last_offset})"
            )
        self.entries.append(entry)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping ``[fetch_offset, upper_bound)``, and whether the
        search is complete (an entry's last stable offset reached ``upper_bound``: no later
        segment can hold one that overlaps)."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the transactions whose marker is at or past ``offset`` (Kafka's
        ``TransactionIndex.truncateTo``)."""
        self.entries = [entry for entry in self.entries if entry.last_offset < offset]

    def entry_bytes(self, start: int = 0) -> bytes:
        return b"".join(entry.encode() for entry in self.entries[start:])

    @classmethod
    def parse(cls, data: bytes, where: str) -> TransactionIndex:
        """The entries of a ``.txnindex`` file.

        :raises CorruptTransactionIndexError: not whole entries, or an entry of another version.
        """
        if len(data) % ABORTED_TXN_SIZE:
            raise CorruptTransactionIndexError(
                f"{where}: {len(data)} bytes are not whole {ABORTED_TXN_SIZE}-byte entries"
            )
        entries = []
        for at in range(0, len(data), ABORTED_TXN_SIZE):
            version, *fields = _ABORTED_TXN.unpack_from(data, at)
            if version != ABORTED_TXN_VERSION:
                raise CorruptTransactionIndexError(
                    f"{where}: entry at byte {at} has version {version}, expected 0"
                )
            entries.append(AbortedTxn(*fields))
        return cls(entries)
