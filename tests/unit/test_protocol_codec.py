"""The Kafka protocol codec: every api at every version, against kafka-python, and hostile frames.

Messages are drawn by hypothesis strategies generated from the same Kafka definitions the codec
compiles, so every field of every version is exercised; kafka-python 3.x (its own generated
structs) checks the bytes both ways wherever it defines the same version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordkit.errors import CoordkitError
from coordkit.protocol import (
    APIS,
    FrameReader,
    KafkaCodec,
    ProtocolError,
    messages,
    request_header_version,
    response_header_version,
)
from coordkit.protocol.schema import FieldSpec, StructSpec, parse_definition, snake_case
from coordkit.protocol.structs import ZERO_UUID, Struct

CODEC = KafkaCodec()
_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


# -- strategies generated from the definitions --------------------------------------------------


def _primitive(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        return st.integers(lo, hi)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return _TEXT
    if kind in ("bytes", "records"):
        return st.binary(max_size=24)
    assert kind == "uuid"
    return st.one_of(st.just(ZERO_UUID), st.uuids())


def field_strategy(f: FieldSpec, version: int, classes: dict[str, type[Struct]]) -> Any:
    if f.kind == "array":
        if f.element == "struct":
            assert f.struct is not None
            element = struct_strategy(f.struct, version, classes)
        else:
            element = _primitive(str(f.element))
        value = st.lists(element, max_size=3)
    elif f.kind == "struct":
        assert f.struct is not None
        value = struct_strategy(f.struct, version, classes)
    else:
        value = _primitive(f.kind)
    if f.nullable(version):
        value = st.one_of(st.none(), value)
    return value


def struct_strategy(
    spec: StructSpec, version: int, classes: dict[str, type[Struct]]
) -> st.SearchStrategy[Struct]:
    fields = {
        f.attr: field_strategy(f, version, classes) for f in spec.fields if f.present(version)
    }
    return st.builds(classes[spec.name], **fields)


def message_strategy(name: str, version: int) -> st.SearchStrategy[Struct]:
    spec = messages.message_spec(name)
    return struct_strategy(spec.struct, version, messages._STRUCT_CLASSES[name])


def _all_versions() -> list[tuple[str, int]]:
    cases = []
    for api in APIS.values():
        for version in range(api.versions.lo, api.versions.hi + 1):
            cases.append((api.request.name, version))
            cases.append((api.response.name, version))
    return cases


ALL_VERSIONS = _all_versions()


def _protocol_error(call: Callable[[], object]) -> ProtocolError | None:
    """The ProtocolError ``call`` raises, if any (anything else escapes and fails the test)."""
    try:
        call()
    except ProtocolError as e:
        return e
    return None


_SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- round trips --------------------------------------------------------------------------------


def test_every_api_issue_17_lists_is_loaded_with_its_versions() -> None:
    assert set(APIS) == {
        "ApiVersions", "Metadata", "FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat",
        "LeaveGroup", "OffsetCommit", "OffsetFetch", "ListOffsets", "Produce", "Fetch",
        "CreateTopics", "DeleteTopics", "CreatePartitions", "DescribeGroups", "ListGroups",
        "InitProducerId", "OffsetForLeaderEpoch", "ConsumerGroupHeartbeat",
        "DescribeConfigs", "AlterConfigs", "IncrementalAlterConfigs",
        "ConsumerGroupDescribe", "LeaderAndIsr", "StopReplica", "UpdateMetadata",
        "ControlledShutdown", "AlterPartition", "AllocateProducerIds",
        # The admin apis of issue 35 item 2.
        "DescribeCluster", "DescribeLogDirs", "DeleteRecords", "ElectLeaders",
        "AlterPartitionReassignments", "ListPartitionReassignments", "DeleteGroups",
        "OffsetDelete", "DescribeProducers", "DescribeTopicPartitions",
        # ACLs (issue 36 item 3).
        "DescribeAcls", "CreateAcls", "DeleteAcls",
        # Authentication and SCRAM users (issue 36 item 2).
        "SaslHandshake", "SaslAuthenticate", "AlterUserScramCredentials",
        "DescribeUserScramCredentials",
        # Client quotas and Kafka 4's config resources (issue 35).
        "DescribeClientQuotas", "AlterClientQuotas", "ListConfigResources",
        # Share groups (issue 37).
        "ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge",
        "DescribeShareGroupOffsets", "AlterShareGroupOffsets", "DeleteShareGroupOffsets",
        # Transactions (issue 38).
        "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit", "WriteTxnMarkers",
        "DescribeTransactions", "ListTransactions",
    }  # fmt: skip
    # Share groups' stable versions (KIP-932 GA in Kafka 4.2): ShareFetch and ShareAcknowledge 1-2.
    assert (APIS["ShareFetch"].key, str(APIS["ShareFetch"].versions)) == (78, "1-2")
    # ZooKeeper mode's controller apis: Kafka 3.9's, every version.
    assert (APIS["LeaderAndIsr"].key, str(APIS["LeaderAndIsr"].versions)) == (4, "0-7")
    assert (APIS["UpdateMetadata"].key, str(APIS["UpdateMetadata"].versions)) == (6, "0-8")
    # Kafka 4.4's definitions: the versions KIP-896 removed are gone (Fetch from 4).
    assert (APIS["Metadata"].key, str(APIS["Metadata"].versions)) == (3, "0-13")
    assert (APIS["Fetch"].key, str(APIS["Fetch"].versions)) == (1, "4-18")
    assert (APIS["ConsumerGroupHeartbeat"].key, str(APIS["ConsumerGroupHeartbeat"].versions)) == (
        68,
        "0-1",
    )
    assert len(ALL_VERSIONS) == 2 * sum(a.versions.hi - a.versions.lo + 1 for a in APIS.values())


@pytest.mark.parametrize(("name", "version"), ALL_VERSIONS)
def test_body_round_trips_at_every_version(name: str, version: int) -> None:
    @_SETTINGS
    @given(message_strategy(name, version))
    def check(message: Struct) -> None:
        data = CODEC.encode_body(message, version)
        assert CODEC.decode_body(name, version, data) == message

    check()


@pytest.mark.parametrize("api", sorted(APIS))
def test_framed_request_and_response_round_trip_with_headers(api: str) -> None:
    schema = APIS[api]
    for version in range(schema.versions.lo, schema.versions.hi + 1):
        request = messages.message_class(schema.request.name)()
        frame = CODEC.encode_request(request, version=version, correlation_id=41, client_id="c1")
        assert CODEC.frame_size(frame) == len(frame) - 4
        decoded = CODEC.decode_request(frame[4:])
        assert (decoded.api.name, decoded.version) == (api, version)
        assert (decoded.correlation_id, decoded.client_id) == (41, "c1")
        assert decoded.body == request
        response = messages.message_class(schema.response.name)()
        frame = CODEC.encode_response(response, version=version, correlation_id=42)
        assert CODEC.decode_response(api, version, frame[4:]) == (42, response)


def test_header_versions_follow_kafka() -> None:
    metadata, api_versions = APIS["Metadata"], APIS["ApiVersions"]
    assert [request_header_version(metadata, v) for v in (8, 9)] == [1, 2]
    assert [response_header_version(metadata, v) for v in (8, 9)] == [0, 1]
    # ApiVersions v3 is flexible, but its response header stays v0 for any client to read.
    assert request_header_version(api_versions, 3) == 2
    assert response_header_version(api_versions, 3) == 0
    frame = CODEC.encode_response(messages.ApiVersionsResponse(), version=3, correlation_id=5)
    assert frame[4:8] == b"\x00\x00\x00\x05"
    assert frame[8:10] == b"\x00\x00"  # error code right after the correlation id: no tags


def test_request_header_v2_keeps_the_int16_client_id_then_tagged_fields() -> None:
    frame = CODEC.encode_request(messages.ApiVersionsRequest(), version=3, correlation_id=1,
                                 client_id="abc")  # fmt: skip
    # api key 18, version 3, correlation 1, client id "abc" (int16 length), no tagged fields.
    assert frame[4:18] == b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x03abc\x00"


def test_known_bytes_of_a_metadata_v12_request() -> None:
    topic = messages.MetadataRequest.MetadataRequestTopic(name="t")
    data = CODEC.encode_body(messages.MetadataRequest(topics=[topic]), 12)
    # compact array of 1, zero uuid, compact string "t", no tags; auto-create true, authz false.
    assert data == b"\x02" + bytes(16) + b"\x02t\x00" + b"\x01\x00\x00"


def test_tagged_fields_are_written_only_when_not_default_and_unknown_ones_survive() -> None:
    response = messages.FetchResponse()
    topic = messages.FetchResponse.FetchableTopicResponse(topic="t")
    partition = messages.FetchResponse.PartitionData(partition_index=0)
    topic.partitions = [partition]
    response.responses = [topic]
    plain = CODEC.encode_body(response, 12)
    partition.current_leader = messages.FetchResponse.LeaderIdAndEpoch(leader_id=3, leader_epoch=9)
    tagged = CODEC.encode_body(response, 12)
    assert len(tagged) > len(plain)
    assert CODEC.decode_body("FetchResponse", 12, tagged) == response
    response.unknown_tags = [(7, b"xyz")]
    decoded = CODEC.decode_body("FetchResponse", 12, CODEC.encode_body(response, 12))
    assert decoded.unknown_tags == [(7, b"xyz")]


def test_a_non_ignorable_field_the_version_lacks_is_refused_and_an_ignorable_one_dropped() -> None:
    response = messages.MetadataResponse(cluster_authorized_operations=5)
    with pytest.raises(ProtocolError, match="cluster_authorized_operations"):
        CODEC.encode_body(response, 12)
    response = messages.MetadataResponse(throttle_time_ms=100)  # ignorable, from v3
    assert CODEC.decode_body("MetadataResponse", 2, CODEC.encode_body(response, 2)) == (
        messages.MetadataResponse()
    )


def test_bad_values_name_their_field_path() -> None:
    partition = messages.MetadataResponse.MetadataResponsePartition(leader_id=2**40)
    topic = messages.MetadataResponse.MetadataResponseTopic(name="t", partitions=[partition])
    response = messages.MetadataResponse(topics=[messages.MetadataResponse.MetadataResponseTopic(),
                                                 topic])  # fmt: skip
    with pytest.raises(ProtocolError) as caught:
        CODEC.encode_response(response, version=12, correlation_id=1)
    assert str(caught.value).startswith("Metadata v12 response: topics[1].partitions[0].leader_id:")
    with pytest.raises(ProtocolError, match=r"topics\[0\].name: null string"):
        CODEC.encode_body(
            messages.MetadataResponse(
                topics=[messages.MetadataResponse.MetadataResponseTopic(name=None)]
            ),
            11,
        )
    with pytest.raises(ProtocolError, match="string of 40000 bytes exceeds"):
        CODEC.encode_body(messages.FindCoordinatorRequest(key="k" * 40000), 3)


def test_snake_case_names() -> None:
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"
    assert snake_case("IsrNodes") == "isr_nodes"
    assert snake_case("TopicId") == "topic_id"


# -- synthetic definitions for the types these apis do not use ----------------------------------

_SYNTHETIC = """
// A comment with "quotes" and // slashes.
{
  "apiKey": 999, "type": "request", "name": "SyntheticRequest",
  "validVersions": "0-2", "flexibleVersions": "2+",
  "fields": [
    { "name": "Ratio", "type": "float64", "versions": "0+", "default": "0.5" },
    { "name": "Port", "type": "uint16", "versions": "0+", "default": "0x2328" },
    { "name": "Opt", "type": "Inner", "versions": "1+", "nullableVersions": "1+",
      "default": "null" },
    { "name": "Ids", "type": "[]uuid", "versions": "0+" },
    { "name": "Blob", "type": "bytes", "versions": "2+", "tag": 4, "taggedVersions": "2+" }
  ],
  "commonStructs": [
    { "name": "Inner", "versions": "0+", "fields": [
      { "name": "Note", "type": "string", "versions": "0+", "about": "has // inside" }
    ]}
  ]
}
"""


def _synthetic() -> tuple[Any, dict[str, type[Struct]]]:
    from coordkit.protocol.structs import make_classes

    spec = parse_definition("Synthetic.json", _SYNTHETIC)
    return spec, make_classes(spec.structs)


def _round_trip_check(strategy: Any, encode: Any, decode: Any) -> Any:
    @_SETTINGS
    @given(strategy)
    def check(message: Struct) -> None:
        out = bytearray()
        encode(out, message)
        assert decode(bytes(out), 0) == (message, len(out))

    return check


def test_float64_uint16_nullable_structs_uuid_arrays_and_tagged_bytes() -> None:
    from coordkit.protocol.compile_decode import compile_decoder
    from coordkit.protocol.compile_encode import compile_encoder

    spec, classes = _synthetic()
    cls = classes["SyntheticRequest"]
    assert (cls().ratio, cls().port, cls().opt) == (0.5, 9000, None)
    for version in (0, 1, 2):
        encode, _ = compile_encoder(spec, version, classes)
        decode, _ = compile_decoder(spec, version, classes)

        _round_trip_check(struct_strategy(spec.struct, version, classes), encode, decode)()
    out = bytearray()
    compile_encoder(spec, 1, classes)[0](out, cls(opt=classes["Inner"](note="n"), ids=[ZERO_UUID]))
    assert bytes(out) == struct.pack(">dH", 0.5, 9000) + b"\x01\x00\x01n" + b"\x00\x00\x00\x01" + (
        bytes(16)
    )


# -- kafka-python cross-check -------------------------------------------------------------------


def _kafka_python_class(name: str) -> Any:
    from kafka.protocol import sasl
    from kafka.protocol.admin import (
        acl,
        client_quotas,
        cluster,
        configs,
        groups,
        topics,
        transactions,  # fmt: skip
        users,
    )
    from kafka.protocol.consumer import fetch, group, offsets
    from kafka.protocol.metadata import api_versions, find_coordinator, metadata
    from kafka.protocol.producer import produce, transaction

    for module in (groups, topics, fetch, group, offsets, api_versions, find_coordinator,
                   metadata, produce, transaction, cluster, transactions, configs, acl, sasl,
                   users, client_quotas):  # fmt: skip
        if hasattr(module, name):
            return getattr(module, name)
    raise AssertionError(f"kafka-python has no {name}")


def _kafka_python_versions(name: str) -> tuple[int, int]:
    lo, hi = _kafka_python_class(name)._valid_versions
    return int(lo), int(hi)


#: APIs kafka-python 3.0 has no classes for (its consumer speaks only the classic protocol and
#: has no share consumer; a client never sends the controller's requests to brokers).
NOT_IN_KAFKA_PYTHON = ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe", "LeaderAndIsr",
                       "StopReplica", "UpdateMetadata", "ControlledShutdown",
                       "AlterPartition", "AllocateProducerIds", "ShareGroupHeartbeat",
                       "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge",
                       "DescribeShareGroupOffsets", "AlterShareGroupOffsets",
                       "DeleteShareGroupOffsets")  # fmt: skip


def _shared_versions() -> list[tuple[str, int]]:
    cases = []
    for name, version in ALL_VERSIONS:
        if name.startswith(NOT_IN_KAFKA_PYTHON):
            continue
        lo, hi = _kafka_python_versions(name)
        if lo <= version <= hi:
            cases.append((name, version))
    return cases


SHARED_VERSIONS = _shared_versions()


def test_kafka_python_shares_most_versions() -> None:
    assert len(SHARED_VERSIONS) > len(ALL_VERSIONS) * 3 // 4


@pytest.mark.parametrize(("name", "version"), SHARED_VERSIONS)
def test_bytes_agree_with_kafka_python_both_ways(name: str, version: int) -> None:
    theirs = _kafka_python_class(name)

    @_SETTINGS
    @given(message_strategy(name, version))
    def check(message: Struct) -> None:
        if name == "ApiVersionsResponse":
            # kafka-python reads an ApiVersions response with an error as v0, as brokers answer
            # an unsupported version (KIP-511); that case is not a codec difference.
            message.error_code = 0
        ours = CODEC.encode_body(message, version)
        decoded_by_them = theirs.decode(ours, version=version)
        decoded_by_them._header = None  # kafka-python's decode leaves it unset
        their_bytes = decoded_by_them.encode(version=version)
        assert their_bytes == ours
        assert CODEC.decode_body(name, version, their_bytes) == message

    check()


def test_request_frames_agree_with_kafka_python_headers() -> None:
    theirs = _kafka_python_class("MetadataRequest")
    for version in (1, 8, 9, 12):
        request = theirs(topics=[theirs.MetadataRequestTopic(name="t")], version=version)
        request.with_header(correlation_id=77, client_id="kp")
        frame = request.encode(header=True, framed=True)
        decoded = CODEC.decode_request(frame[4:])
        assert (decoded.correlation_id, decoded.client_id, decoded.version) == (77, "kp", version)
        assert decoded.body.topics[0].name == "t"
        ours = CODEC.encode_request(decoded.body, version=version, correlation_id=77,
                                    client_id="kp")  # fmt: skip
        assert ours == frame


# -- hostile input ------------------------------------------------------------------------------


def _metadata_request_frame(names: list[str], version: int = 12) -> bytes:
    topics = [messages.MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    frame = CODEC.encode_request(messages.MetadataRequest(topics=topics), version=version,
                                 correlation_id=3, client_id="x")  # fmt: skip
    return frame[4:]


def test_protocol_error_is_a_coordkit_error() -> None:
    assert issubclass(ProtocolError, CoordkitError)


def test_a_string_length_beyond_the_frame_names_api_version_and_path() -> None:
    frame = _metadata_request_frame(["a", "b", "c", "d"])
    at = frame.rindex(b"\x02d")  # the fourth topic's compact name: length 1 + 1, "d"
    bad = frame[:at] + b"\xf1\xa2\x04" + b"wxyz"  # uvarint 70001: a 70000-byte string
    with pytest.raises(ProtocolError) as caught:
        CODEC.decode_request(bad)
    error = caught.value
    assert str(error) == (
        "Metadata v12 request: topics[3].name: string length 70000 exceeds the 4 bytes left"
    )
    assert (error.api, error.version, error.path, error.correlation_id) == (
        "Metadata", 12, "topics[3].name", 3,
    )  # fmt: skip


@pytest.mark.parametrize("version", [0, 4, 9, 12])
def test_every_truncation_of_a_request_is_refused(version: int) -> None:
    frame = _metadata_request_frame(["alpha", "beta"], version)
    CODEC.decode_request(frame)
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError, match=f"v{version}" if cut >= 4 else "header"):
            CODEC.decode_request(frame[:cut])


def test_truncated_fixed_fields_name_the_field() -> None:
    body = CODEC.encode_body(messages.HeartbeatResponse(throttle_time_ms=1, error_code=27), 2)
    with pytest.raises(
        ProtocolError, match="Heartbeat v2 response: error_code: int16 needs 2 bytes, 1 left"
    ):
        CODEC.decode_body("HeartbeatResponse", 2, body[:5])


def test_negative_and_huge_lengths_and_counts() -> None:
    frame = bytearray(_metadata_request_frame(["a"], 1))
    array_at = 4 + 4 + 2 + 1
    bad = bytes(frame[:array_at]) + struct.pack(">i", -7) + bytes(frame[array_at + 4 :])
    with pytest.raises(ProtocolError, match=r"Metadata v1 request: topics: array length -7"):
        CODEC.decode_request(bad)
    bad = bytes(frame[:array_at]) + struct.pack(">i", 2**31 - 1) + bytes(frame[array_at + 4 :])
    with pytest.raises(ProtocolError, match="array of 2147483647 entries needs at least"):
        CODEC.decode_request(bad)
    name_at = array_at + 4
    bad = bytes(frame[:name_at]) + struct.pack(">h", -2) + bytes(frame[name_at + 2 :])
    with pytest.raises(ProtocolError, match=r"topics\[0\].name: string length -2 is negative"):
        CODEC.decode_request(bad)


def test_a_huge_compact_count_is_refused_before_allocating() -> None:
    frame = bytearray(_metadata_request_frame([]))
    count_at = 12  # after the header: key, version, correlation id, client id "x", no tags
    bad = bytes(frame[:count_at]) + b"\xff\xff\xff\xff\x0f" + bytes(frame[count_at + 1 :])
    with pytest.raises(ProtocolError, match="array of 4294967294 entries"):
        CODEC.decode_request(bad)
    bad = bytes(frame[:count_at]) + b"\xff\xff\xff\xff\xff\x01" + bytes(frame[count_at + 1 :])
    with pytest.raises(ProtocolError, match="varint"):
        CODEC.decode_request(bad)


def test_invalid_utf8_is_refused_with_its_path() -> None:
    frame = bytearray(_metadata_request_frame(["ab"]))
    at = frame.index(b"ab")
    frame[at : at + 2] = b"\xc3\x28"
    with pytest.raises(ProtocolError, match=r"topics\[0\].name: invalid UTF-8"):
        CODEC.decode_request(bytes(frame))


def test_unknown_api_keys_and_versions_outside_valid_versions() -> None:
    with pytest.raises(ProtocolError, match="api key 99 v0 request: unknown api key") as caught:
        CODEC.decode_request(struct.pack(">hhi", 99, 0, 12) + b"\x00\x00")
    assert caught.value.correlation_id == 12
    with pytest.raises(
        ProtocolError, match=r"Metadata v14 request: unsupported version \(valid: 0-13\)"
    ):
        CODEC.decode_request(struct.pack(">hhi", 3, 14, 5) + b"\x00\x00")
    # A client newer than the broker: the error keeps what a broker needs to answer ApiVersions
    # v0 with UNSUPPORTED_VERSION (Kafka's KIP-511 behaviour).
    with pytest.raises(ProtocolError) as caught:
        CODEC.decode_request(struct.pack(">hhi", 18, 6, 9) + b"\x00\x00\x00")
    assert (caught.value.api, caught.value.version, caught.value.correlation_id) == (
        "ApiVersions",
        6,
        9,
    )
    with pytest.raises(ProtocolError, match=r"Fetch v-1 request: unsupported version"):
        CODEC.decode_request(struct.pack(">hhi", 1, -1, 5))
    with pytest.raises(ProtocolError, match="unknown api 'Nope'"):
        CODEC.decode_response("Nope", 0, b"")


def test_bytes_after_a_request_are_passed_over_and_bad_tagged_sections_refused() -> None:
    frame = _metadata_request_frame(["a"])
    # Kafka's readers stop after the last field a version defines; what follows is ignored.
    padded = CODEC.decode_request(frame + b"\x00\x07")
    assert padded.ignored_bytes == 2
    assert padded.body == CODEC.decode_request(frame).body
    assert CODEC.decode_request(frame).ignored_bytes == 0
    # A response is only ever decoded by coordkit's own client side: that stays strict.
    response = CODEC.encode_response(messages.HeartbeatResponse(), version=2, correlation_id=1)
    with pytest.raises(ProtocolError, match="1 bytes left over after the response"):
        CODEC.decode_response("Heartbeat", 2, response[4:] + b"\x00")
    # A tagged field whose size runs past the frame.
    bad = frame[:-1] + b"\x01\x05\x09ab"
    with pytest.raises(ProtocolError, match="tagged field 5: size 9 exceeds"):
        CODEC.decode_request(bad)


def test_frame_size_limit_is_configurable_and_checked_before_buffering() -> None:
    small = KafkaCodec(max_frame_bytes=64)
    with pytest.raises(ProtocolError, match="frame of 65 bytes exceeds the limit of 64 bytes"):
        small.frame_size(struct.pack(">i", 65))
    with pytest.raises(ProtocolError, match="frame size -1 is negative"):
        small.frame_size(struct.pack(">i", -1))
    assert KafkaCodec().max_frame_bytes == 100 * 1024 * 1024
    reader = FrameReader(small)
    one = struct.pack(">i", 3) + b"abc"
    assert reader.feed(one + one[:5]) == [b"abc"]
    assert reader.pending == 5
    assert reader.feed(one[5:] + struct.pack(">i", 0)) == [b"abc", b""]
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        reader.feed(struct.pack(">i", 10**6))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.sampled_from(sorted(APIS)), st.integers(0, 16))
def test_random_bytes_never_escape_as_anything_but_protocol_error(
    data: bytes, api: str, version: int
) -> None:
    schema = APIS[api]
    header = struct.pack(">hhi", schema.key, version, 1)
    for frame in (header + data, data):
        try:
            CODEC.decode_request(frame)
        except ProtocolError:
            pass
    if version in schema.versions:
        try:
            CODEC.decode_response(api, version, data)
        except ProtocolError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutated_valid_frames_fail_only_with_protocol_error(data: st.DataObject) -> None:
    name, version = data.draw(st.sampled_from(ALL_VERSIONS))
    message = data.draw(message_strategy(name, version))
    body = bytearray(CODEC.encode_body(message, version))
    if body:
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(0, len(body) - 1))
            body[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    error = _protocol_error(lambda: CODEC.decode_body(name, version, bytes(body[:cut])))
    assert error is None or f"v{version}" in str(error)


def test_decoding_a_memoryview_gives_records_as_views_and_bytes_as_bytes() -> None:
    r = messages.ProduceRequest
    partition = r.PartitionProduceData(index=0, records=b"batch-bytes")
    body = r(acks=1, topic_data=[r.TopicProduceData(name="t", partition_data=[partition])])
    frame = CODEC.encode_request(body, version=9, correlation_id=1)[4:]
    from_view = CODEC.decode_request(memoryview(frame)).body
    from_bytes = CODEC.decode_request(frame).body
    records = from_view.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert bytes(records) == b"batch-bytes"
    assert isinstance(from_bytes.topic_data[0].partition_data[0].records, bytes)
    assert from_view == from_bytes == body


def test_decoded_messages_pickle_and_copy_with_lazy_defaults_unset() -> None:
    import copy
    import pickle

    r = messages.FetchResponse
    partition = r.PartitionData(partition_index=1, records=b"x")
    response = r(responses=[r.FetchableTopicResponse(topic="t", partitions=[partition])])
    decoded = CODEC.decode_body("FetchResponse", 12, CODEC.encode_body(response, 12))
    assert pickle.loads(pickle.dumps(decoded)) == decoded == copy.deepcopy(decoded) == response
    assert decoded.responses[0].partitions[0].current_leader == r.LeaderIdAndEpoch()
    with pytest.raises(AttributeError, match="has no field 'no_such_field'"):
        _ = decoded.no_such_field


def test_uuid_fields_decode_as_uuid() -> None:
    topic_id = uuid.uuid4()
    topic = messages.MetadataRequest.MetadataRequestTopic(topic_id=topic_id, name=None)
    data = CODEC.encode_body(messages.MetadataRequest(topics=[topic]), 12)
    assert CODEC.decode_body("MetadataRequest", 12, data).topics[0].topic_id == topic_id
