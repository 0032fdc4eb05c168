"""The request frames librdkafka 2.16 and kafka-python 3.0 send in their ordinary paths, as
recorded by ``tests/data/frames/record.py``: each decodes, and encodes again byte for byte.

A frame may carry bytes after the fields its version defines (librdkafka's Metadata for all
topics); Kafka passes over them, and so does the codec: the body is what precedes them.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from coordkit.protocol import KafkaCodec
from coordkit.serve.dispatch import SUPPORTED, Dispatcher

FRAMES = Path(__file__).parents[1] / "data" / "frames"
CODEC = KafkaCodec()


def _corpus() -> list[Any]:
    cases = []
    for path in sorted(FRAMES.glob("*.json")):
        recorded = json.loads(path.read_text())
        for entry in recorded["frames"]:
            label = f"{path.stem}-{entry['scenario']}-{entry['api']}-v{entry['version']}"
            cases.append(pytest.param(path.stem, entry, id=label))
    return cases


CORPUS = _corpus()


def test_the_corpus_covers_each_clients_ordinary_paths() -> None:
    kinds = {(case.values[0], case.values[1]["api"]) for case in CORPUS}
    ordinary = {"ApiVersions", "Metadata", "CreateTopics", "CreatePartitions", "DeleteTopics",
                "InitProducerId", "Produce", "FindCoordinator", "JoinGroup", "SyncGroup",
                "OffsetFetch", "ListOffsets", "Fetch", "OffsetCommit", "LeaveGroup",
                "ListGroups", "DescribeGroups"}  # fmt: skip
    for client in ("librdkafka", "kafka-python"):
        assert ordinary <= {api for c, api in kinds if c == client}, client


@pytest.mark.parametrize(("client", "entry"), CORPUS)
def test_a_recorded_frame_decodes_and_encodes_again_byte_for_byte(
    client: str, entry: dict[str, Any]
) -> None:
    frame = bytes.fromhex(entry["frame"])
    lo, hi, _ = SUPPORTED[entry["api"]]
    assert lo <= entry["version"] <= hi, "every recorded request is served at its version"
    request = CODEC.decode_request(frame)
    assert (request.api.name, request.version) == (entry["api"], entry["version"])
    again = CODEC.encode_request(
        request.body,
        version=request.version,
        correlation_id=request.correlation_id,
        client_id=request.client_id,
    )
    assert again[4:] == frame[: len(frame) - request.ignored_bytes]


def test_librdkafkas_metadata_for_all_topics_is_read_as_kafka_reads_it() -> None:
    """librdkafka 2.16 reserves four bytes for the topic count, writes the null compact array
    into the first, and sends the three left ahead of the real flags and tagged fields."""
    frames = [
        bytes.fromhex(case.values[1]["frame"])
        for case in CORPUS
        if case.values[0] == "librdkafka" and case.values[1]["api"] == "Metadata"
    ]
    padded = [CODEC.decode_request(f) for f in frames if CODEC.decode_request(f).ignored_bytes]
    assert padded, "the corpus lost librdkafka's padded Metadata request"
    for request in padded:
        assert request.version >= 9
        assert request.ignored_bytes == 3
        assert request.body.topics is None  # all topics
        assert request.body.allow_auto_topic_creation is False  # the padding, as Kafka reads it


def test_the_dispatcher_answers_an_api_versions_newer_than_its_own_with_v0_unsupported() -> None:
    """KIP-511: a client newer than the broker (here kafka-python's ApiVersions v4 frame raised
    to v9) is answered at v0 with UNSUPPORTED_VERSION and ApiVersions' own range."""
    frame = next(
        bytes.fromhex(case.values[1]["frame"])
        for case in CORPUS
        if case.values[1]["api"] == "ApiVersions" and case.values[1]["version"] == 4
    )
    frame = frame[:2] + (9).to_bytes(2, "big") + frame[4:]
    answer = asyncio.run(Dispatcher(None, CODEC).answer(frame))  # type: ignore[arg-type]
    assert answer is not None
    _, response = CODEC.decode_response("ApiVersions", 0, answer[4:])
    assert response.error_code == 35  # UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
        (18, 0, SUPPORTED["ApiVersions"][1])
    ]
