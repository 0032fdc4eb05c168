"""The checks a leader makes of a Produce request's record batches before it appends any
(:meth:`PartitionLog.append <coordkit.serve.dataplane.log.PartitionLog.append>`): each batch
whole (CRC-32C unless the caller checked it), its record count its offsets' span, its codec
known, and at least one batch."""

from __future__ import annotations

from coordkit.protocol import compression, records
from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.records import BatchHeader


def checked_batches(data: bytes, verify_crc: bool = True) -> list[tuple[BatchHeader, memoryview]]:
    """The batches of a produce request's records, each checked; at least one.

    :raises ProtocolError: a batch is malformed, or there is none.
    """
    checked = []
    for header, raw in records.iter_batches(data, verify_crc=verify_crc):
        if header.record_count != header.last_offset_delta + 1:
            raise ProtocolError(
                f"record count {header.record_count} does not match last offset delta "
                f"{header.last_offset_delta}",
                kind="record batch",
            )
        if header.attributes & 0x07 not in compression.CODECS:
            raise ProtocolError(
                f"compression codec id {header.attributes & 0x07} is unknown",
                kind="record batch",
            )
        checked.append((header, raw))
    if not checked:
        raise ProtocolError("no record batch in the produce request", kind="record batch")
    return checked
