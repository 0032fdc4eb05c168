"""Retention on a served cluster (#34 item 3): segments rolled by a topic's ``segment.bytes``,
deleted by its ``retention.ms`` at each ``log.retention.check.interval.ms``, the leader's log
start moving (a Fetch below it: OFFSET_OUT_OF_RANGE; ListOffsets EARLIEST: the new start; by
timestamp: the oldest record left), its followers' log starts following, their files gone too.
(Kafka's answers to the same requests: tests/differential/scenarios/retention.py.)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from coordkit.protocol import messages
from coordkit.protocol.records import decode_batches, encode_batch, new_batch
from coordkit.serve.broker_config import parse_broker_configs
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401
from serve.test_replication import _state

Produce = messages.ProduceRequest
Fetch = messages.FetchRequest
ListOffsets = messages.ListOffsetsRequest
OFFSET_OUT_OF_RANGE = 1
TP = ("aged", 0)
HOUR_MS = 3_600_000


def _produce(client: RawClient, value: bytes, timestamp: int) -> int:
    records = encode_batch(new_batch([(b"k", value)], timestamp=timestamp))
    data = Produce.TopicProduceData(
        name=TP[0], partition_data=[Produce.PartitionProduceData(index=TP[1], records=records)]
    )
    answer = client.call(Produce(acks=-1, timeout_ms=10_000, topic_data=[data]), 9)
    partition = answer.responses[0].partition_responses[0]
    assert partition.error_code == 0
    return int(partition.base_offset)


def _fetch(client: RawClient, offset: int) -> Any:
    partition = Fetch.FetchPartition(partition=TP[1], current_leader_epoch=-1, fetch_offset=offset,
                                     log_start_offset=-1, partition_max_bytes=1 << 20)  # fmt: skip
    request = Fetch(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                    isolation_level=0, session_id=0, session_epoch=-1,
                    topics=[Fetch.FetchTopic(topic=TP[0], partitions=[partition])],
                    forgotten_topics_data=[], rack_id="")  # fmt: skip
    return client.call(request, 12).responses[0].partitions[0]


def _offset(client: RawClient, timestamp: int) -> tuple[int, int]:
    request = ListOffsets(replica_id=-1, isolation_level=0, topics=[ListOffsets.ListOffsetsTopic(
        name=TP[0], partitions=[ListOffsets.ListOffsetsPartition(
            partition_index=TP[1], current_leader_epoch=-1, timestamp=timestamp)])])  # fmt: skip
    found = client.call(request, 7).topics[0].partitions[0]
    assert found.error_code == 0
    return int(found.offset), int(found.timestamp)


def _log_starts(server: InProcessServer) -> dict[int, tuple[int, int]]:
    """Each broker's ``(log start, log end)`` of TP."""

    def read() -> dict[int, tuple[int, int]]:
        found = {}
        for broker in range(3):
            log = server.context(broker).logs.find(TP)
            if log is not None:
                found[broker] = (log.log_start, log.log_end)
        return found

    return server.on_loop(read)


def test_retention_moves_the_log_start_of_leader_and_followers(
    in_process: InProcessFactory, tmp_path: Path
) -> None:
    settings = parse_broker_configs(["log.retention.check.interval.ms=100"]).serve_settings()
    data_dir = tmp_path / "logs"
    server = in_process(brokers=3, data_dir=data_dir, settings=settings)
    one = len(encode_batch(new_batch([(b"k", b"old-00")], timestamp=0)))
    # Segments of two batches, kept for ever while they are written: a check between the last
    # old record and the first fresh one would find every segment expired and delete them all,
    # as Kafka does (the log would then start at 5).
    server.server.cluster.create_topic(
        TP[0], 1, 3, config={"segment.bytes": str(2 * one), "retention.ms": "-1"},
        assignment={0: [0, 1, 2]},
    )  # fmt: skip
    wait_for(lambda: _state(server, TP) is not None and len(_state(server, TP).isr) == 3, 30,
             "the topic's leader and ISR")  # fmt: skip
    client = RawClient(server.address(0))
    try:
        now = int(time.time() * 1000)
        # Five records an hour old, then five fresh ones (a segment of an old and a fresh one
        # in the middle is kept: its newest record is fresh).
        for i in range(5):
            assert _produce(client, b"old-%02d" % i, now - HOUR_MS + i) == i
        for i in range(5):
            assert _produce(client, b"new-%02d" % i, now + i) == 5 + i
        # Then what is older than a minute goes (a config change, as kafka-configs makes it).
        server.server.cluster.admin.set_config(
            TP[0], {"segment.bytes": str(2 * one), "retention.ms": "60000"}
        )
        # Segments 0-1 and 2-3 go; 4-5 holds a fresh record.
        wait_for(lambda: _offset(client, -2) == (4, -1), 30, "the log start to move to 4")
        answer = _fetch(client, 3)
        assert answer.error_code == OFFSET_OUT_OF_RANGE
        assert (answer.high_watermark, answer.log_start_offset, answer.records) == (-1, -1, b"")
        answer = _fetch(client, 4)
        assert (answer.error_code, answer.log_start_offset, answer.high_watermark) == (0, 4, 10)
        assert [r.value for b in decode_batches(answer.records) for r in b.records][:2] == [
            b"old-04", b"new-00"
        ]  # fmt: skip
        # By timestamp: the oldest record left, for a time before every record.
        assert _offset(client, now - 2 * HOUR_MS) == (4, now - HOUR_MS + 4)
        assert _offset(client, now + 2) == (7, now + 2)
        # The followers' logs start there too, and their old segments are gone from disk.
        wait_for(lambda: {b: s for b, (s, _) in _log_starts(server).items()} == {0: 4, 1: 4, 2: 4},
                 30, "the followers' log starts to follow")  # fmt: skip
        for broker in range(3):
            partition = data_dir / f"broker-{broker}" / "aged-0"
            wait_for(lambda p=partition: min(f.name for f in p.glob("*.log")) == f"{4:020d}.log",
                     30, f"broker {broker}'s segments below offset 4 to go")  # fmt: skip
    finally:
        client.close()
    server.close()
    # The restarted brokers load the log from 4: nothing below it comes back.
    again = in_process(brokers=3, store_url=server.store_url, data_dir=data_dir, settings=settings)
    assert {b: s for b, (s, _) in _log_starts(again).items()} == {0: 4, 1: 4, 2: 4}
    again.close()
