"""Kafka protocol codec benchmarks: ``python tests/benchmarks/run.py protocol [--quick]``.

Encode and decode speed of coordkit's generated codec (``coordkit.protocol``) against
kafka-python 3.x's own generated structs (``kafka.protocol``), message for message, on the
bodies a broker handles most:

* **metadata**: a Metadata v12 response (100 topics x 12 partitions, 3 replicas) and request;
* **fetch**: a Fetch v12 response (10 topics x 12 partitions, 4 KiB of records each) and request;
* **produce**: a Produce v9 request (4 topics x 6 partitions, 16 KiB of records each) and response;
* **records**: a record batch v2 of 100 records (100-byte values), encoded and decoded by
  ``coordkit.protocol.records`` and by kafka-python's ``DefaultRecordBatchBuilder`` /
  ``DefaultRecordBatch``.

Decoding reads from a memoryview over the bytes (records fields then come back as views, not
copies). Each line gives messages per second for both and the ratio (ours / theirs; above 1 is faster).
Best of seven rounds, ours and theirs alternating. ``--quick`` runs a tenth of the iterations.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from coordkit.protocol import KafkaCodec, messages
from coordkit.protocol.records import decode_batch, encode_batch, new_batch

CODEC = KafkaCodec()


def race(
    rounds: int, count: int, ours: Callable[[], object], theirs: Callable[[], object]
) -> tuple[float, float]:
    """Best time of ``count`` calls for each side, the two alternating round by round so that
    a busy machine slows both alike."""
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for side, work in enumerate((ours, theirs)):
            started = time.perf_counter()
            for _ in range(count):
                work()
            best[side] = min(best[side], time.perf_counter() - started)
    return best[0], best[1]


def report(case: str, op: str, count: int, ours: float, theirs: float) -> None:
    ours_rate, theirs_rate = count / ours, count / theirs
    ratio = ours_rate / theirs_rate
    print(
        f"{case:<22} {op:<7} coordkit {ours_rate:>11,.0f}/s   kafka-python {theirs_rate:>11,.0f}/s"
        f"   ratio {ratio:5.2f}",
        flush=True,
    )
    print(
        json.dumps(
            {
                "bench": "protocol",
                "case": case,
                "op": op,
                "count": count,
                "coordkit_per_second": round(ours_rate),
                "kafka_python_per_second": round(theirs_rate),
                "ratio": round(ratio, 3),
            }
        ),
        flush=True,
    )


def compare(case: str, body: Any, version: int, theirs_cls: Any, count: int) -> None:
    name = type(body).KAFKA_NAME
    data = CODEC.encode_body(body, version)
    theirs = theirs_cls.decode(data, version=version)
    theirs._header = None  # kafka-python's decode leaves it unset; encode reads it
    if theirs.encode(version=version) != data:
        raise SystemExit(f"{case}: kafka-python encodes different bytes; not comparable")
    encode = race(
        7, count, lambda: CODEC.encode_body(body, version), lambda: theirs.encode(version=version)
    )
    report(case, "encode", count, *encode)
    # Both decode from a memoryview over the frame, as a broker reading into a buffer would:
    # kafka-python makes one of any input, coordkit then gives records as views (no copy).
    view = memoryview(data)
    decode = race(
        7,
        count,
        lambda: CODEC.decode_body(name, version, view),
        lambda: theirs_cls.decode(view, version=version),
    )
    report(case, "decode", count, *decode)


def metadata_response() -> Any:
    r = messages.MetadataResponse
    brokers = [
        r.MetadataResponseBroker(node_id=i, host=f"broker-{i}.example", port=9092, rack="a")
        for i in range(6)
    ]
    topics = []
    for t in range(100):
        partitions = [
            r.MetadataResponsePartition(
                partition_index=p,
                leader_id=p % 6,
                leader_epoch=3,
                replica_nodes=[p % 6, (p + 1) % 6, (p + 2) % 6],
                isr_nodes=[p % 6, (p + 1) % 6],
            )
            for p in range(12)
        ]
        topics.append(
            r.MetadataResponseTopic(name=f"topic-{t}", topic_id=uuid.uuid4(), partitions=partitions)
        )
    return r(brokers=brokers, cluster_id="cluster", controller_id=1, topics=topics)


def metadata_request() -> Any:
    r = messages.MetadataRequest
    return r(topics=[r.MetadataRequestTopic(name=f"topic-{t}") for t in range(100)])


def fetch_response() -> Any:
    r = messages.FetchResponse
    records = encode_batch(new_batch([(None, b"v" * 400)] * 10, timestamp=1))
    topics = [
        r.FetchableTopicResponse(
            topic=f"topic-{t}",
            partitions=[
                r.PartitionData(
                    partition_index=p,
                    high_watermark=1000,
                    last_stable_offset=1000,
                    log_start_offset=0,
                    records=records,
                )
                for p in range(12)
            ],
        )
        for t in range(10)
    ]
    return r(session_id=1, responses=topics)


def fetch_request() -> Any:
    r = messages.FetchRequest
    topics = [
        r.FetchTopic(
            topic=f"topic-{t}",
            partitions=[
                r.FetchPartition(partition=p, fetch_offset=1000, partition_max_bytes=1 << 20)
                for p in range(12)
            ],
        )
        for t in range(10)
    ]
    return r(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, topics=topics)


def produce_request() -> Any:
    r = messages.ProduceRequest
    records = encode_batch(new_batch([(None, b"v" * 160)] * 100, timestamp=1))
    topics = [
        r.TopicProduceData(
            name=f"topic-{t}",
            partition_data=[r.PartitionProduceData(index=p, records=records) for p in range(6)],
        )
        for t in range(4)
    ]
    return r(acks=-1, timeout_ms=30000, topic_data=topics)


def produce_response() -> Any:
    r = messages.ProduceResponse
    topics = [
        r.TopicProduceResponse(
            name=f"topic-{t}",
            partition_responses=[
                r.PartitionProduceResponse(index=p, base_offset=1000 * p) for p in range(6)
            ],
        )
        for t in range(4)
    ]
    return r(responses=topics)


def record_batches(count: int) -> None:
    entries = [(None, bytes(100))] * 100
    batch = new_batch(entries, timestamp=1_700_000_000_000)
    data = encode_batch(batch)

    def theirs_encode() -> bytes:
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=0,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 20,
        )
        for i, (key, value) in enumerate(entries):
            builder.append(i, timestamp=1_700_000_000_000, key=key, value=value, headers=[])
        return bytes(builder.build())

    def theirs_decode() -> list[Any]:
        batch = DefaultRecordBatch(bytearray(data))
        batch.validate_crc()
        return list(batch)

    ours_encode = lambda: encode_batch(new_batch(entries, timestamp=1_700_000_000_000))  # noqa: E731
    report("records 100x100B", "encode", count, *race(7, count, ours_encode, theirs_encode))
    ours_decode = lambda: decode_batch(data)  # noqa: E731
    report("records 100x100B", "decode", count, *race(7, count, ours_decode, theirs_decode))


def main(argv: list[str]) -> None:
    scale = 10 if "--quick" in argv else 1
    messages.compile_all()
    compare("metadata v12 response", metadata_response(), 12, MetadataResponse, 200 // scale)
    compare("metadata v12 request", metadata_request(), 12, MetadataRequest, 2000 // scale)
    compare("fetch v12 response", fetch_response(), 12, FetchResponse, 1000 // scale)
    compare("fetch v12 request", fetch_request(), 12, FetchRequest, 1000 // scale)
    compare("produce v9 request", produce_request(), 9, ProduceRequest, 2000 // scale)
    compare("produce v9 response", produce_response(), 9, ProduceResponse, 2000 // scale)
    record_batches(500 // scale)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
