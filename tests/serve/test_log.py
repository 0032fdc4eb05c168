"""A leader's in-memory partition log: offsets it assigns, what a fetch reads, ListOffsets."""

from __future__ import annotations

import pytest

from coordkit.protocol import ProtocolError
from coordkit.protocol.crc32c import crc32c
from coordkit.protocol.records import assign_offsets, decode_batches, encode_batch, new_batch
from coordkit.serve.dataplane.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Appended,
    PartitionLog,
)


def _batch(*values: bytes, timestamp: int) -> bytes:
    return encode_batch(new_batch([(None, v) for v in values], timestamp=timestamp))


def test_the_leader_assigns_offsets_and_its_epoch() -> None:
    log = PartitionLog()
    assert log.append(_batch(b"a", b"b", timestamp=1_000), leader_epoch=4).base_offset == 0
    assert log.append(_batch(b"c", timestamp=2_000) + _batch(b"d", timestamp=3_000), 5) == (
        Appended(error=0, base_offset=2, records=2, end_offset=4)
    )
    assert log.log_end == 4
    batches = decode_batches(log.read(0, 1 << 20))
    assert [(b.base_offset, b.partition_leader_epoch) for b in batches] == [(0, 4), (2, 5), (3, 5)]
    assert [(r.offset, r.value) for b in batches for r in b.records] == [
        (0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"),
    ]  # fmt: skip


def test_a_corrupt_batch_appends_nothing() -> None:
    log = PartitionLog()
    good = _batch(b"a", timestamp=1)
    bad = bytearray(_batch(b"b", timestamp=1))
    bad[-1] ^= 0xFF  # breaks the CRC-32C
    with pytest.raises(ProtocolError, match="CRC-32C"):
        log.append(good + bytes(bad), leader_epoch=0)
    with pytest.raises(ProtocolError):
        log.append(b"", leader_epoch=0)
    assert log.log_end == 0
    assert log.read(0, 100) == b""


def test_reads_are_whole_batches_within_the_limit_but_never_nothing() -> None:
    log = PartitionLog()
    sent = _batch(b"x" * 100, timestamp=1), _batch(b"y", timestamp=1)
    log.append(sent[0] + sent[1], leader_epoch=7)
    # As kept: the leader's offsets and epoch written in.
    first, second = assign_offsets(sent[0], 0, 7), assign_offsets(sent[1], 1, 7)
    assert log.read(0, 10) == log.read(0, len(first)) == first  # too large, but the first comes
    assert log.read(0, 10, at_least_one=False) == b""
    assert log.read(1, 1 << 20) == second
    assert log.read(2, 1 << 20) == b""  # at the log end: nothing yet
    with pytest.raises(IndexError):
        log.read(3, 1 << 20)


def test_list_offsets() -> None:
    log = PartitionLog()
    assert log.offset_for(LATEST_TIMESTAMP) == (0, -1)
    assert log.offset_for(MAX_TIMESTAMP) == (-1, -1)
    log.append(_batch(b"a", b"b", timestamp=1_000), leader_epoch=0)
    log.append(_batch(b"c", timestamp=5_000), leader_epoch=0)
    log.append(_batch(b"d", timestamp=3_000), leader_epoch=0)
    assert log.offset_for(EARLIEST_TIMESTAMP) == (0, -1)
    assert log.offset_for(LATEST_TIMESTAMP) == (4, -1)
    assert log.offset_for(MAX_TIMESTAMP) == (2, 5_000)
    assert log.offset_for(1_000) == (0, 1_000)
    assert log.offset_for(2_000) == (2, 5_000)  # the first record at or after it
    assert log.offset_for(6_000) == (-1, -1)


def test_any_known_codec_is_kept_as_sent_and_an_unknown_one_refused() -> None:
    log = PartitionLog()
    gzipped = encode_batch(new_batch([(None, b"z" * 1_000)], compression="gzip"))
    assert log.append(gzipped, leader_epoch=0).base_offset == 0
    assert log.read(0, 1 << 20) == assign_offsets(gzipped, 0, 0)
    assert [r.value for r in decode_batches(log.read(0, 1 << 20))[0].records] == [b"z" * 1_000]
    unknown = bytearray(_batch(b"a", timestamp=1))
    unknown[22] |= 0x07  # attributes' codec bits: 7 is no codec (the CRC is refreshed below)
    unknown[17:21] = crc32c(bytes(unknown[21:])).to_bytes(4, "big")
    with pytest.raises(ProtocolError, match="codec id 7"):
        log.append(bytes(unknown), leader_epoch=0)
    assert log.log_end == 1


def test_reads_stop_at_the_high_watermark() -> None:
    log = PartitionLog()
    log.append(_batch(b"a", timestamp=1_000), leader_epoch=0)
    log.append(_batch(b"b", b"c", timestamp=2_000), leader_epoch=0)
    assert [r.value for b in decode_batches(log.read(0, 1 << 20, upto=1)) for r in b.records] == [
        b"a"
    ]
    assert log.read(1, 1 << 20, upto=1) == b""
    assert log.offset_for(LATEST_TIMESTAMP, upto=1) == (1, -1)
    # Kafka finds the newest record in the whole log, and answers none when it is not visible.
    assert log.offset_for(MAX_TIMESTAMP, upto=1) == (-1, -1)
    assert log.offset_for(MAX_TIMESTAMP, upto=3) == (1, 2_000)
    assert log.offset_for(2_000, upto=1) == (-1, -1)  # not visible yet
