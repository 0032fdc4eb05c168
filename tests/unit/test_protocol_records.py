"""Record batches v2: round trips, kafka-python's builder and reader both ways, CRC-32C, hostile
batches, and the compression codecs (gzip always; snappy, lz4, zstd when their library is there)."""

from __future__ import annotations

import gzip
import os
import struct
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from coordkit.protocol import ProtocolError, compression
from coordkit.protocol.crc32c import IMPLEMENTATION, crc32c, crc32c_python
from coordkit.protocol.records import (
    HEADER_SIZE,
    Header,
    Record,
    RecordBatch,
    assign_offsets,
    decode_batch,
    decode_batches,
    encode_batch,
    iter_batches,
    new_batch,
    read_batch_header,
)
from coordkit.protocol.varints import write_varint


def _protocol_error(call: Callable[[], object]) -> ProtocolError | None:
    """The ProtocolError ``call`` raises, if any (anything else escapes and fails the test)."""
    try:
        call()
    except ProtocolError as e:
        return e
    return None


_BLOB = st.one_of(st.none(), st.binary(max_size=40))
_HEADERS = st.lists(
    st.builds(Header, st.text(st.characters(blacklist_categories=("Cs",)), max_size=8), _BLOB),
    max_size=3,
).map(tuple)
_CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@st.composite
def batches(draw: st.DrawFn, codecs: tuple[str, ...] = ("none", "gzip")) -> RecordBatch:
    base_offset = draw(st.integers(0, 2**40))
    base_timestamp = draw(st.integers(0, 2**42))
    count = draw(st.integers(1, 6))
    records = []
    offset = base_offset
    for _ in range(count):
        records.append(Record(offset, base_timestamp + draw(st.integers(-1000, 10**6)),
                              draw(_BLOB), draw(_BLOB), draw(_HEADERS)))  # fmt: skip
        offset += draw(st.integers(1, 3))  # compacted batches have gaps
    return RecordBatch(
        base_offset=base_offset,
        records=tuple(records),
        base_timestamp=base_timestamp,
        max_timestamp=max(r.timestamp for r in records),
        last_offset_delta=records[-1].offset - base_offset,
        partition_leader_epoch=draw(st.integers(-1, 2**31 - 1)),
        compression=draw(st.sampled_from(codecs)),
        is_transactional=draw(st.booleans()),
        producer_id=draw(st.integers(-1, 2**63 - 1)),
        producer_epoch=draw(st.integers(-1, 2**15 - 1)),
        base_sequence=draw(st.integers(-1, 2**31 - 1)),
    )


# -- CRC-32C ------------------------------------------------------------------------------------


def test_crc32c_known_value_and_the_wheel_is_used_when_installed() -> None:
    assert crc32c(b"123456789") == 0xE3069283 == crc32c_python(b"123456789")
    try:
        import crc32c as wheel  # noqa: F401
    except ImportError:
        assert IMPLEMENTATION == "python"
    else:
        assert IMPLEMENTATION == "wheel"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 200))
def test_python_crc32c_equals_the_wheel_also_when_continued(data: bytes, cut: int) -> None:
    assert crc32c_python(data) == crc32c(data)
    assert crc32c_python(data[cut:], crc32c_python(data[:cut])) == crc32c(data)


# -- round trips and kafka-python -----------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(batches())
def test_batches_round_trip(batch: RecordBatch) -> None:
    assert decode_batch(encode_batch(batch)) == batch


@settings(max_examples=100, deadline=None)
@given(batches())
def test_kafka_python_reads_our_batches(batch: RecordBatch) -> None:
    theirs = DefaultRecordBatch(bytearray(encode_batch(batch)))
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.producer_id, theirs.base_sequence) == (
        batch.base_offset, batch.producer_id, batch.base_sequence,
    )  # fmt: skip
    assert theirs.compression_type == _CODEC_IDS[batch.compression]
    assert theirs.is_transactional == batch.is_transactional
    read = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in theirs]
    assert read == [
        (r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
        for r in batch.records
    ]


def _kafka_python_batch(codec: int, entries: list[tuple[int, int, bytes | None, bytes, list[tuple[str, bytes]]]],
                        producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:  # fmt: skip
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=0, producer_id=producer[0],
        producer_epoch=producer[1], base_sequence=producer[2], batch_size=10**7,
    )  # fmt: skip
    for offset, timestamp, key, value, headers in entries:
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=5)
_ROWS = st.lists(
    st.tuples(st.integers(0, 2**40), _BLOB, st.binary(max_size=30),
              st.lists(st.tuples(_TEXT, st.binary(max_size=5)), max_size=2)),
    min_size=1, max_size=5,
)  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(_ROWS, st.sampled_from([0, 1]))
def test_we_read_kafka_python_batches_and_write_the_same_bytes(
    rows: list[tuple[int, bytes | None, bytes, list[tuple[str, bytes]]]], codec: int
) -> None:
    # Values padded to compress well: kafka-python sends uncompressed when gzip does not help.
    rows = [(t, k, v + b"x" * 64, hs) for t, k, v, hs in rows]
    entries = [(i, t, k, v, hs) for i, (t, k, v, hs) in enumerate(rows)]
    theirs = _kafka_python_batch(codec, entries, producer=(7, 1, 100))
    batch = decode_batch(theirs)
    assert batch.compression == ("none", "gzip")[codec]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 100)
    assert [(r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
            for r in batch.records] == entries  # fmt: skip
    assert batch.max_timestamp == max(t for _, t, _, _, _ in entries)
    if codec == 0:
        assert encode_batch(batch) == theirs
    else:  # gzip bytes depend on the compressor; the decompressed records must agree
        assert decode_batch(encode_batch(batch)) == batch


def test_new_batch_numbers_records_and_assign_offsets_keeps_the_crc_valid() -> None:
    batch = new_batch([(b"k", b"v"), (None, b"w", [Header("h", None)])], timestamp=5000,
                      compression="gzip")  # fmt: skip
    assert [r.offset for r in batch.records] == [0, 1]
    assert (batch.last_offset, batch.next_offset, batch.attributes) == (1, 2, 1)
    raw = encode_batch(batch)
    moved = assign_offsets(raw, 1000, 7)
    decoded = decode_batch(moved)
    assert [r.offset for r in decoded.records] == [1000, 1001]
    assert decoded.partition_leader_epoch == 7
    assert DefaultRecordBatch(bytearray(moved)).validate_crc()
    header = read_batch_header(moved)
    assert (header.size, header.last_offset, header.compression) == (len(moved), 1001, "gzip")


def test_several_batches_and_a_partial_tail() -> None:
    one = encode_batch(new_batch([(b"a", b"1")], base_offset=0, timestamp=1))
    two = encode_batch(new_batch([(b"b", b"2"), (b"c", b"3")], base_offset=1, timestamp=2))
    data = one + two
    assert [b.base_offset for b in decode_batches(data)] == [0, 1]
    assert [b.base_offset for b in decode_batches(data + two[:30], allow_partial_tail=True)] == [
        0,
        1,
    ]
    assert [b.base_offset for b in decode_batches(data + two[:-1], allow_partial_tail=True)] == [
        0,
        1,
    ]
    with pytest.raises(ProtocolError, match="batch at byte 1"):
        decode_batches(data + two[:-1])
    assert [h.record_count for h, _ in iter_batches(data)] == [1, 2]


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    batch = new_batch([(b"a", b"1"), (b"b", b"2")], timestamp=10)
    batch = RecordBatch(**{**_fields(batch), "timestamp_type": 1, "max_timestamp": 99})
    assert [r.timestamp for r in decode_batch(encode_batch(batch)).records] == [99, 99]


def _fields(batch: RecordBatch) -> dict[str, object]:
    import attrs

    return attrs.asdict(batch, recurse=False)


# -- compression codecs -------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_optional_codecs_work_when_installed_and_name_the_package_when_not(codec: str) -> None:
    batch = new_batch([(b"k", b"value " * 50)] * 3, timestamp=1, compression=codec)
    if compression.available(codec):
        raw = encode_batch(batch)
        assert decode_batch(raw) == batch
        if _kafka_python_has(codec):
            theirs = DefaultRecordBatch(bytearray(raw))
            assert [r.value for r in theirs] == [r.value for r in batch.records]
            built = decode_batch(
                _kafka_python_batch(_CODEC_IDS[codec], [(0, 1, b"k", b"v" * 300, [])])
            )
            assert (built.compression, built.records[0].value) == (codec, b"v" * 300)
        return
    package = compression.OPTIONAL[codec][1]
    with pytest.raises(ProtocolError, match=f"compression codec {codec} needs the '{package}'"):
        encode_batch(batch)
    # A batch some producer compressed with it: decoding names the codec the same way.
    raw = bytearray(encode_batch(new_batch([(b"k", b"v")], timestamp=1)))
    struct.pack_into(">h", raw, 21, _CODEC_IDS[codec])
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    with pytest.raises(ProtocolError, match=f"batch at byte 0: compression codec {codec} needs"):
        decode_batch(bytes(raw))


def _kafka_python_has(codec: str) -> bool:
    import kafka.codec

    return bool(getattr(kafka.codec, f"has_{codec}")())


def test_gzip_bombs_stop_at_the_limit_and_corrupt_gzip_is_refused() -> None:
    raw = bytearray(encode_batch(new_batch([(None, bytes(4 * 1024 * 1024))], timestamp=1,
                                           compression="gzip")))  # fmt: skip
    assert len(raw) < 10_000
    with pytest.raises(ProtocolError, match="gzip data expands beyond 1048576 bytes"):
        decode_batch(bytes(raw), max_decompressed=1024 * 1024)
    assert len(decode_batch(bytes(raw)).records[0].value or b"") == 4 * 1024 * 1024
    raw[HEADER_SIZE + 12] ^= 0xFF
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    with pytest.raises(ProtocolError, match="gzip data is corrupt"):
        decode_batch(bytes(raw))


def test_concatenated_gzip_members_are_read_like_java_does() -> None:
    plain = encode_batch(new_batch([(b"a", b"1"), (b"b", b"2")], timestamp=1))
    section = plain[HEADER_SIZE:]
    records = gzip.compress(section[:5]) + gzip.compress(section[5:])
    raw = bytearray(plain[:HEADER_SIZE] + records)
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">h", raw, 21, 1)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    assert [r.key for r in decode_batch(bytes(raw)).records] == [b"a", b"b"]


# -- hostile batches ------------------------------------------------------------------------------


def _raw() -> bytes:
    return encode_batch(new_batch([(b"key", b"value", [Header("h", b"x")]), (None, b"v2")],
                                  base_offset=3, timestamp=100))  # fmt: skip


def test_every_truncation_is_refused() -> None:
    raw = _raw()
    with pytest.raises(ProtocolError, match="expected one batch, found 0"):
        decode_batch(b"")
    for cut in range(1, len(raw)):
        with pytest.raises(ProtocolError, match="record batch: batch at byte 0"):
            decode_batch(raw[:cut])


def test_crc_mismatch_magic_and_lengths() -> None:
    raw = bytearray(_raw())
    flipped = bytearray(raw)
    flipped[-1] ^= 1
    with pytest.raises(ProtocolError, match="CRC-32C mismatch"):
        decode_batch(bytes(flipped))
    old = bytearray(raw)
    old[16] = 1
    with pytest.raises(ProtocolError, match="magic 1 is not supported"):
        decode_batch(bytes(old))
    for length, message in ((-5, "shorter than a batch header"), (2**31 - 1, "exceeds the")):
        bad = bytearray(raw)
        struct.pack_into(">i", bad, 8, length)
        with pytest.raises(ProtocolError, match=message):
            decode_batch(bytes(bad))


def _with_records(section: bytes, count: int) -> bytes:
    raw = bytearray(_raw()[:HEADER_SIZE] + section)
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">i", raw, 57, count)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


def _record(fields: bytes) -> bytes:
    out = bytearray()
    write_varint(out, len(fields))
    return bytes(out) + fields


def test_bad_records_name_their_index_and_field() -> None:
    with pytest.raises(ProtocolError, match="record count 2000000000 needs at least"):
        decode_batch(_with_records(b"", 2_000_000_000))
    with pytest.raises(ProtocolError, match="record count -1 is negative"):
        decode_batch(_with_records(b"", -1))
    # attributes, timestamp delta 0, offset delta 0, then a key of 500 bytes (zigzag: e8 07).
    key_too_long = _record(b"\x00\x00\x00\xe8\x07" + bytes(16))
    with pytest.raises(ProtocolError) as caught:
        decode_batch(_with_records(key_too_long, 1))
    assert str(caught.value) == (
        "record batch: batch at byte 0.records[0]: key length 500 exceeds the 16 bytes left"
        " in the record"
    )
    # null key, null value, one header whose key is b"\xff\xfe".
    bad_header = _record(b"\x00\x00\x00\x01\x01\x02\x04\xff\xfe\x01")
    with pytest.raises(ProtocolError, match=r"records\[0\]: header key is not UTF-8"):
        decode_batch(_with_records(bad_header, 1))
    padded = _record(b"\x00\x00\x00\x01\x01\x00" + b"\x00")
    with pytest.raises(ProtocolError, match=r"records\[0\]: record length 7 does not match"):
        decode_batch(_with_records(padded, 1))
    ok = _record(b"\x00\x00\x00\x01\x01\x00")
    with pytest.raises(ProtocolError, match=r"records\[1\]: varint longer than 5 bytes"):
        decode_batch(_with_records(ok + b"\xff" * 8, 2))
    good = _raw()[HEADER_SIZE:]
    with pytest.raises(ProtocolError, match="3 bytes left after 2 records"):
        decode_batch(_with_records(good + b"\x00\x00\x00", 2))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_batches_fail_only_with_protocol_error(data: st.DataObject) -> None:
    raw = bytearray(encode_batch(data.draw(batches())))
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    error = _protocol_error(lambda: decode_batches(bytes(raw)))
    assert error is None or str(error).startswith("record batch")


def test_random_bytes_fail_only_with_protocol_error() -> None:
    for size in (0, 10, 61, 200):
        for _ in range(50):
            try:
                decode_batches(os.urandom(size))
            except ProtocolError:
                pass
