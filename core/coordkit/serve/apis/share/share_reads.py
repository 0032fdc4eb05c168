"""What the share-partition apis read of a broker: a log's batches from an offset (a share fetch
acquires whole batches), the aborted ones among them (a read_committed share fetch archives them),
where a share partition without state starts (``share.auto.offset.reset``), and a group's share
settings (its group configs over the broker's).
"""

from __future__ import annotations

import bisect
import re
import struct
import time
from collections.abc import Mapping, Sequence

import attrs

from coordkit.engine.states import TP
from coordkit.protocol import records
from coordkit.protocol.records import BatchHeader
from coordkit.serve.apis.fetch import high_watermark
from coordkit.serve.context import BrokerContext
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.log_transactions import aborted_transactions
from coordkit.serve.dataplane.share.partition_manager import ShareSettings
from coordkit.serve.dataplane.share.share_partition import SharePartitionConfig

#: Kafka's group config names (``GroupConfig``) for the share settings.
RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"
AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"

#: A batch's attribute bits (Kafka's ``DefaultRecordBatch``).
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
#: A control record's key: its version and type (0 ABORT, Kafka's ``ControlRecordType``).
_CONTROL_KEY = struct.Struct(">hh")
_ABORT = 0

#: Java's ``Duration.parse`` text (``PnDTnHnMn.nS``), as ``by_duration:`` takes it.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:\.\d{1,9})?)S)?)?",
    re.IGNORECASE,
)


@attrs.frozen
class LogBatch:
    first_offset: int
    last_offset: int
    data: bytes
    header: BatchHeader


def log_batches(
    partition_log: PartitionLog, offset: int, upto: int, max_bytes: int
) -> list[LogBatch]:
    """Whole batches from the one holding ``offset``, below ``upto`` (the high watermark), at
    most ``max_bytes`` of them but at least one."""
    if not partition_log.log_start <= offset < min(upto, partition_log.log_end):
        return []
    segments = partition_log.segments
    number = max(bisect.bisect_right([s.base_offset for s in segments], offset) - 1, 0)
    found: list[LogBatch] = []
    size = 0
    slot = segments[number].slot_of(offset)
    for segment in segments[number:]:
        for position in range(slot, len(segment.batches)):
            header = segment.headers[position]
            if header.last_offset >= upto:
                return found
            data = segment.batches[position]
            if found and size + len(data) > max_bytes:
                return found
            found.append(LogBatch(header.base_offset, header.last_offset, data, header))
            size += len(data)
        slot = 0
    return found


def _aborts(batch: LogBatch) -> bool:
    """Whether ``batch`` is a transaction's ABORT marker (Kafka's ``containsAbortMarker``)."""
    if not batch.header.attributes & _CONTROL:
        return False
    decoded = records.decode_batch(batch.data, verify_crc=False)
    key = decoded.records[0].key if decoded.records else None
    return (
        key is not None
        and len(key) >= _CONTROL_KEY.size
        and (_CONTROL_KEY.unpack_from(key)[1] == _ABORT)
    )


def aborted_batches(partition_log: PartitionLog, batches: Sequence[LogBatch]) -> list[LogBatch]:
    """The batches of aborted transactions among ``batches`` (read in log order), as Kafka's
    ``SharePartition.fetchAbortedTransactionRecordBatches`` finds them: a producer's batches
    from the first offset of each of its aborted transactions the log lists up to the
    transaction's ABORT marker. Control batches are none of them."""
    if not batches:
        return []
    listed = sorted(
        aborted_transactions(partition_log, batches[0].first_offset, batches[-1].last_offset + 1),
        key=lambda aborted: aborted.first_offset,
        reverse=True,
    )
    aborting: set[int] = set()
    found: list[LogBatch] = []
    for batch in batches:
        producer_id = batch.header.producer_id
        if producer_id < 0:
            continue
        while listed and listed[-1].first_offset <= batch.last_offset:
            aborting.add(listed.pop().producer_id)
        if _aborts(batch):
            aborting.discard(producer_id)
        elif batch.header.attributes & _TRANSACTIONAL and producer_id in aborting:
            found.append(batch)
    return found


def duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO-8601 duration as Java's ``Duration.parse`` reads it (``None``:
    not one)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.group(i) for i in range(2, 6)):
        return None
    sign = -1 if match.group(1) == "-" else 1
    days, hours, minutes = (int(match.group(i) or 0) for i in (2, 3, 4))
    seconds = float(match.group(5) or 0)
    return sign * round(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def initial_offset(ctx: BrokerContext, tp: TP, reset: str) -> int:
    """Where a share partition of ``tp`` without state starts: the high watermark (``latest``),
    the log start (``earliest``) or the first record at or after now minus the duration
    (``by_duration:<duration>``, the high watermark when there is none), as Kafka's
    ``SharePartition`` asks its log."""
    partition_log = ctx.logs.get(tp)
    hw = high_watermark(ctx, tp, partition_log)
    kind = reset.strip().lower()
    if kind == "earliest":
        return partition_log.log_start
    if kind.startswith("by_duration:"):
        ms = duration_ms(reset.split(":", 1)[1]) or 0
        offset, _ = partition_log.offset_for(int(time.time() * 1000) - ms, upto=hw)
        return offset if offset >= 0 else hw
    return hw


def _int(overrides: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(overrides[name].strip())
    except (KeyError, ValueError):
        return default


def group_overrides(ctx: BrokerContext, group_id: str) -> Mapping[str, str]:
    """The group's configs (Kafka 4's GROUP resource), where the engine reads them."""
    coordinator = getattr(ctx.broker, "group_coordinator", None)
    configs = getattr(coordinator, "group_configs", None)
    if configs is None:
        return {}
    found: Mapping[str, str] = configs.overrides(group_id)
    return found


def reads_committed(ctx: BrokerContext, group_id: str) -> bool:
    """Whether ``group_id``'s share fetches read only below the last stable offset and never
    deliver aborted records (its ``share.isolation.level``; Kafka 4.4's default
    read_uncommitted)."""
    level = group_overrides(ctx, group_id).get(ISOLATION_LEVEL, "read_uncommitted")
    return level.strip().lower() == "read_committed"


def group_share_settings(ctx: BrokerContext, group_id: str) -> tuple[SharePartitionConfig, str]:
    """``group_id``'s share-partition settings and ``share.auto.offset.reset``: its group
    configs over the broker's."""
    broker: ShareSettings = ctx.settings.share
    overrides = group_overrides(ctx, group_id)
    if not overrides:
        return broker.partition, broker.auto_offset_reset
    config = SharePartitionConfig(
        delivery_count_limit=_int(overrides, DELIVERY_COUNT_LIMIT,
                                  broker.partition.delivery_count_limit),
        record_lock_duration_ms=_int(overrides, RECORD_LOCK_DURATION_MS,
                                     broker.partition.record_lock_duration_ms),
        max_record_locks=_int(overrides, PARTITION_MAX_RECORD_LOCKS,
                              broker.partition.max_record_locks),
    )  # fmt: skip
    return config, overrides.get(AUTO_OFFSET_RESET, broker.auto_offset_reset)
