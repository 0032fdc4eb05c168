"""The producer on the engine, on every backend: keyed routing equal to Kafka's, metadata refresh
after a leader change, static (four-layer) versus ``/brokers/ids`` broker discovery, and acks=all
records lost only to unclean elections. Store-free producer mechanics at the end."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.config import UNCLEAN_LEADER_ELECTION_ENABLE
from coordkit.engine.producer import (
    BrokerUnavailableError,
    FixedMetadata,
    NotLeaderError,
    Producer,
    ProducerClosedError,
    ProducerConfig,
    StaticDiscovery,
    UnknownTopicOrPartitionError,
)
from coordkit.engine.states import TP
from coordkit.errors import UnknownNameError
from coordkit.kafka.model import NO_LEADER
from coordkit.strategies.partitioning import (
    InvalidPartitionError,
    ProducerRecord,
    partition_for_key,
)
from coordkit.support.clock import ManualClock
from harness.vectors import kafka_vectors
from harness.waiting import wait_for

NO_REBALANCE = EngineConfig(auto_leader_rebalance=False)


@pytest.fixture
def producers() -> Iterator[Callable[..., Producer]]:
    opened: list[Producer] = []

    def factory(cluster: Cluster, **options: Any) -> Producer:
        config = options.pop("config", None) or ProducerConfig(seed=11, retry_backoff=0.02)
        producer = Producer.for_cluster(cluster, config, **options)
        opened.append(producer)
        return producer

    yield factory
    for producer in opened:
        producer.close(flush=False)


def _config(partitioner: str, **options: Any) -> ProducerConfig:
    return ProducerConfig(partitioner=partitioner, seed=11, retry_backoff=0.02, **options)


def test_keyed_records_land_where_kafkas_rule_says(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any], producers: Any
) -> None:
    cluster = make_cluster(3, config=NO_REBALANCE)
    cluster.create_topic("orders", 6, 2)
    view = until(cluster, lambda v: len(v.partitions) == 6, "orders to get leaders")
    producer = producers(cluster, config=_config("murmur2"))
    keys = [c["key"] for c in kafka_vectors()["partition_for_key"] if c["num_partitions"] == 6]
    keys += [os.urandom(8).hex() for _ in range(40)]
    futures = [(k, producer.send(ProducerRecord("orders", b"v", key=k))) for k in keys]
    producer.flush()
    offsets: dict[TP, list[int]] = {}
    for key, future in futures:
        meta = future.result(timeout=0)
        assert meta.partition == partition_for_key(key.encode(), 6)
        assert meta.broker == view.partition("orders", meta.partition).leader
        offsets.setdefault((meta.topic, meta.partition), []).append(meta.offset)
    for case in kafka_vectors()["partition_for_key"]:
        if case["num_partitions"] == 6:
            assert dict(futures)[case["key"]].result(timeout=0).partition == case["partition"]
    # Offsets are consecutive per partition, and the leaders' logs hold exactly those records.
    for tp, got in offsets.items():
        assert got == list(range(len(got)))
        log = cluster.replication.log(tp)
        assert log is not None
        assert log.leo[log.leader] == len(got)
    totals = producer.totals()
    assert totals.records_sent == len(keys)
    assert sum(n for _, n in totals.per_broker) == len(keys)


def test_leader_change_refreshes_metadata_and_the_next_send_follows(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any], producers: Any
) -> None:
    cluster = make_cluster(3, config=NO_REBALANCE)
    cluster.create_topic("t", 1, 3)
    before = until(cluster, lambda v: len(v.partitions) == 1, "t to get a leader")
    old = before.partition("t", 0).leader
    producer = producers(cluster, config=_config("explicit"))
    first = producer.produce(ProducerRecord("t", b"a", partition=0))
    assert (first.broker, first.offset) == (old, 0)
    cluster.replicate()  # the followers have it, so the next leader's log starts after it
    refreshes = producer.totals().metadata_refreshes
    # Leadership moves while the old leader stays up: it now answers NOT_LEADER.
    cluster.broker(old).controlled_shutdown()
    after = until(cluster, lambda v: v.partition("t", 0).leader != old, "leadership to move")
    new = after.partition("t", 0).leader
    assert cluster.broker(old).alive
    assert producer.cluster.leader("t", 0) == old  # the cache is stale
    second = producer.produce(ProducerRecord("t", b"b", partition=0))
    assert (second.broker, second.offset) == (new, 1)
    totals = producer.totals()
    assert totals.metadata_refreshes > refreshes
    assert totals.retries >= 1
    assert producer.cluster.leader("t", 0) == new
    assert dict(totals.per_broker) == {old: 1, new: 1}


def test_a_send_to_a_stale_leader_is_refused_as_not_leader(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any], producers: Any
) -> None:
    cluster = make_cluster(2, config=NO_REBALANCE)
    cluster.create_topic("t", 1, 2)
    view = until(cluster, lambda v: len(v.partitions) == 1, "t to get a leader")
    leader = view.partition("t", 0).leader
    other = next(b for b in view.brokers if b != leader)
    producer = producers(cluster)
    with pytest.raises(NotLeaderError, match=rf"broker {other} is not the leader of t-0"):
        producer.transport.append(other, ("t", 0), 1)


def _address_pinned_to(broker: int, pool: list[int]) -> str:
    for port in range(40000, 41000):
        address = f"10.0.0.7:{port}"
        if StaticDiscovery(address, pool).broker == broker:
            return address
    raise AssertionError(f"no address maps to broker {broker}")


def test_static_mapping_never_learns_while_zookeeper_follows_brokers(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any], producers: Any
) -> None:
    cluster = make_cluster([0, 1, 2], config=NO_REBALANCE)
    cluster.create_topic("t", 6, 2)
    until(cluster, lambda v: len(v.partitions) == 6, "t to get leaders")
    pinned = 1
    static = producers(
        cluster,
        config=_config("round-robin"),
        discovery="static",
        address=_address_pinned_to(pinned, [0, 1, 2]),
    )
    dynamic = producers(cluster, config=_config("round-robin"))
    assert isinstance(static.discovery, StaticDiscovery)
    for producer in (static, dynamic):
        for _ in range(30):
            producer.send(ProducerRecord("t", b"v"))
        producer.flush()
    assert {b for b, _ in static.totals().per_broker} == {pinned}
    assert {b for b, _ in dynamic.totals().per_broker} == {0, 1, 2}
    # A record for a partition led elsewhere cannot reach its leader statically.
    elsewhere = next(p for p in cluster.view().partitions if p.leader != pinned)
    with pytest.raises(BrokerUnavailableError, match=rf"led by broker {elsewhere.leader}.*static"):
        static.produce(ProducerRecord("t", b"v", partition=elsewhere.partition))

    # A broker is added and leads partitions of a new topic.
    cluster.start_broker(3)
    cluster.create_topic("u", 4, 1, assignment={0: [3], 1: [3], 2: [0], 3: [1]})
    until(cluster, lambda v: len(v.partitions) == 10 and 3 in v.brokers, "u to get leaders")
    wait_for(lambda: 3 in dynamic.discovery.brokers(), what="the watch to deliver broker 3")
    for producer in (static, dynamic):
        for _ in range(20):
            producer.send(ProducerRecord("u", b"v"))
        producer.flush()
    assert 3 in dict(dynamic.totals().per_broker)
    assert 3 not in dict(static.totals().per_broker)
    assert {b for b, _ in static.totals().per_broker} == {pinned}

    # The pinned broker dies: the static producer's sends fail; the other carries on without it.
    sent_before = dict(dynamic.totals().per_broker)
    cluster.kill(pinned)
    until(
        cluster,
        lambda v: all(p.leader != pinned for p in v.partitions if p.topic == "t"),
        f"leaders to leave broker {pinned}",
    )
    with pytest.raises(BrokerUnavailableError, match=rf"broker {pinned}"):
        static.produce(ProducerRecord("t", b"v", partition=0 if pinned else 1))
    wait_for(lambda: pinned not in dynamic.discovery.brokers(), what="the watch to drop it")
    for _ in range(30):
        dynamic.send(ProducerRecord("t", b"v"))
    dynamic.flush()
    sent_after = dict(dynamic.totals().per_broker)
    assert sent_after.get(pinned) == sent_before.get(pinned)
    assert sum(sent_after.values()) == sum(sent_before.values()) + 30


@pytest.mark.parametrize("unclean", [False, True])
def test_acknowledged_records_are_lost_only_to_unclean_elections(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any], producers: Any, unclean: bool
) -> None:
    cluster = make_cluster([1, 2, 3], config=NO_REBALANCE)
    config = {UNCLEAN_LEADER_ELECTION_ENABLE: "true" if unclean else "false"}
    cluster.create_topic("t", 1, 2, config=config, assignment={0: [1, 2]})
    until(cluster, lambda v: len(v.partitions) == 1, "t to get a leader")
    producer = producers(cluster, config=_config("explicit", retries=2))
    for _ in range(20):
        producer.send(ProducerRecord("t", b"v", partition=0))
    producer.flush()
    cluster.replicate()
    assert cluster.replication.totals().acked == 20
    cluster.kill(2)  # the follower: the ISR shrinks to the leader, which acknowledges alone
    until(cluster, lambda v: v.partition("t", 0).isr == (1,), "the ISR to shrink")
    for _ in range(7):
        producer.send(ProducerRecord("t", b"v", partition=0))
    producer.flush()
    assert cluster.replication.totals().acked == 27
    cluster.kill(1)
    until(cluster, lambda v: v.partition("t", 0).leader == NO_LEADER, "t-0 to go offline")
    refused = producer.send(ProducerRecord("t", b"v", partition=0))
    producer.flush()
    assert refused.exception(timeout=0) is not None
    cluster.restart(2)
    if unclean:
        until(cluster, lambda v: v.partition("t", 0).leader == 2, "an unclean election")
        assert cluster.replication.totals().acked_lost == 7
        # The producer follows the new leader; the log restarts below the lost records.
        meta = producer.produce(ProducerRecord("t", b"v", partition=0))
        assert (meta.broker, meta.offset) == (2, 20)
    else:
        until(cluster, lambda v: 2 in v.brokers, "broker 2 to register")
        assert cluster.view().partition("t", 0).leader == NO_LEADER
        cluster.restart(1)
        until(cluster, lambda v: v.partition("t", 0).leader == 1, "broker 1 to lead again")
        assert cluster.replication.totals().acked_lost == 0
        meta = producer.produce(ProducerRecord("t", b"v", partition=0))
        assert (meta.broker, meta.offset) == (1, 27)


def test_bad_sends_are_clear_errors(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any], producers: Any
) -> None:
    cluster = make_cluster(1)
    cluster.create_topic("t", 2, 1)
    until(cluster, lambda v: len(v.partitions) == 2, "t to get leaders")
    producer = producers(cluster)
    with pytest.raises(InvalidPartitionError, match=r"'t'.*partition 5.*2 partitions"):
        producer.send(ProducerRecord("t", partition=5))
    with pytest.raises(UnknownTopicOrPartitionError, match="'missing'"):
        producer.send(ProducerRecord("missing"))
    with pytest.raises(UnknownNameError, match="broker discovery"):
        Producer.for_cluster(cluster, discovery="dns")
    with pytest.raises(UnknownNameError, match="partitioner"):
        Producer.for_cluster(cluster, ProducerConfig(partitioner="nope"))
    producer.close()
    with pytest.raises(ProducerClosedError):
        producer.send(ProducerRecord("t"))


# -- producer mechanics without a store ---------------------------------------------------------


class _Logs:
    """A transport where every broker of ``slow`` leaves batches unsent."""

    def __init__(self, leaders: dict[str, list[int]]):
        self.leaders = leaders
        self.offsets: dict[TP, int] = {}

    def reachable(self, broker_id: int) -> bool:
        return True

    def append(self, broker_id: int, tp: TP, records: int) -> int:
        if self.leaders[tp[0]][tp[1]] != broker_id:
            raise NotLeaderError(f"{broker_id} does not lead {tp}")
        offset = self.offsets.get(tp, 0)
        self.offsets[tp] = offset + records
        return offset


def test_sticky_producer_switches_partition_at_each_new_batch() -> None:
    leaders = {"t": [0, 1, 2, 0, 1, 2]}
    config = ProducerConfig(partitioner="sticky", batch_size=61 + 5 * 12, seed=3)
    producer = Producer(FixedMetadata(leaders), _Logs(leaders), config)
    futures = [producer.send(ProducerRecord("t", b"x" * 4)) for _ in range(40)]
    producer.flush()
    partitions = [f.result(timeout=0).partition for f in futures]
    runs = [partitions[i : i + 5] for i in range(0, 40, 5)]
    assert all(len(set(run)) == 1 for run in runs)  # one batch of 5 records per partition
    assert all(a[0] != b[0] for a, b in itertools.pairwise(runs))
    assert producer.totals().batches == 8


def test_availability_timeout_leaves_out_a_broker_that_does_not_drain() -> None:
    leaders = {"t": [0, 1, 2, 3]}
    clock = ManualClock()
    config = ProducerConfig(
        partitioner="uniform-sticky",
        batch_size=200,
        availability_timeout=0.05,
        drain_on_send=False,
        seed=5,
    )
    producer = Producer(FixedMetadata(leaders), _Logs(leaders), config, clock=clock)
    placed: dict[TP, int] = {}
    for tick in range(200):
        for _ in range(4):
            producer.send(ProducerRecord("t", b"x" * 50))
        clock.advance(0.01)
        producer.poll({0: 0})  # broker 0 takes nothing
        if tick == 100:
            placed = dict(producer.totals().placed)
    late = {tp[1]: n - placed.get(tp, 0) for tp, n in producer.totals().placed}
    assert late.get(0, 0) == 0  # left out once its queue stalled past the timeout
    assert all(late.get(p, 0) > 0 for p in (1, 2, 3))
