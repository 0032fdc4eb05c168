"""What a partition's log is configured with (Kafka's ``LogConfig``): when its active segment
rolls, how long and how large it is kept, how often it is fsynced and how dense its indexes are.

A broker's defaults come from its configs (``--config log.segment.bytes=...``, Kafka's names, see
:mod:`coordkit.serve.broker_config`); a topic's own configs (``segment.bytes``, ``retention.ms``,
... in the store's topic config node) override them where :class:`BrokerLogs
<coordkit.serve.dataplane.log.BrokerLogs>` is given a per-topic lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from coordkit.serve.dataplane.index import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_MAX_INDEX_SIZE

INT64_MAX = 2**63 - 1
SEVEN_DAYS_MS = 7 * 24 * 3_600_000
DEFAULT_SEGMENT_BYTES = 1 << 30


@attrs.frozen
class LogConfig:
    """One log's settings, Kafka's topic config names in the comments, Kafka's defaults."""

    #: ``segment.bytes``: a segment does not grow past it.
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    #: ``segment.ms``: a segment whose first batch is this much older than a new one rolls.
    segment_ms: int = SEVEN_DAYS_MS
    #: ``retention.ms``: a segment whose newest record is older is deleted (-1: never).
    retention_ms: int = SEVEN_DAYS_MS
    #: ``retention.bytes``: the oldest segments go while the log is larger (-1: no limit).
    retention_bytes: int = -1
    #: ``flush.messages`` and ``flush.ms``: fsync after so many records or milliseconds
    #: (Kafka's defaults: never; the operating system writes).
    flush_messages: int = INT64_MAX
    flush_ms: int = INT64_MAX
    #: ``index.interval.bytes`` and ``segment.index.bytes``.
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    max_index_size: int = DEFAULT_MAX_INDEX_SIZE
    #: ``cleanup.policy`` includes ``delete`` (retention by time and size applies).
    delete: bool = True
    #: ``cleanup.policy`` includes ``compact`` (the log cleaner keeps the newest record per key).
    compact: bool = False
    #: ``delete.retention.ms``: how long a cleaned tombstone stays (Kafka's delete horizon).
    delete_retention_ms: int = 86_400_000
    #: ``min.cleanable.dirty.ratio``: the dirty share of a log at which it is cleaned.
    min_cleanable_ratio: float = 0.5
    #: ``min.compaction.lag.ms`` and ``max.compaction.lag.ms``.
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = INT64_MAX
    #: ``message.timestamp.type`` is ``LogAppendTime``: the leader stamps each batch it appends.
    log_append_time: bool = False
    #: ``compression.type``: the codec the leader keeps batches in (``None``: ``producer``, the
    #: producer's own).
    compression: str | None = None

    @classmethod
    def of(cls, value: Callable[[str], Any], base: LogConfig | None = None) -> LogConfig:
        """A topic's config from ``value`` (a lookup by Kafka's topic config names, such as
        :meth:`coordkit.serve.topic_configs.TopicConfigs.value` for one topic); a name it
        does not know (``KeyError``) keeps ``base``'s value."""
        base = base or cls()
        fields = {
            "segment_bytes": "segment.bytes",
            "segment_ms": "segment.ms",
            "retention_ms": "retention.ms",
            "retention_bytes": "retention.bytes",
            "flush_messages": "flush.messages",
            "flush_ms": "flush.ms",
            "index_interval_bytes": "index.interval.bytes",
            "max_index_size": "segment.index.bytes",
            "delete_retention_ms": "delete.retention.ms",
            "min_compaction_lag_ms": "min.compaction.lag.ms",
            "max_compaction_lag_ms": "max.compaction.lag.ms",
        }
        found: dict[str, Any] = {}
        for field, name in fields.items():
            try:
                found[field] = int(value(name))
            except KeyError:
                continue
        try:
            found["min_cleanable_ratio"] = float(value("min.cleanable.dirty.ratio"))
        except KeyError:
            pass
        try:
            found["log_append_time"] = value("message.timestamp.type") == "LogAppendTime"
        except KeyError:
            pass
        try:
            codec = str(value("compression.type"))
        except KeyError:
            pass
        else:
            found["compression"] = {"producer": None, "uncompressed": "none"}.get(codec, codec)
        try:
            policy = value("cleanup.policy")
        except KeyError:
            pass
        else:
            names = policy if isinstance(policy, tuple | list) else str(policy).split(",")
            policies = [n.strip() for n in names]
            found["delete"] = "delete" in policies
            found["compact"] = "compact" in policies
        return attrs.evolve(base, **found)
