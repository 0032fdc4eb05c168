"""Kafka's record batches, format v2 (magic 2): what Produce carries in and Fetch carries out.

A batch is a 61-byte header, then its records (compressed together when the attributes say so)::

    baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8 (2),
    crc uint32 (CRC-32C of everything from attributes to the end), attributes int16,
    lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64, producerId int64,
    producerEpoch int16, baseSequence int32, recordCount int32, records...

and each record is ``length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
key (varint length, -1 null), value (same), headers (varint count; each a varint-length UTF-8 key
and a nullable value)``. Base offset and leader epoch sit before the CRC, so a leader assigns
offsets with :func:`assign_offsets` without touching the records. Every length read is checked
against the bytes left; a bad batch raises :class:`ProtocolError` naming where.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence

from attrs import evolve, field, frozen

from coordkit.protocol import compression
from coordkit.protocol.crc32c import crc32c
from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.varints import (
    VarintError,
    read_varint,
    read_varlong,
    varint_bytes,
    varlong_bytes,
)
from coordkit.protocol.wire import Buffer

MAGIC = 2
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
#: Where the CRC'd part starts (the attributes) and where batchLength starts counting.
_CRC_START = 21
_LENGTH_BASE = 12
_EPOCH = struct.Struct(">qii")
_MIN_RECORD = 7  # length, attributes, timestamp, offset, key, value, header count: 1 byte each

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1


@frozen
class Header:
    key: str
    value: bytes | None


@frozen
class Record:
    """One record with its absolute offset and timestamp (the wire keeps deltas)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@frozen
class BatchHeader:
    """A batch's header fields, read without decoding (or decompressing) its records."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes."""
        return _LENGTH_BASE + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> str:
        return compression.CODECS.get(self.attributes & 0x07, f"unknown({self.attributes & 7})")


@frozen
class RecordBatch:
    """A decoded batch, or one to encode (see :func:`new_batch` for the usual way to make one)."""

    base_offset: int
    records: tuple[Record, ...]
    base_timestamp: int
    max_timestamp: int
    last_offset_delta: int
    partition_leader_epoch: int = -1
    compression: str = field(default="none")
    timestamp_type: int = TIMESTAMP_CREATE_TIME
    is_transactional: bool = False
    is_control: bool = False
    has_delete_horizon: bool = False
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1

    @compression.validator
    def _known_codec(self, _attribute: object, value: str) -> None:
        if value not in compression.CODEC_IDS:
            raise ProtocolError(
                f"unknown compression {value!r} (known: {', '.join(compression.CODEC_IDS)})"
            )

    @property
    def attributes(self) -> int:
        return (
            compression.CODEC_IDS[self.compression]
            | self.timestamp_type << 3
            | self.is_transactional << 4
            | self.is_control << 5
            | self.has_delete_horizon << 6
        )

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def new_batch(
    entries: Iterable[
        tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Sequence[Header]]
    ],
    *,
    base_offset: int = 0,
    timestamp: int | None = None,
    compression: str = "none",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
) -> RecordBatch:
    """A batch of ``(key, value)`` or ``(key, value, headers)`` entries at consecutive offsets,
    all stamped ``timestamp`` (milliseconds; now by default)."""
    stamp = int(time.time() * 1000) if timestamp is None else timestamp
    records = []
    for i, entry in enumerate(entries):
        headers = tuple(entry[2]) if len(entry) > 2 else ()
        records.append(Record(base_offset + i, stamp, entry[0], entry[1], headers))
    if not records:
        raise ProtocolError("a batch needs at least one record", kind="record batch")
    return RecordBatch(
        base_offset=base_offset,
        records=tuple(records),
        base_timestamp=stamp,
        max_timestamp=stamp,
        last_offset_delta=len(records) - 1,
        partition_leader_epoch=partition_leader_epoch,
        compression=compression,
        is_transactional=is_transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


# -- encoding ---------------------------------------------------------------------------------


def encode_record(out: bytearray, record: Record, base_offset: int, base_timestamp: int) -> None:
    key, value, headers = record.key, record.value, record.headers
    parts = [
        b"\x00",  # attributes: unused in v2
        varlong_bytes(record.timestamp - base_timestamp),
        varint_bytes(record.offset - base_offset),
        _NULL if key is None else varint_bytes(len(key)),
        key or b"",
        _NULL if value is None else varint_bytes(len(value)),
        value or b"",
        varint_bytes(len(headers)),
    ]
    for header in headers:
        name = header.key.encode("utf-8")
        parts += (varint_bytes(len(name)), name)
        if header.value is None:
            parts.append(_NULL)
        else:
            parts += (varint_bytes(len(header.value)), header.value)
    body = b"".join(parts)
    out += varint_bytes(len(body))
    out += body


_NULL = b"\x01"  # zigzag(-1): a null key, value or header value


def encode_batch(batch: RecordBatch) -> bytes:
    """The batch's bytes, CRC computed."""
    raw = bytearray()
    for record in batch.records:
        encode_record(raw, record, batch.base_offset, batch.base_timestamp)
    section = compression.compress(compression.CODEC_IDS[batch.compression], bytes(raw))
    header = _HEADER.pack(
        batch.base_offset, HEADER_SIZE - _LENGTH_BASE + len(section), batch.partition_leader_epoch,
        MAGIC, 0, batch.attributes, batch.last_offset_delta, batch.base_timestamp,
        batch.max_timestamp, batch.producer_id, batch.producer_epoch, batch.base_sequence,
        len(batch.records),
    )  # fmt: skip
    out = bytearray(header)
    out += section
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)


def assign_offsets(raw: Buffer, base_offset: int, partition_leader_epoch: int) -> bytes:
    """The batch ``raw`` with a new base offset and leader epoch (outside the CRC: no re-check)."""
    out = bytearray(raw)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, partition_leader_epoch)
    return bytes(out)


#: The attributes' timestamp-type bit, and where the attributes and max timestamp are.
LOG_APPEND_TIME_BIT = 0x08
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35


def set_log_append_time(raw: Buffer, now_ms: int) -> bytes:
    """The batch ``raw`` stamped as a leader of a LogAppendTime topic stamps it (Kafka's
    ``DefaultRecordBatch.setMaxTimestamp``): the attributes' timestamp type set, the max
    timestamp ``now_ms`` (readers take it as every record's), the CRC computed again."""
    out = bytearray(raw)
    (attributes,) = struct.unpack_from(">h", out, _ATTRIBUTES_AT)
    struct.pack_into(">h", out, _ATTRIBUTES_AT, attributes | LOG_APPEND_TIME_BIT)
    struct.pack_into(">q", out, _MAX_TIMESTAMP_AT, now_ms)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)


def recompress(raw: Buffer, codec: str) -> bytes:
    """The batch ``raw`` with its records in ``codec`` (a leader's recompression into its
    topic's ``compression.type``), every header field kept, the CRC computed again."""
    return encode_batch(evolve(decode_batch(raw, verify_crc=False), compression=codec))


# -- decoding ---------------------------------------------------------------------------------


def _fail(reason: str, path: str) -> ProtocolError:
    return ProtocolError(reason, kind="record batch", path=path)


def read_batch_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """The header of the batch at ``pos``, with its length checked against the bytes left."""
    where = f"batch at byte {pos}"
    left = len(buf) - pos
    if left < HEADER_SIZE:
        raise _fail(f"batch header needs {HEADER_SIZE} bytes, {left} left", where)
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise _fail(f"magic {header.magic} is not supported (only record format v2)", where)
    if header.batch_length < HEADER_SIZE - _LENGTH_BASE:
        raise _fail(f"batch length {header.batch_length} is shorter than a batch header", where)
    if header.batch_length > left - _LENGTH_BASE:
        raise _fail(
            f"batch length {header.batch_length} exceeds the {left - _LENGTH_BASE} bytes left",
            where,
        )
    if header.record_count < 0:
        raise _fail(f"record count {header.record_count} is negative", where)
    return header


def iter_batches(
    data: Buffer, *, verify_crc: bool = True, allow_partial_tail: bool = False
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Each batch of a records field, header and raw bytes, without decoding records.

    ``allow_partial_tail`` stops quietly at a truncated last batch (Fetch responses may end with
    one, cut at the fetch size limit); otherwise it is an error.
    """
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        if allow_partial_tail and len(view) - pos < HEADER_SIZE:
            return
        if allow_partial_tail and len(view) - pos >= 12:
            (length,) = struct.unpack_from(">i", view, pos + 8)
            if length > len(view) - pos - _LENGTH_BASE:
                return
        header = read_batch_header(view, pos)
        raw = view[pos : pos + header.size]
        if verify_crc:
            actual = crc32c(raw[_CRC_START:])
            if actual != header.crc:
                raise _fail(
                    f"CRC-32C mismatch: batch says {header.crc:#010x}, data gives {actual:#010x}",
                    f"batch at byte {pos}",
                )
        yield header, raw
        pos += header.size


def decode_batches(
    data: Buffer,
    *,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
    max_decompressed: int = compression.DEFAULT_MAX_DECOMPRESSED,
) -> list[RecordBatch]:
    """Every batch of a records field, records decoded."""
    batches = []
    offset = 0
    for header, raw in iter_batches(
        data, verify_crc=verify_crc, allow_partial_tail=allow_partial_tail
    ):
        batches.append(_decode(header, raw, f"batch at byte {offset}", max_decompressed))
        offset += header.size
    return batches


def decode_batch(
    data: Buffer, *, verify_crc: bool = True,
    max_decompressed: int = compression.DEFAULT_MAX_DECOMPRESSED,
) -> RecordBatch:  # fmt: skip
    """Exactly one batch."""
    batches = decode_batches(data, verify_crc=verify_crc, max_decompressed=max_decompressed)
    if len(batches) != 1:
        raise _fail(f"expected one batch, found {len(batches)}", "")
    return batches[0]


def _decode(header: BatchHeader, raw: memoryview, where: str, limit: int) -> RecordBatch:
    codec = header.attributes & 0x07
    section = bytes(raw[HEADER_SIZE:])
    try:
        section = compression.decompress(codec, section, limit)
    except ProtocolError as e:
        raise _fail(e.reason, where) from None
    if header.record_count * _MIN_RECORD > len(section):
        raise _fail(
            f"record count {header.record_count} needs at least {header.record_count * _MIN_RECORD}"
            f" bytes, the records take {len(section)}",
            where,
        )
    records = []
    pos = 0
    for i in range(header.record_count):
        try:
            record, pos = _decode_record(section, pos, header)
        except (VarintError, _RecordError) as e:
            raise _fail(str(e), f"{where}.records[{i}]") from None
        records.append(record)
    if pos != len(section):
        raise _fail(f"{len(section) - pos} bytes left after {header.record_count} records", where)
    return RecordBatch(
        base_offset=header.base_offset,
        records=tuple(records),
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        last_offset_delta=header.last_offset_delta,
        partition_leader_epoch=header.partition_leader_epoch,
        compression=compression.CODECS[codec],
        timestamp_type=(header.attributes >> 3) & 1,
        is_transactional=bool(header.attributes & 0x10),
        is_control=bool(header.attributes & 0x20),
        has_delete_horizon=bool(header.attributes & 0x40),
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )


class _RecordError(Exception):
    pass


def _blob(buf: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos)
    if n == -1:
        return None, pos
    if n < 0:
        raise _RecordError(f"{what} length {n} is negative")
    if n > end - pos:
        raise _RecordError(f"{what} length {n} exceeds the {end - pos} bytes left in the record")
    return buf[pos : pos + n], pos + n


def _decode_record(buf: bytes, pos: int, header: BatchHeader) -> tuple[Record, int]:
    length, pos = read_varint(buf, pos)
    if length < 0 or length > len(buf) - pos:
        raise _RecordError(f"record length {length} exceeds the {len(buf) - pos} bytes left")
    end = pos + length
    pos += 1  # attributes (unused in v2)
    timestamp_delta, pos = read_varlong(buf, pos)
    offset_delta, pos = read_varint(buf, pos)
    key, pos = _blob(buf, pos, end, "key")
    value, pos = _blob(buf, pos, end, "value")
    count, pos = read_varint(buf, pos)
    if count < 0 or count * 2 > end - pos:
        raise _RecordError(f"header count {count} does not fit the {end - pos} bytes left")
    headers = []
    for _ in range(count):
        raw_key, pos = _blob(buf, pos, end, "header key")
        if raw_key is None:
            raise _RecordError("header key is null")
        try:
            name = raw_key.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _RecordError(f"header key is not UTF-8 (byte {e.start})") from None
        header_value, pos = _blob(buf, pos, end, "header value")
        headers.append(Header(name, header_value))
    if pos != end:
        raise _RecordError(
            f"record length {length} does not match its fields ({pos - end + length})"
        )
    # Log append time: the broker's time (the batch's max timestamp) stands for every record.
    log_append = header.attributes & 0x08
    timestamp = header.max_timestamp if log_append else header.base_timestamp + timestamp_delta
    return Record(header.base_offset + offset_delta, timestamp, key, value, tuple(headers)), pos
