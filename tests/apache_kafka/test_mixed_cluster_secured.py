"""Kafka 3.9 brokers and ``coordkit serve`` brokers in one cluster whose inter-broker listener is
SASL_SSL (issue #36, item 1; the PLAINTEXT version is test_mixed_cluster.py): every broker logs
in to every other with SCRAM-SHA-256 as ``User:broker`` over TLS, under Kafka's authorizer with
that user as its only super user. Whichever controller wins drives both kinds (LeaderAndIsr,
UpdateMetadata over SASL_SSL one way, AlterPartition the other), replicas on each kind fetch from
leaders of the other, and a broker of each kind killed loses no acknowledged record (acks=all,
``min.insync.replicas=2``). A logged-in principal without ClusterAction is refused the inter-broker
requests by a Kafka broker and a coordkit broker alike.

Each kind keeps a PLAINTEXT listener beside SASL_SSL: Kafka's fixture checks its readiness by a
PLAINTEXT Metadata, which lists only brokers with a PLAINTEXT endpoint. ``tox -e py311-mixed``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from coordkit.plugins import open_store
from coordkit.testing.servers import StandaloneZooKeeper
from security.secured_brokers import (
    INTRUDER_PASSWORD,
    INTRUDER_USER,
    REFUSED,
    SECRETS,
    SecuredKafka,
    add_scram_users,
    client_settings,
    connect_as,
    coordkit_args,
    inter_broker_answers,
    kafka_properties,
)
from serve.conftest import STOP_SECONDS, ServeProcess
from serve.security_servers import make_pems

pytestmark = pytest.mark.slow

COORDKIT = (1, 2)
KAFKA = (3, 4)
TOPIC = "mixed-secured"
#: Replicas of each partition: leaders (first) of both kinds, followers of both kinds.
ASSIGNMENT = {0: [1, 3, 2], 1: [3, 1, 4], 2: [2, 4, 3], 3: [4, 2, 1]}
BATCH = 40
WAIT_SECONDS = 90
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
class SecuredMixed:
    url: str
    pems: Path
    kafka: SecuredKafka
    coordkit: dict[int, ServeProcess]
    outputs: list[str] = attrs.field(factory=list)
    acked: dict[tuple[int, int], bytes] = attrs.field(factory=dict)
    sent: int = 0

    def start_coordkit(self, broker_id: int) -> None:
        self.coordkit[broker_id] = ServeProcess(
            ["--store", self.url, "--broker-id", str(broker_id), "--port", "0",
             *coordkit_args(self.pems, plaintext=True)]
        )  # fmt: skip

    def kill_coordkit(self, broker_id: int) -> None:
        process = self.coordkit.pop(broker_id)
        process.process.kill()
        out, err = process.process.communicate(timeout=STOP_SECONDS)
        self.outputs.append(out + err)
        print(f"--- coordkit broker {broker_id} (killed):\n{err}")

    def secured(self, brokers: tuple[int, ...] = COORDKIT + KAFKA) -> str:
        """The SASL_SSL addresses of ``brokers`` that run."""
        found = [a for b in brokers if b in self.coordkit
                 for a in self.coordkit[b].addresses.values()]  # fmt: skip
        found += [self.kafka.secured_address(b) for b in brokers
                  if b in self.kafka.nodes and self.kafka.node(b).running]  # fmt: skip
        return ",".join(found)

    def read(self, path: str) -> dict[str, Any]:
        store = open_store(self.url)
        try:
            data, _ = store.get(path)
        finally:
            store.close()
        return dict(json.loads(data))

    def controller(self) -> int:
        return int(self.read("/controller")["brokerid"])

    def full_isrs(self) -> bool | str:
        found = {p: self.read(f"/brokers/topics/{TOPIC}/partitions/{p}/state") for p in ASSIGNMENT}
        if all(sorted(found[p]["isr"]) == sorted(r) for p, r in ASSIGNMENT.items()):
            return True
        return str(found)

    def produce(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.secured(), acks="all",
                                 enable_idempotence=True, retries=2**31 - 1,
                                 request_timeout_ms=30_000, delivery_timeout_ms=120_000,
                                 **client_settings(self.pems))  # fmt: skip
        try:
            futures = []
            for _ in range(BATCH):
                value = f"m{self.sent}".encode()
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
                                 enable_auto_commit=False, consumer_timeout_ms=30_000,
                                 **client_settings(self.pems))  # fmt: skip
        try:
            consumer.assign([TopicPartition(TOPIC, p) for p in ASSIGNMENT])
            got: dict[tuple[int, int], bytes] = {}
            for record in consumer:
                got[(record.partition, record.offset)] = record.value
                if len(got) >= len(self.acked):
                    break
            return got
        finally:
            consumer.close()


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> Path:
    made: Path = make_pems(tmp_path_factory.mktemp("pems"))
    return made


@pytest.fixture(params=["coordkit-controller", "kafka-controller"])
def mixed(
    request: pytest.FixtureRequest, zookeeper: StandaloneZooKeeper, pems: Path
) -> Iterator[SecuredMixed]:
    chroot = f"/mixed-secured-{uuid.uuid4().hex[:8]}"
    url = f"zookeeper://{zookeeper.hosts}{chroot}?session_timeout={SESSION_TIMEOUT}"
    add_scram_users(url)
    kafka = SecuredKafka(zookeeper=zookeeper.hosts, chroot=chroot, broker_ids=KAFKA,
                         other_brokers=COORDKIT,
                         properties={**kafka_properties(pems), "min.insync.replicas": "2",
                                     "replica.lag.time.max.ms": "10000"})  # fmt: skip
    cluster = SecuredMixed(url, pems, kafka, {})
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
        admin = KafkaAdminClient(bootstrap_servers=cluster.secured(), **client_settings(pems))
        try:
            admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments=ASSIGNMENT,
                                          topic_configs={"min.insync.replicas": "2"})])  # fmt: skip
        finally:
            admin.close()
        wait_until("every partition led, every ISR full (over SASL_SSL)", cluster.full_isrs)
        yield cluster
    finally:
        for broker in list(cluster.coordkit):
            cluster.kill_coordkit(broker)
        print(f"--- Kafka's logs:\n{kafka.log_tail(lines=300)}")
        kafka.close()


def test_both_kinds_replicate_over_sasl_ssl_and_lose_nothing(mixed: SecuredMixed) -> None:
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
    mixed.produce()
    assert len(mixed.acked) == mixed.sent
    for kind, brokers in (("coordkit", COORDKIT), ("kafka", KAFKA)):
        got = mixed.read_all(mixed.secured(brokers))
        missing = sorted(set(mixed.acked) - set(got))
        assert not missing, f"read through {kind}'s brokers: acknowledged records missing"
        wrong = [k for k, v in mixed.acked.items() if got[k] != v]
        assert not wrong, f"read through {kind}'s brokers: other values at {wrong[:10]}"
    for broker in list(mixed.coordkit):
        mixed.kill_coordkit(broker)
    logs = "".join(mixed.outputs) + mixed.kafka.log_tail(lines=100_000)
    for secret in SECRETS:
        assert secret not in logs
    assert "refused" not in "".join(mixed.outputs)  # no login or certificate refused


def test_cluster_action_is_refused_alike_by_both_kinds(mixed: SecuredMixed) -> None:
    answers = {}
    for kind, address in (("coordkit", mixed.secured((1,))), ("kafka", mixed.secured((3,)))):
        connection = connect_as(address, mixed.pems, INTRUDER_USER, INTRUDER_PASSWORD)
        try:
            answers[kind] = inter_broker_answers(connection, TOPIC)
        finally:
            connection.close()
    assert answers["coordkit"] == answers["kafka"] == REFUSED
