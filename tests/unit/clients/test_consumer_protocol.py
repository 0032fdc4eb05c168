"""The consumer-protocol bytes: Kafka's layouts, byte for byte, and hostile input refused cleanly."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from coordkit.protocol.consumer import (
    Claim,
    UserDataError,
    decode_assignment,
    decode_generation,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_generation,
    encode_sticky_user_data,
    encode_subscription,
)


def _java_sticky_v1(owned: dict[str, list[int]], generation: int) -> bytes:
    """Java's STICKY_ASSIGNOR_USER_DATA_V1, written out by hand: [topic, [int32]], int32."""
    out = struct.pack(">i", len(owned))
    for topic, partitions in owned.items():
        name = topic.encode()
        out += struct.pack(">h", len(name)) + name + struct.pack(">i", len(partitions))
        out += b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", generation)


def test_sticky_user_data_is_javas_layout() -> None:
    owned = {"a": [0, 2], "b": [1]}
    expected = _java_sticky_v1(owned, 7)
    assert encode_sticky_user_data(owned, 7) == expected
    # kafka-python's definition of the same struct, without the version prefix it adds.
    kp = StickyAssignorUserData([("a", [0, 2]), ("b", [1])], 7)
    assert kp.encode(header=False) == expected
    assert decode_sticky_user_data(expected) == Claim({"a": (0, 2), "b": (1,)}, 7)


def test_sticky_user_data_reads_v0_and_kafka_python_prefixed_form() -> None:
    v0 = _java_sticky_v1({"t": [3]}, 0)[:-4]  # v0 has no generation
    assert decode_sticky_user_data(v0) == Claim({"t": (3,)}, -1)
    prefixed = StickyAssignorUserData([("t", [1, 4])], 9).encode()  # kafka-python 3.0's own form
    assert prefixed[:2] == b"\x00\x01"
    assert decode_sticky_user_data(prefixed) == Claim({"t": (1, 4)}, 9)


def test_subscription_matches_kafka_python_at_every_version() -> None:
    for version in range(4):
        ours = encode_subscription(
            ["t", "u"],
            user_data=b"ud",
            owned={"t": [2, 0]},
            generation=5,
            rack="r1",
            version=version,
        )
        theirs = ConsumerProtocolSubscription(
            version=version,
            topics=["t", "u"],
            user_data=b"ud",
            owned_partitions=[
                ConsumerProtocolSubscription.TopicPartition(topic="t", partitions=[0, 2])
            ],
            generation_id=5,
            rack_id="r1",
        ).encode()
        assert ours == theirs, version
        decoded = decode_subscription(theirs)
        assert decoded.topics == ("t", "u")
        assert decoded.owned == ({"t": (0, 2)} if version >= 1 else {})
        assert decoded.generation == (5 if version >= 2 else -1)
        assert decoded.rack == ("r1" if version >= 3 else None)


def test_newer_subscription_version_reads_with_the_newest_known_layout() -> None:
    v3 = encode_subscription(["t"], owned={"t": [1]}, generation=4, rack=None, version=3)
    v9 = struct.pack(">h", 9) + v3[2:] + b"future fields"
    decoded = decode_subscription(v9)
    assert (decoded.version, decoded.owned, decoded.generation) == (9, {"t": (1,)}, 4)


def test_assignment_matches_kafka_python() -> None:
    ours = encode_assignment({"b": [1], "a": [3, 0]}, user_data=encode_generation(12))
    theirs = ConsumerProtocolAssignment(0, [("a", [0, 3]), ("b", [1])], struct.pack(">i", 12))
    assert ours == theirs.encode()
    decoded = decode_assignment(ours)
    assert decoded.partitions == {"a": (0, 3), "b": (1,)}
    assert decode_generation(decoded.user_data or b"") == 12


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\xff\xff\xff\xff",  # negative array length
        b"\x7f\xff\xff\xff",  # 2 billion topics in 4 bytes
        b"\x00\x00\x00\x01\x7f\xff",  # topic name longer than the data
        _java_sticky_v1({"t": [1]}, 3) + b"junk",
        "é".encode() * 20,
    ],
)
def test_hostile_sticky_user_data_raises_user_data_error(data: bytes) -> None:
    with pytest.raises(UserDataError):
        decode_sticky_user_data(data)


@given(st.binary(max_size=200))
def test_no_bytes_break_the_decoders(data: bytes) -> None:
    for decode in (
        decode_sticky_user_data,
        decode_subscription,
        decode_assignment,
        decode_generation,
    ):
        try:
            decode(data)
        except UserDataError:
            pass


def test_bad_versions_are_refused_when_encoding() -> None:
    with pytest.raises(ValueError, match="versions 0-3"):
        encode_subscription(["t"], version=4)
    with pytest.raises(UserDataError, match="negative version"):
        decode_subscription(b"\xff\xff\x00\x00\x00\x00")


def test_a_subscription_cut_short_is_refused_strictly_and_read_leniently() -> None:
    """A v2 subscription whose bytes end after v1's fields: refused as it is, read as v1 when
    lenient (what ``coordkit serve`` does to describe a group), its version kept."""
    v1 = encode_subscription(["orders"], owned={"orders": [0, 1]}, version=1)
    cut = struct.pack(">h", 2) + v1[2:]
    with pytest.raises(UserDataError, match="ConsumerProtocolSubscription v2"):
        decode_subscription(cut)
    found = decode_subscription(cut, lenient=True)
    assert (found.version, found.topics, found.owned) == (2, ("orders",), {"orders": (0, 1)})
    with pytest.raises(UserDataError):
        decode_subscription(b"\x00\x01\x00", lenient=True)


def test_an_assignment_cut_short_is_read_leniently_with_its_earlier_layout() -> None:
    v0 = encode_assignment({"orders": [3]})
    found = decode_assignment(struct.pack(">h", 1) + v0[2:], lenient=True)
    assert (found.version, found.partitions) == (1, {"orders": (3,)})
