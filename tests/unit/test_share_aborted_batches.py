"""Which batches a read_committed share fetch archives (``share_reads.aborted_batches``), on a
partition log written as producers and the coordinator's markers write it: Kafka's
``SharePartition.fetchAbortedTransactionRecordBatches`` rules — a producer's transactional
batches from the first offset of its aborted transaction up to its ABORT marker; committed
transactions, plain batches and the markers themselves are none of them."""

from __future__ import annotations

from coordkit.protocol import records
from coordkit.serve import errors
from coordkit.serve.apis.share.share_reads import aborted_batches, log_batches
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.log_transactions import append_end_txn_marker
from coordkit.serve.dataplane.transaction_index import EndTxnMarker

EPOCH = 1


def _batch(producer_id: int, sequence: int, *values: bytes, transactional: bool = True) -> bytes:
    batch = records.new_batch([(None, v) for v in values], timestamp=1_700_000_000_000,
                              producer_id=producer_id, producer_epoch=0,
                              base_sequence=sequence, is_transactional=transactional)  # fmt: skip
    return records.encode_batch(batch)


def _end(log: PartitionLog, producer_id: int, *, commit: bool) -> None:
    error, _ = append_end_txn_marker(log, producer_id, 0, EndTxnMarker(commit, 0), EPOCH)
    assert error == errors.NONE


def _aborted(log: PartitionLog, offset: int = 0) -> list[tuple[int, int]]:
    batches = log_batches(log, offset, log.log_end, 1 << 20)
    return [(b.first_offset, b.last_offset) for b in aborted_batches(log, batches)]


def test_aborted_transactions_batches_and_no_others() -> None:
    log = PartitionLog()
    log.append(_batch(-1, -1, b"plain", transactional=False), EPOCH)  # 0
    log.append(_batch(7, 0, b"a", b"b"), EPOCH)  # 1-2: producer 7, to be aborted
    log.append(_batch(8, 0, b"c"), EPOCH)  # 3: producer 8, to be committed
    log.append(_batch(7, 2, b"d"), EPOCH)  # 4
    _end(log, 8, commit=True)  # 5
    _end(log, 7, commit=False)  # 6
    log.append(_batch(7, 3, b"e"), EPOCH)  # 7: producer 7's next transaction, committed
    _end(log, 7, commit=True)  # 8
    assert _aborted(log) == [(1, 2), (4, 4)]
    # From inside the aborted transaction: the log lists it all the same.
    assert _aborted(log, 4) == [(4, 4)]
    assert _aborted(log, 5) == []


def test_nothing_is_aborted_without_an_aborted_transaction() -> None:
    log = PartitionLog()
    log.append(_batch(7, 0, b"a"), EPOCH)
    _end(log, 7, commit=True)
    log.append(_batch(-1, -1, b"plain", transactional=False), EPOCH)
    assert _aborted(log) == []
    assert aborted_batches(log, []) == []
