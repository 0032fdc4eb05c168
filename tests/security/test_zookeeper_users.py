"""SCRAM users shared with Kafka 3.9 on one ZooKeeper: a user Kafka 3.9's ``kafka-configs``
creates logs in to ``coordkit serve``, and one coordkit's AlterUserScramCredentials creates logs
in to a Kafka 3.9 broker on the same chroot; both write ``/config/users/<user>`` alike."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from coordkit.testing.servers import KAFKA_ZOOKEEPER_MODE_VERSION, KafkaCluster, StandaloneZooKeeper
from coordkit.testing.servers.kafka_server import KafkaNode
from coordkit.testing.servers.kafka_tools import kafka_tool
from coordkit.testing.servers.ports import free_port
from serve.security_servers import SecureServe

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
CAROL_PASSWORD = "carol-made-by-kafka-3a1"
DAVE_PASSWORD = "dave-made-by-coordkit-77b"
CREDENTIAL_KEYS = ["salt", "stored_key", "server_key", "iterations"]


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[StandaloneZooKeeper]:
    server = StandaloneZooKeeper().start()
    yield server
    server.close()


def _new_chroot(zookeeper: StandaloneZooKeeper) -> str:
    """A chroot of its own, made (Kafka's tools need it to exist)."""
    chroot = f"/users-{uuid.uuid4().hex[:8]}"
    client = KazooClient(hosts=zookeeper.hosts)
    client.start(timeout=20)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
    return chroot


def _words(*words: str) -> list[str]:
    return [arg for word in words for arg in ("--config", word)]


def _coordkit(zookeeper: StandaloneZooKeeper, chroot: str) -> SecureServe:
    return SecureServe([
        "--store", f"zookeeper://{zookeeper.hosts}{chroot}", "--broker-id", "0",
        *_words("listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512"),
    ])  # fmt: skip


def _logs_in(bootstrap: str, user: str, password: str) -> list[str]:
    errors: list[str] = []
    producer = Producer({
        "bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password,
        "error_cb": lambda e: errors.append(str(e)), "message.timeout.ms": 20_000,
    })  # fmt: skip
    try:
        producer.list_topics(timeout=20)
    except KafkaException:
        for _ in range(20):
            if errors:
                break
            producer.poll(0.5)  # serves error_cb
        assert errors, "no metadata and no error"
    return errors


def _user_node(zookeeper: StandaloneZooKeeper, chroot: str, user: str) -> dict[str, Any]:
    client = KazooClient(hosts=zookeeper.hosts + chroot)
    client.start(timeout=20)
    try:
        data, _ = client.get(f"/config/users/{user}")
        changes = [json.loads(client.get(f"/config/changes/{c}")[0])
                   for c in client.get_children("/config/changes")]  # fmt: skip
    finally:
        client.stop()
    node: dict[str, Any] = json.loads(data)
    node["changes"] = changes
    return node


def _shape(node: dict[str, Any], user: str) -> dict[str, Any]:
    """The node with its random parts (salt and keys) replaced by their field names."""
    return {
        "version": node["version"],
        "config": {mechanism: [part.split("=", 1)[0] for part in text.split(",")]
                   for mechanism, text in node["config"].items()},
        "announced": {"version": 2, "entity_path": f"users/{user}"} in node["changes"],
    }  # fmt: skip


class _SaslKafka39(KafkaCluster):
    """Kafka 3.9 in ZooKeeper mode with a SASL_PLAINTEXT listener beside its PLAINTEXT one."""

    sasl_port: int = 0

    def _node_properties(self, node: KafkaNode) -> dict[str, str]:
        properties = super()._node_properties(node)
        self.sasl_port = self.sasl_port or free_port()
        sasl = f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        properties["listeners"] += f",{sasl}"
        properties["advertised.listeners"] += f",{sasl}"
        return properties


def test_a_user_made_by_kafka_39_logs_in_to_coordkit(zookeeper: StandaloneZooKeeper) -> None:
    chroot = _new_chroot(zookeeper)
    made = kafka_tool(KAFKA_ZOOKEEPER_MODE_VERSION, "kafka-configs", "--zookeeper",
                      f"{zookeeper.hosts}{chroot}", "--alter", "--add-config",
                      f"SCRAM-SHA-256=[iterations=4096,password={CAROL_PASSWORD}]",
                      "--entity-type", "users", "--entity-name", "carol")  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    server = _coordkit(zookeeper, chroot)
    try:
        assert _logs_in(server.listeners["SASL_PLAINTEXT"], "carol", CAROL_PASSWORD) == []
        refused = _logs_in(server.listeners["SASL_PLAINTEXT"], "carol", "wrong")
        assert any("invalid credentials with SASL mechanism SCRAM-SHA-256" in e for e in refused)
    finally:
        out, err = server.stop()
    assert CAROL_PASSWORD not in out + err


def test_a_user_made_by_coordkit_logs_in_to_kafka_39(zookeeper: StandaloneZooKeeper) -> None:
    chroot = _new_chroot(zookeeper)
    kafka_tool(KAFKA_ZOOKEEPER_MODE_VERSION, "kafka-configs", "--zookeeper",
               f"{zookeeper.hosts}{chroot}", "--alter", "--add-config",
               f"SCRAM-SHA-256=[iterations=4096,password={CAROL_PASSWORD}]",
               "--entity-type", "users", "--entity-name", "carol", check=True)  # fmt: skip
    server = _coordkit(zookeeper, chroot)
    try:
        admin = AdminClient({"bootstrap.servers": server.listeners["PLAINTEXT"]})
        dave = UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), DAVE_PASSWORD.encode()
        )
        admin.alter_user_scram_credentials([dave])["dave"].result(30)
    finally:
        server.stop()
    # The node and its notification as Kafka 3.9 writes them (the salt and keys are random).
    assert _shape(_user_node(zookeeper, chroot, "dave"), "dave") == _shape(
        _user_node(zookeeper, chroot, "carol"), "carol"
    )
    assert _shape(_user_node(zookeeper, chroot, "dave"), "dave")["config"] == {
        "SCRAM-SHA-256": CREDENTIAL_KEYS
    }
    kafka = _SaslKafka39(zookeeper=zookeeper.hosts, chroot=chroot, broker_ids=(1,), properties={
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    })  # fmt: skip
    with kafka:
        assert _logs_in(f"127.0.0.1:{kafka.sasl_port}", "dave", DAVE_PASSWORD) == []
