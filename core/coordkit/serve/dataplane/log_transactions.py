"""What a partition's log answers about transactions (Kafka's ``UnifiedLog`` and ``LocalLog``
parts of them): the last stable offset, the aborted transactions a read_committed fetch must
list, and the end-transaction markers a coordinator's WriteTxnMarkers appends.

* The **last stable offset** (LSO) is the high watermark, or the first offset of the oldest
  transaction that is open or whose marker the high watermark has not passed, if that is lower
  (Kafka's ``lastStableOffset``): read_committed consumers read below it.
* A read_committed fetch lists each **aborted transaction** overlapping what it read: from the
  segment holding the fetch offset on, the transaction indexes' entries whose marker is at or
  past the fetch offset and whose first offset is below the read's upper bound, until an entry's
  last stable offset reaches that bound (Kafka's ``collectAbortedTransactions``). The upper bound
  is Kafka's: the first offset index entry at or past the end of the bytes read in the first
  segment, else the next segment's base offset (or the log end); a read that goes on into later
  segments (Kafka's reads stop at a segment's end, coordkit's do not) reaches at least the end of
  its last batch.
* A **marker** is checked against the producer's state (an older producer epoch:
  INVALID_PRODUCER_EPOCH; an older coordinator epoch: TRANSACTION_COORDINATOR_FENCED) and appended
  as a control batch at the log end.
"""

from __future__ import annotations

import bisect

from coordkit.protocol import records
from coordkit.serve import errors
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.transaction_index import AbortedTxn, EndTxnMarker, end_txn_marker


def last_stable_offset(partition_log: PartitionLog, high_watermark: int) -> int:
    """The log's last stable offset below ``high_watermark``."""
    unstable = partition_log.producers.first_unstable_offset(high_watermark)
    return high_watermark if unstable is None else min(unstable, high_watermark)


def _segment_number(partition_log: PartitionLog, offset: int) -> int:
    segments = partition_log.segments
    return max(bisect.bisect_right(segments, offset, key=lambda s: s.base_offset) - 1, 0)


def fetch_upper_bound(partition_log: PartitionLog, fetch_offset: int, data: bytes) -> int:
    """The exclusive upper bound of the offsets a read of ``data`` from ``fetch_offset`` covers,
    for the aborted transaction search (Kafka's ``addAbortedTransactions``)."""
    segments = partition_log.segments
    number = _segment_number(partition_log, fetch_offset)
    segment = segments[number]
    slot = segment.slot_of(fetch_offset)
    start = segment.positions[slot] if slot < len(segment.positions) else segment.size
    target = start + len(data)
    index = segment.offset_index
    entry = bisect.bisect_left(index.positions, target)
    if entry < len(index.offsets):
        bound = index.offsets[entry]
    elif number + 1 < len(segments):
        bound = segments[number + 1].base_offset
    else:
        bound = partition_log.log_end
    if target > segment.size and data:
        # The read went on into later segments: at least the end of its last batch.
        *_, (last, _raw) = records.iter_batches(data, verify_crc=False)
        bound = max(bound, last.last_offset + 1)
    return bound


def aborted_transactions(
    partition_log: PartitionLog, fetch_offset: int, upper_bound: int
) -> list[AbortedTxn]:
    """The aborted transactions overlapping ``[fetch_offset, upper_bound)``, as the transaction
    indexes list them from the segment holding ``fetch_offset`` on."""
    found: list[AbortedTxn] = []
    segments = partition_log.segments
    for segment in segments[_segment_number(partition_log, fetch_offset) :]:
        entries, complete = segment.txn_index.collect(fetch_offset, upper_bound)
        found += entries
        if complete:
            break
    return found


def append_end_txn_marker(
    partition_log: PartitionLog,
    producer_id: int,
    producer_epoch: int,
    marker: EndTxnMarker,
    leader_epoch: int,
) -> tuple[int, int]:
    """Append a coordinator's marker for ``producer_id`` as the leader of ``leader_epoch``:
    ``(error code, the marker's offset or -1)``; a refused marker appends nothing."""
    refused = partition_log.producers.check_marker(producer_id, producer_epoch,
                                                   marker.coordinator_epoch)  # fmt: skip
    if refused:
        return refused, -1
    batch = end_txn_marker(producer_id, producer_epoch, marker, partition_log.clock())
    return errors.NONE, partition_log.append_marker(batch, leader_epoch)
