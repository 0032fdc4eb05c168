"""Three ``coordkit serve --broker-id`` processes whose only listener is SASL_SSL, the inter-broker
one (issue #36, item 1): the controller's requests, the followers' fetches and the controlled
shutdown go over TLS with the brokers' SCRAM-SHA-256 login, under Kafka's authorizer with the
brokers' user as its super user. A topic replicated three times with acks=all and
``min.insync.replicas=2`` loses no acknowledged record when its leader's process is killed; a
logged-in principal without ClusterAction is refused every inter-broker request as Kafka 3.9
refuses it (tests/apache_kafka/test_mixed_cluster_secured.py sends the same to a Kafka broker);
no password reaches any output or log.
"""

from __future__ import annotations

import json
import re
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
    BROKER_PASSWORD,
    BROKER_USER,
    INTRUDER_PASSWORD,
    INTRUDER_USER,
    REFUSED,
    SECRETS,
    add_scram_users,
    client_settings,
    connect_as,
    coordkit_args,
    inter_broker_answers,
)
from serve.conftest import STOP_SECONDS, ServeProcess
from serve.security_servers import make_pems

BROKERS = (1, 2, 3)
TOPIC = "secured"
PARTITIONS = 3
BATCH = 60
WAIT_SECONDS = 90


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> Path:
    made: Path = make_pems(tmp_path_factory.mktemp("pems"))
    return made


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[StandaloneZooKeeper]:
    server = StandaloneZooKeeper().start()
    yield server
    server.close()


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
class SecuredCluster:
    url: str
    pems: Path
    processes: dict[int, ServeProcess]
    #: What each process wrote, once stopped or killed.
    outputs: dict[int, str] = attrs.field(factory=dict)
    acked: dict[tuple[int, int], bytes] = attrs.field(factory=dict)
    sent: int = 0

    def start(self, broker_id: int) -> None:
        self.processes[broker_id] = ServeProcess(
            ["--store", self.url, "--broker-id", str(broker_id), "--port", "0",
             *coordkit_args(self.pems)]
        )  # fmt: skip

    def stop(self, broker_id: int, *, kill: bool = False) -> None:
        process = self.processes.pop(broker_id)
        if kill:
            process.process.kill()
        elif process.process.poll() is None:
            process.process.send_signal(2)
        out, err = process.process.communicate(timeout=STOP_SECONDS)
        self.outputs[broker_id] = process.banner + out + err

    def bootstrap(self) -> str:
        return ",".join(a for p in self.processes.values() for a in p.addresses.values())

    def state(self, partition: int) -> dict[str, Any]:
        store = open_store(self.url)
        try:
            data, _ = store.get(f"/brokers/topics/{TOPIC}/partitions/{partition}/state")
        finally:
            store.close()
        return dict(json.loads(data))

    def controller(self) -> int:
        store = open_store(self.url)
        try:
            return int(json.loads(store.get("/controller")[0])["brokerid"])
        finally:
            store.close()

    def full_isrs(self) -> bool | str:
        states = {p: self.state(p) for p in range(PARTITIONS)}
        if all(len(s["isr"]) == len(BROKERS) for s in states.values()):
            return True
        return str(states)

    def produce(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap(), acks="all",
                                 enable_idempotence=True, retries=2**31 - 1,
                                 request_timeout_ms=30_000, delivery_timeout_ms=120_000,
                                 **client_settings(self.pems))  # fmt: skip
        try:
            futures = []
            for _ in range(BATCH):
                value = f"s{self.sent}".encode()
                futures.append((value, producer.send(TOPIC, value,
                                                     partition=self.sent % PARTITIONS)))  # fmt: skip
                self.sent += 1
            for value, future in futures:
                metadata = future.get(timeout=150)
                self.acked[(metadata.partition, metadata.offset)] = value
        finally:
            producer.close()

    def read_all(self) -> dict[tuple[int, int], bytes]:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap(), auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=30_000,
                                 **client_settings(self.pems))  # fmt: skip
        try:
            consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
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


@pytest.fixture
def secured(zookeeper: StandaloneZooKeeper, pems: Path) -> Iterator[SecuredCluster]:
    url = f"zookeeper://{zookeeper.hosts}/secured-{uuid.uuid4().hex[:8]}?session_timeout=6"
    add_scram_users(url)
    cluster = SecuredCluster(url, pems, {})
    try:
        for broker in BROKERS:
            cluster.start(broker)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), **client_settings(pems))
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, len(BROKERS),
                                          topic_configs={"min.insync.replicas": "2"})])  # fmt: skip
        finally:
            admin.close()
        wait_until("every ISR full (followers fetching over SASL_SSL)", cluster.full_isrs)
        yield cluster
    finally:
        for broker in list(cluster.processes):
            cluster.stop(broker, kill=True)
            print(f"--- coordkit broker {broker}:\n{cluster.outputs[broker]}")


def test_three_processes_on_sasl_ssl_lose_no_acknowledged_record(secured: SecuredCluster) -> None:
    secured.produce()
    controller = secured.controller()
    leader = secured.state(0)["leader"]
    secured.stop(leader, kill=True)
    wait_until(f"partition 0 led again (broker {leader} killed)",
               lambda: secured.state(0)["leader"] not in (-1, leader))  # fmt: skip
    secured.produce()
    got = secured.read_all()
    assert got == secured.acked
    for broker in list(secured.processes):
        secured.stop(broker)
    told = [b for b in BROKERS if b not in (controller, leader)]
    for broker in told:
        # Leaderships reached the other processes by the controller's requests on SASL_SSL.
        assert re.search(rf"broker {broker}: LeaderAndIsr from controller \d+",
                         secured.outputs[broker]), secured.outputs[broker]  # fmt: skip
    for broker, output in secured.outputs.items():
        assert "refused" not in output, output  # no login or certificate refused
        for secret in SECRETS:
            assert secret not in output, f"a password in broker {broker}'s output"


def test_inter_broker_requests_need_cluster_action(secured: SecuredCluster) -> None:
    address = secured.processes[1].addresses[1]
    intruder = connect_as(address, secured.pems, INTRUDER_USER, INTRUDER_PASSWORD)
    try:
        assert inter_broker_answers(intruder, TOPIC) == REFUSED
    finally:
        intruder.close()
    broker = connect_as(address, secured.pems, BROKER_USER, BROKER_PASSWORD)
    try:
        allowed = inter_broker_answers(broker, TOPIC)
    finally:
        broker.close()
    # The brokers' own user passes the authorizer: refused, if at all, for other reasons.
    for api, (error, partitions) in allowed.items():
        assert 31 not in (error, *partitions), (api, allowed)
        assert 29 not in partitions, (api, allowed)
    with pytest.raises(OSError, match="invalid credentials"):
        connect_as(address, secured.pems, INTRUDER_USER, "not-the-password")


PLAIN_LOGIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="{BROKER_USER}" password="{BROKER_PASSWORD}" user_{BROKER_USER}="{BROKER_PASSWORD}";'
)
#: The other inter-broker listeners, two processes each: mutual TLS (the brokers' principal is
#: their certificate's subject, ``User:CN=localhost``) and SASL_PLAINTEXT with PLAIN.
OTHER_LISTENERS = {
    "SSL with client certificates": (
        ["listeners=SSL://127.0.0.1:0", "inter.broker.listener.name=SSL",
         "ssl.client.auth=required", "super.users=User:CN=localhost;User:CN=client,OU=eng,O=example"],
        "SSL",
    ),
    "SASL_PLAINTEXT with PLAIN": (
        ["listeners=SASL_PLAINTEXT://127.0.0.1:0", "inter.broker.listener.name=SASL_PLAINTEXT",
         "sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN",
         f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_LOGIN}",
         f"super.users=User:{BROKER_USER}"],
        "SASL_PLAINTEXT",
    ),
}  # fmt: skip


@pytest.mark.parametrize("listener", list(OTHER_LISTENERS))
def test_two_processes_replicate_on_another_secured_listener(
    listener: str, zookeeper: StandaloneZooKeeper, pems: Path
) -> None:
    words, protocol = OTHER_LISTENERS[listener]
    words = [*words, "ssl.keystore.type=PEM", f"ssl.keystore.location={pems}/server-keystore.pem",
             f"ssl.truststore.location={pems}/ca.pem", "authorizer.class.name="
             "kafka.security.authorizer.AclAuthorizer"]  # fmt: skip
    url = f"zookeeper://{zookeeper.hosts}/other-{uuid.uuid4().hex[:8]}?session_timeout=6"
    client: dict[str, Any] = {"security_protocol": protocol}
    if protocol == "SSL":
        client.update(ssl_cafile=str(pems / "ca.pem"), ssl_certfile=str(pems / "client.pem"),
                      ssl_keyfile=str(pems / "client-key.pem"))  # fmt: skip
    else:
        client.update(sasl_mechanism="PLAIN", sasl_plain_username=BROKER_USER,
                      sasl_plain_password=BROKER_PASSWORD)  # fmt: skip
    processes = {
        b: ServeProcess(["--store", url, "--broker-id", str(b), "--port", "0",
                         *(a for w in words for a in ("--config", w))])
        for b in (1, 2)
    }  # fmt: skip
    outputs: list[str] = []
    try:
        bootstrap = ",".join(a for p in processes.values() for a in p.addresses.values())
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, **client)
        try:
            admin.create_topics([NewTopic(TOPIC, 2, 2, topic_configs={"min.insync.replicas": "2"})])
        finally:
            admin.close()

        def isrs() -> bool:
            store = open_store(url)
            try:
                states = [json.loads(store.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")[0])
                          for p in (0, 1)]  # fmt: skip
            finally:
                store.close()
            return all(len(s["isr"]) == 2 for s in states)

        wait_until(f"every ISR full over {listener}", isrs)
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **client)
        try:
            for i in range(20):
                producer.send(TOPIC, f"o{i}".encode(), partition=i % 2).get(timeout=60)
        finally:
            producer.close()
    finally:
        for process in processes.values():
            if process.process.poll() is None:
                process.process.send_signal(2)
            out, err = process.process.communicate(timeout=STOP_SECONDS)
            outputs.append(out + err)
            print(err)
    joined = "".join(outputs)
    assert "refused" not in joined, joined
    assert BROKER_PASSWORD not in joined
    assert re.search(r"broker \d: LeaderAndIsr from controller \d", joined), joined
