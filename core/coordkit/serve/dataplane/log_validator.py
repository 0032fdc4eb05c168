"""What a leader does to a batch before it appends it, as Kafka's ``LogValidator`` does for
record batches v2 (the only format the logs keep), by the topic's configs:

* ``compression.type`` other than ``producer``: a batch in another codec is recompressed into the
  topic's (``uncompressed``: none), its header fields kept;
* ``message.timestamp.type=LogAppendTime``: the batch is stamped with the append time
  (``DefaultRecordBatch.setMaxTimestamp``: the attributes' timestamp type, the max timestamp).

Either computes the CRC again; a batch that needs neither is kept as the producer sent it.
"""

from __future__ import annotations

from coordkit.protocol import records
from coordkit.protocol.records import BatchHeader
from coordkit.protocol.wire import Buffer
from coordkit.serve.dataplane.log_config import LogConfig


def convert(raw: Buffer, header: BatchHeader, config: LogConfig,
            now: int) -> tuple[Buffer, BatchHeader]:  # fmt: skip
    """``raw`` (whose header is ``header``) as the leader keeps it, and its header; ``now``:
    the append time (for a LogAppendTime topic)."""
    if config.compression is not None and header.compression != config.compression:
        raw = records.recompress(raw, config.compression)
        header = records.read_batch_header(raw)
    if config.log_append_time:
        raw = records.set_log_append_time(raw, now)
        header = records.read_batch_header(raw)
    return raw, header
