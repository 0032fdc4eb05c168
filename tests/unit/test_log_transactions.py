"""A partition log's transactions (issue 38, the log side): transactional batches open a
producer's transaction, markers complete it, the last stable offset stops at the oldest open one,
aborted transactions are indexed per segment as Kafka's ``.txnindex`` and listed for a
read_committed read; the state is rebuilt after truncation and when a log directory is loaded,
and a follower copying the leader's batches (markers too) ends with the same state."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordkit.protocol import records
from coordkit.serve import errors
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.log_config import LogConfig
from coordkit.serve.dataplane.log_transactions import (
    aborted_transactions,
    append_end_txn_marker,
    fetch_upper_bound,
    last_stable_offset,
)
from coordkit.serve.dataplane.logdir import LogDirectory
from coordkit.serve.dataplane.transaction_index import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    CorruptTransactionIndexError,
    EndTxnMarker,
    TransactionIndex,
    read_end_txn_marker,
)

EPOCH = 3
TP = ("payments", 0)


def _batch(producer_id: int, sequence: int, *values: bytes, transactional: bool = True) -> bytes:
    batch = records.new_batch([(None, v) for v in values], timestamp=1_700_000_000_000,
                              producer_id=producer_id, producer_epoch=0,
                              base_sequence=sequence, is_transactional=transactional)  # fmt: skip
    return records.encode_batch(batch)


def _end(log: PartitionLog, producer_id: int, *, commit: bool, coordinator_epoch: int = 0) -> int:
    error, offset = append_end_txn_marker(log, producer_id, 0,
                                          EndTxnMarker(commit, coordinator_epoch), EPOCH)  # fmt: skip
    assert error == errors.NONE
    return offset


def test_a_marker_is_kafkas_control_batch() -> None:
    log = PartitionLog()
    log.append(_batch(7, 0, b"a"), EPOCH)
    offset = _end(log, 7, commit=True, coordinator_epoch=5)
    batch = records.decode_batch(log.read(offset, 1 << 20))
    assert (batch.is_control, batch.is_transactional) == (True, True)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 0, -1)
    # Kafka's ControlRecordType key (version 0, COMMIT = 1) and EndTxnMarker value (version 0,
    # coordinator epoch).
    assert batch.records[0].key == b"\x00\x00\x00\x01"
    assert batch.records[0].value == b"\x00\x00\x00\x00\x00\x05"
    assert read_end_txn_marker(log.read(offset, 1 << 20)) == EndTxnMarker(True, 5)


def test_the_last_stable_offset_waits_for_the_oldest_open_transaction() -> None:
    log = PartitionLog()
    log.append(_batch(-1, -1, b"plain", transactional=False), EPOCH)  # offset 0
    log.append(_batch(7, 0, b"a", b"b"), EPOCH)  # 1-2, producer 7 opens
    log.append(_batch(8, 0, b"c"), EPOCH)  # 3, producer 8 opens
    assert last_stable_offset(log, log.log_end) == 1
    assert last_stable_offset(log, 1) == 1  # never past the high watermark
    commit = _end(log, 7, commit=True)  # 4
    # Decided, but the marker is not below the high watermark yet: still unstable.
    assert last_stable_offset(log, commit) == 1
    assert last_stable_offset(log, log.log_end) == 3  # producer 8's transaction is open
    _end(log, 8, commit=False)  # 5
    assert last_stable_offset(log, log.log_end) == log.log_end == 6
    assert log.producers.open_transactions() == []


def test_aborted_transactions_are_indexed_as_kafka_writes_txnindex() -> None:
    log = PartitionLog()
    log.append(_batch(7, 0, b"a"), EPOCH)  # 0
    log.append(_batch(8, 0, b"b"), EPOCH)  # 1
    abort = _end(log, 7, commit=False)  # 2: producer 8's transaction is still open
    _end(log, 8, commit=True)  # 3
    entries = log.active.txn_index.entries
    # Kafka's lastStableOffset(completedTxn): the next open transaction of another producer.
    assert entries == [AbortedTxn(7, 0, abort, 1)]
    assert log.active.txn_index.entry_bytes() == (
        b"\x00\x00" + (7).to_bytes(8, "big") + (0).to_bytes(8, "big")
        + (2).to_bytes(8, "big") + (1).to_bytes(8, "big")
    )  # fmt: skip
    assert len(log.active.txn_index.entry_bytes()) == ABORTED_TXN_SIZE
    assert aborted_transactions(log, 0, log.log_end) == entries
    assert aborted_transactions(log, 3, log.log_end) == []  # ended before the fetch offset


def test_a_plain_write_inside_a_transaction_and_a_clients_marker_are_refused() -> None:
    log = PartitionLog()
    log.append(_batch(7, 0, b"a"), EPOCH)
    refused = log.append(_batch(7, 1, b"b", transactional=False), EPOCH)
    assert refused.error == errors.INVALID_TXN_STATE
    marker = records.encode_batch(
        records.RecordBatch(
            base_offset=0,
            records=(records.Record(0, 0, b"\0\0\0\1", None),),
            base_timestamp=0,
            max_timestamp=0,
            last_offset_delta=0,
            is_transactional=True,
            is_control=True,
            producer_id=7,
            producer_epoch=0,
            base_sequence=1,
        )
    )
    assert log.append(marker, EPOCH).error == errors.INVALID_RECORD
    assert log.log_end == 1


def test_markers_of_an_older_producer_or_coordinator_epoch_are_fenced() -> None:
    log = PartitionLog()
    log.append(_batch(7, 0, b"a"), EPOCH)
    _end(log, 7, commit=True, coordinator_epoch=4)
    stale = append_end_txn_marker(log, 7, 0, EndTxnMarker(True, 3), EPOCH)
    assert stale == (errors.TRANSACTION_COORDINATOR_FENCED, -1)
    bumped = records.encode_batch(records.new_batch([(None, b"b")], producer_id=7,
                                                    producer_epoch=1, base_sequence=0))  # fmt: skip
    assert log.append(bumped, EPOCH).error == errors.NONE
    assert append_end_txn_marker(log, 7, 0, EndTxnMarker(False, 4), EPOCH)[0] == (
        errors.INVALID_PRODUCER_EPOCH
    )


def test_truncation_reopens_the_transaction_its_marker_ended() -> None:
    log = PartitionLog()
    log.append(_batch(7, 0, b"a"), EPOCH)
    abort = _end(log, 7, commit=False)
    assert last_stable_offset(log, log.log_end) == log.log_end
    log.truncate_to(abort)
    assert log.active.txn_index.entries == []
    assert log.producers.open_transactions() == [(7, 0)]
    assert last_stable_offset(log, log.log_end) == 0


def test_a_follower_copying_the_batches_keeps_the_same_state() -> None:
    leader = PartitionLog()
    leader.append(_batch(7, 0, b"a"), EPOCH)
    leader.append(_batch(8, 0, b"b"), EPOCH)
    _end(leader, 7, commit=False)
    follower = PartitionLog()
    follower.append_copied(leader.read(0, 1 << 20))
    assert follower.active.txn_index == leader.active.txn_index
    assert follower.producers.open_transactions() == [(8, 1)]
    assert last_stable_offset(follower, follower.log_end) == 1


def test_the_upper_bound_of_a_read_is_kafkas() -> None:
    log = PartitionLog(config=LogConfig(index_interval_bytes=1))
    for sequence in range(4):
        log.append(_batch(7, sequence, b"x" * 50), EPOCH)
    _end(log, 7, commit=False)
    one = log.read(0, 1, at_least_one=True)
    # The first index entry at or past the end of what was read: the second batch's offset.
    assert fetch_upper_bound(log, 0, one) == 1
    everything = log.read(0, 1 << 20)
    assert fetch_upper_bound(log, 0, everything) == log.log_end
    assert aborted_transactions(log, 0, 1) == [AbortedTxn(7, 0, 4, 5)]


def test_a_log_directory_keeps_txnindex_files_and_rebuilds_open_transactions(
    tmp_path: Path,
) -> None:
    directory = LogDirectory(tmp_path)
    directory.claim(1, "c" * 22)
    files = directory.segment(TP)
    log = PartitionLog(files, LogConfig(segment_bytes=200))
    log.append(_batch(7, 0, b"a" * 100), EPOCH)
    log.append(_batch(8, 0, b"b" * 100), EPOCH)
    abort = _end(log, 7, commit=False)
    log.append(_batch(9, 0, b"c"), EPOCH)  # left open
    marker_segment = next(s for s in log.segments if s.base_offset <= abort < s.next_offset)
    name = files.directory / f"{marker_segment.base_offset:020d}.txnindex"
    assert TransactionIndex.parse(name.read_bytes(), str(name)).entries == [
        AbortedTxn(7, 0, abort, 1)
    ]
    assert not any(
        (files.directory / f"{s.base_offset:020d}.txnindex").exists()
        for s in log.segments
        if s is not marker_segment
    )
    directory.close()

    again = LogDirectory(tmp_path)
    again.claim(1, "c" * 22)
    stored = again.stored()[TP]
    loaded = PartitionLog.loaded(stored, again.segment(TP))
    assert loaded.producers.open_transactions() == [(8, 1), (9, 3)]
    assert aborted_transactions(loaded, 0, loaded.log_end) == [AbortedTxn(7, 0, abort, 1)]
    assert last_stable_offset(loaded, loaded.log_end) == 1
    again.close()


def test_a_corrupt_txnindex_is_refused() -> None:
    with pytest.raises(CorruptTransactionIndexError, match="whole 34-byte entries"):
        TransactionIndex.parse(b"\x00" * 33, "x.txnindex")
    with pytest.raises(CorruptTransactionIndexError, match="version 1"):
        TransactionIndex.parse(b"\x00\x01" + b"\x00" * 32, "x.txnindex")
