"""Replication between the brokers of one ``coordkit serve``: follower logs, the high watermark,
acks=0 / 1 / all, on every backend (``--backend``)."""

from __future__ import annotations

from typing import Any

import pytest

from coordkit.engine import EngineConfig
from coordkit.engine.states import TP
from coordkit.protocol import messages
from coordkit.protocol.records import decode_batches, encode_batch, new_batch
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401

Produce = messages.ProduceRequest
Fetch = messages.FetchRequest
ListOffsets = messages.ListOffsetsRequest
REQUEST_TIMED_OUT = 7


def _topic(server: InProcessServer, name: str, partitions: int, factor: int) -> None:
    server.server.cluster.create_topic(name, partitions, factor)
    wait_for(lambda: all(_state(server, (name, p)) for p in range(partitions)), 30, "leaders")
    # Every follower in the ISR from the start (as a new Kafka topic's).
    for p in range(partitions):
        assert len(_state(server, (name, p)).isr) == factor


def _state(server: InProcessServer, tp: TP) -> Any:
    state = server.server.cluster.replication.log(tp)
    return state if state is not None and state.leader >= 0 else None


def _produce(
    client: RawClient, tp: TP, *values: bytes, acks: int = -1, timeout_ms: int = 10_000
) -> Any:
    records = encode_batch(new_batch([(b"k", v) for v in values]))
    data = Produce.TopicProduceData(
        name=tp[0],
        partition_data=[Produce.PartitionProduceData(index=tp[1], records=records)],
    )
    request = Produce(acks=acks, timeout_ms=timeout_ms, topic_data=[data])
    if acks == 0:
        client.send(request, 9)
        return None
    return client.call(request, 9).responses[0].partition_responses[0]


def _fetch(client: RawClient, tp: TP, offset: int = 0, max_wait_ms: int = 0) -> Any:
    request = Fetch(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            Fetch.FetchTopic(
                topic=tp[0],
                partitions=[
                    Fetch.FetchPartition(
                        partition=tp[1], fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    return client.call(request, 12).responses[0].partitions[0]


def _latest(client: RawClient, tp: TP) -> int:
    request = ListOffsets(
        replica_id=-1,
        topics=[
            ListOffsets.ListOffsetsTopic(
                name=tp[0],
                partitions=[ListOffsets.ListOffsetsPartition(partition_index=tp[1], timestamp=-1)],
            )
        ],
    )
    return int(client.call(request, 7).topics[0].partitions[0].offset)


def _values(records: bytes) -> list[bytes | None]:
    return [r.value for b in decode_batches(records) for r in b.records]


def _replica_bytes(server: InProcessServer, tp: TP, broker: int) -> tuple[int, bytes]:
    def read() -> tuple[int, bytes]:
        log = server.context(broker).logs.find(tp)
        return (0, b"") if log is None else (log.log_end, log.read(0, 1 << 30))

    return server.on_loop(read)


def test_followers_keep_the_leaders_batches(in_process: InProcessFactory, raw_client: Any) -> None:
    server = in_process(brokers=3)
    _topic(server, "orders", 3, 3)
    for partition in range(3):
        tp = ("orders", partition)
        leader = _state(server, tp).leader
        client = raw_client(server.address(leader))
        for i in range(5):
            answer = _produce(
                client, tp, f"{partition}-{i}a".encode(), f"{partition}-{i}b".encode()
            )
            assert (answer.error_code, answer.base_offset) == (0, 2 * i)
        # acks=all answered: every ISR member has the batches, byte for byte.
        leader_end, leader_bytes = _replica_bytes(server, tp, leader)
        assert leader_end == 10
        for broker in range(3):
            assert _replica_bytes(server, tp, broker) == (leader_end, leader_bytes)
        assert _state(server, tp).hw == 10
        assert _values(_fetch(client, tp).records)[:2] == [
            f"{partition}-0a".encode(), f"{partition}-0b".encode()
        ]  # fmt: skip


def test_consumers_read_only_up_to_the_high_watermark(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=3)
    _topic(server, "hw", 1, 3)
    tp = ("hw", 0)
    leader = _state(server, tp).leader
    client = raw_client(server.address(leader))
    assert _produce(client, tp, b"committed").error_code == 0
    stuck = next(b for b in range(3) if b != leader)
    server.replicas.pause(stuck)
    answer = _produce(client, tp, b"only-on-some", acks=1)
    assert (answer.error_code, answer.base_offset) == (0, 1)
    wait_for(lambda: _replica_bytes(server, tp, 3 - leader - stuck)[0] == 2, 10, "other follower")
    # The leader has 2 records, the stuck ISR member 1: the high watermark is 1.
    assert _replica_bytes(server, tp, leader)[0] == 2
    assert _replica_bytes(server, tp, stuck)[0] == 1
    fetched = _fetch(client, tp)
    assert (fetched.high_watermark, fetched.last_stable_offset) == (1, 1)
    assert _values(fetched.records) == [b"committed"]
    assert _latest(client, tp) == 1
    assert _values(_fetch(client, tp, offset=1).records) == []
    server.replicas.resume(stuck)
    wait_for(lambda: _latest(client, tp) == 2, 10, "the high watermark to reach 2")
    assert _values(_fetch(client, tp, offset=1).records) == [b"only-on-some"]


def test_a_long_poll_wakes_when_the_high_watermark_moves(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=2)
    _topic(server, "poll", 1, 2)
    tp = ("poll", 0)
    leader = _state(server, tp).leader
    server.replicas.pause(1 - leader)
    _produce(raw_client(server.address(leader)), tp, b"x", acks=1)
    consumer = raw_client(server.address(leader))
    correlation = consumer.send(
        Fetch(replica_id=-1, max_wait_ms=20_000, min_bytes=1, max_bytes=1 << 20,
              topics=[Fetch.FetchTopic(topic="poll", partitions=[Fetch.FetchPartition(
                  partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]),
        12,
    )  # fmt: skip
    server.replicas.resume(1 - leader)
    got, response = consumer.receive("Fetch", 12)
    assert got == correlation
    assert _values(response.responses[0].partitions[0].records) == [b"x"]


def test_acks_all_times_out_while_an_isr_member_is_stuck(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=3)
    _topic(server, "stuck", 1, 3)
    tp = ("stuck", 0)
    leader = _state(server, tp).leader
    server.replicas.pause(next(b for b in range(3) if b != leader))
    client = raw_client(server.address(leader))
    answer = _produce(client, tp, b"waits", timeout_ms=500)
    assert answer.error_code == REQUEST_TIMED_OUT
    # acks=1 does not wait for followers.
    assert _produce(client, tp, b"leader only", acks=1).error_code == 0


def test_acks_all_goes_on_once_the_stuck_follower_leaves_the_isr(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=3, config=EngineConfig(replica_lag_time_max=1.0))
    _topic(server, "shrink", 1, 3)
    tp = ("shrink", 0)
    leader = _state(server, tp).leader
    stuck = next(b for b in range(3) if b != leader)
    server.replicas.pause(stuck)
    answer = _produce(raw_client(server.address(leader)), tp, b"after shrink", timeout_ms=20_000)
    assert (answer.error_code, answer.base_offset) == (0, 0)
    assert stuck not in _state(server, tp).isr  # the leader shrank it out (replica.lag.time.max)
    server.replicas.resume(stuck)
    # Caught up again, it rejoins the ISR.
    wait_for(lambda: stuck in _state(server, tp).isr, 20, "the follower to rejoin the ISR")


def test_acks_0_gets_no_response(in_process: InProcessFactory, raw_client: Any) -> None:
    server = in_process(brokers=1)
    _topic(server, "fire", 1, 1)
    tp = ("fire", 0)
    client = raw_client(server.address(0))
    _produce(client, tp, b"and forget", acks=0)
    # The next answer on the connection is the next request's: none came for the produce.
    correlation = client.send(messages.ApiVersionsRequest(), 3)
    got, _ = client.receive("ApiVersions", 3)
    assert got == correlation
    assert _values(_fetch(client, tp).records) == [b"and forget"]


@pytest.mark.parametrize("acks", [1, -1])
def test_a_follower_refuses_produce(
    in_process: InProcessFactory, raw_client: Any, acks: int
) -> None:
    server = in_process(brokers=2)
    _topic(server, "lead", 1, 2)
    tp = ("lead", 0)
    follower = 1 - _state(server, tp).leader
    answer = _produce(raw_client(server.address(follower)), tp, b"x", acks=acks)
    assert answer.error_code == 6  # NOT_LEADER_OR_FOLLOWER
    assert _replica_bytes(server, tp, follower) == (0, b"")
