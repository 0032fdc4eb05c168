"""Kafka 3.9 brokers and ``coordkit serve`` brokers in one cluster on one ZooKeeper chroot (issue
#34, item 4): the end-to-end proof of the inter-broker protocol's fidelity.

Two ``coordkit serve --broker-id`` processes (brokers 1 and 2) and two Kafka 3.9 brokers (3 and 4)
share a chroot. Whichever controller wins — coordkit's (its processes start first) or Kafka's (its
brokers start first) — drives both kinds: LeaderAndIsr, UpdateMetadata and StopReplica one way,
AlterPartition and ControlledShutdown the other. A topic has replicas on both kinds, leaders of
both kinds, ``min.insync.replicas=2``; an idempotent producer writes with acks=all throughout, and
the brokers are killed with SIGKILL one at a time — a coordkit broker, a Kafka broker, and the
controller — each brought back before the next (it catches up from the leaders and rejoins the
ISR). At the end a consumer reads every partition from the start on each kind of broker: every
acknowledged record is there, at the offset it was acknowledged at, once.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from coordkit.plugins import open_store
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from serve.conftest import STOP_SECONDS, ServeProcess

COORDKIT = (1, 2)
KAFKA = (3, 4)
TOPIC = "mixed"
#: Replicas of each partition: leaders (first) of both kinds, followers of both kinds.
ASSIGNMENT = {0: [1, 3, 2], 1: [3, 1, 4], 2: [2, 4, 3], 3: [4, 2, 1]}
#: Records produced between two faults.
BATCH = 40
#: Seconds to wait for what the cluster does on its own (a failover, an ISR expansion).
WAIT_SECONDS = 90
#: The ZooKeeper session of a killed coordkit process ends this long after (its broker id can
#: then register again).
SESSION_TIMEOUT = 6


def wait_until(what: str, check: Callable[[], Any], timeout: float = WAIT_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
        except Exception as exc:  # a broker down meanwhile: look again
            last = exc
        if last and not isinstance(last, Exception | str):
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what} (last: {last!r})")
        time.sleep(0.3)


@attrs.define
class MixedCluster:
    """Both kinds of broker on one chroot, and what the producer was told."""

    url: str
    kafka: KafkaCluster
    coordkit: dict[int, ServeProcess]
    #: (partition, offset) → value of every acknowledged record.
    acked: dict[tuple[int, int], bytes] = attrs.field(factory=dict)
    sent: int = 0

    def start_coordkit(self, broker_id: int) -> None:
        self.coordkit[broker_id] = ServeProcess(
            ["--store", self.url, "--broker-id", str(broker_id), "--port", "0"]
        )

    def kill_coordkit(self, broker_id: int) -> None:
        process = self.coordkit.pop(broker_id)
        process.process.kill()
        _out, err = process.process.communicate(timeout=STOP_SECONDS)
        # Shown with a failure: what each coordkit process logged, until it was killed.
        print(f"--- coordkit broker {broker_id} (killed):\n{err}")

    def bootstrap(self) -> str:
        addresses = [a for p in self.coordkit.values() for a in p.addresses.values()]
        addresses += [n.address for n in self.kafka.nodes.values() if n.running]
        return ",".join(addresses)

    def read(self, path: str) -> dict[str, Any]:
        store = open_store(self.url)
        try:
            data, _ = store.get(path)
        finally:
            store.close()
        return dict(json.loads(data))

    def controller(self) -> int:
        return int(self.read("/controller")["brokerid"])

    def state(self, partition: int) -> dict[str, Any]:
        return self.read(f"/brokers/topics/{TOPIC}/partitions/{partition}/state")

    def full_isrs(self) -> bool | str:
        """``True`` when every ISR is the whole replica set; else what the states are."""
        found = {p: self.state(p) for p in ASSIGNMENT}
        if all(sorted(found[p]["isr"]) == sorted(r) for p, r in ASSIGNMENT.items()):
            return True
        return "; ".join(f"{p}: leader {s['leader']} epoch {s['leader_epoch']} isr {s['isr']}"
                         for p, s in found.items())  # fmt: skip

    def produce(self, count: int = BATCH) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap(), acks="all",
                                 enable_idempotence=True, retries=2**31 - 1,
                                 request_timeout_ms=30_000, delivery_timeout_ms=120_000)  # fmt: skip
        try:
            futures = []
            for _ in range(count):
                value = f"v{self.sent}".encode()
                futures.append((value, producer.send(TOPIC, value,
                                                     partition=self.sent % len(ASSIGNMENT))))  # fmt: skip
                self.sent += 1
            for value, future in futures:
                metadata = future.get(timeout=150)
                self.acked[(metadata.partition, metadata.offset)] = value
        finally:
            producer.close()

    def read_all(self, bootstrap: str) -> dict[tuple[int, int], bytes]:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=30_000)  # fmt: skip
        try:
            consumer.assign([TopicPartition(TOPIC, p) for p in ASSIGNMENT])
            got: dict[tuple[int, int], bytes] = {}
            for record in consumer:
                key = (record.partition, record.offset)
                assert key not in got, f"{key} read twice"
                got[key] = record.value
                if len(got) >= len(self.acked):
                    break
            return got
        finally:
            consumer.close()


#: Which kind starts first and so holds the controller. The default run takes coordkit's; both
#: run in ``tox -e py311-mixed`` (the default run's budget).
CONTROLLERS = [
    "coordkit-controller",
    pytest.param("kafka-controller", marks=pytest.mark.slow),
]


@pytest.fixture(params=CONTROLLERS)
def mixed(request: pytest.FixtureRequest, zookeeper: StandaloneZooKeeper) -> Iterator[MixedCluster]:
    chroot = f"/mixed-{uuid.uuid4().hex[:8]}"
    url = f"zookeeper://{zookeeper.hosts}{chroot}?session_timeout={SESSION_TIMEOUT}"
    kafka = KafkaCluster(zookeeper=zookeeper.hosts, chroot=chroot, broker_ids=KAFKA,
                         other_brokers=COORDKIT,
                         properties={"min.insync.replicas": "2",
                                     "replica.lag.time.max.ms": "10000"})  # fmt: skip
    cluster = MixedCluster(url, kafka, {})
    try:
        if request.param == "coordkit-controller":
            for broker in COORDKIT:
                cluster.start_coordkit(broker)
            wait_until("a coordkit controller", lambda: cluster.controller() in COORDKIT)
            kafka.start()
        else:
            kafka.other_brokers = frozenset()
            kafka.start()
            kafka.other_brokers = frozenset(COORDKIT)
            for broker in COORDKIT:
                cluster.start_coordkit(broker)
            assert cluster.controller() in KAFKA
            kafka.wait_ready()
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
        try:
            admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments=ASSIGNMENT,
                                          topic_configs={"min.insync.replicas": "2"})])  # fmt: skip
        finally:
            admin.close()
        wait_until("every partition led, every ISR full", cluster.full_isrs)
        yield cluster
    finally:
        for broker in list(cluster.coordkit):
            cluster.kill_coordkit(broker)
        print(f"--- Kafka's logs:\n{kafka.log_tail(lines=300)}")
        kafka.close()


def test_acknowledged_records_survive_kills_of_either_kind(mixed: MixedCluster) -> None:
    mixed.produce()
    # A coordkit broker (leader of partition 0) dies and comes back.
    mixed.kill_coordkit(1)
    mixed.produce()
    mixed.start_coordkit(1)
    wait_until("broker 1 back in every ISR", mixed.full_isrs)
    # A Kafka broker (leader of partition 1) dies and comes back.
    mixed.kafka.kill(3)
    mixed.produce()
    mixed.kafka.node(3).start()
    wait_until("broker 3 back in every ISR", mixed.full_isrs)
    # The controller dies and comes back (a new one is elected meanwhile).
    controller = mixed.controller()
    if controller in COORDKIT:
        mixed.kill_coordkit(controller)
    else:
        mixed.kafka.kill(controller)
    wait_until("a new controller", lambda: mixed.controller() != controller)
    mixed.produce()
    if controller in COORDKIT:
        mixed.start_coordkit(controller)
    else:
        mixed.kafka.node(controller).start()
    wait_until(f"broker {controller} back in every ISR", mixed.full_isrs)
    mixed.produce()
    assert len(mixed.acked) == mixed.sent
    for kind, brokers in (("coordkit", COORDKIT), ("kafka", KAFKA)):
        if kind == "coordkit":
            bootstrap = ",".join(a for b in brokers for a in mixed.coordkit[b].addresses.values())
        else:
            bootstrap = ",".join(mixed.kafka.node(b).address for b in brokers)
        got = mixed.read_all(bootstrap)
        missing = sorted(set(mixed.acked) - set(got))
        assert not missing, (
            f"read through {kind}'s brokers: acknowledged records missing {missing[:10]}"
        )
        wrong = [k for k, v in mixed.acked.items() if got[k] != v]
        assert not wrong, f"read through {kind}'s brokers: other values at {wrong[:10]}"
