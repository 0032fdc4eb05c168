"""What the share-partition apis read of a broker: a log's batches from an offset (a share fetch
acquires whole batches), where a share partition without state starts
(``share.auto.offset.reset``), and a group's share settings (its group configs over the broker's).
"""

from __future__ import annotations

import bisect
import re
import time
from collections.abc import Mapping

import attrs

from coordkit.engine.states import TP
from coordkit.serve.apis.fetch import high_watermark
from coordkit.serve.context import BrokerContext
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.share.partition_manager import ShareSettings
from coordkit.serve.dataplane.share.share_partition import SharePartitionConfig

#: Kafka's group config names (``GroupConfig``) for the share settings.
RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"
AUTO_OFFSET_RESET = "share.auto.offset.reset"

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
            found.append(LogBatch(header.base_offset, header.last_offset, data))
            size += len(data)
        slot = 0
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
