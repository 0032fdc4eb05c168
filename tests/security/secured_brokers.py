"""Brokers talking to each other on a secured inter-broker listener (SASL_SSL with SCRAM-SHA-256,
TLS from the PEM files of :func:`serve.security_servers.make_pems`): the ``coordkit serve``
arguments, the Kafka 3.9 properties, the SCRAM users in the store and the clients' settings, for
tests/security/test_inter_broker_security.py and tests/apache_kafka/test_mixed_cluster_secured.py.

The brokers log in to each other as ``User:broker``, the one super user of the authorizer both
kinds run (``kafka.security.authorizer.AclAuthorizer``): every inter-broker request needs
ClusterAction, which no other principal has.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coordkit.plugins import open_store
from coordkit.serve.control_plane.connection import BrokerConnection
from coordkit.serve.control_plane.connector import BrokerConnector
from coordkit.serve.listeners.config import SCRAM_SHA_256
from coordkit.serve.listeners.sasl_client import SaslCredentials
from coordkit.serve.listeners.scram import new_credential, write_user_configs
from coordkit.testing.servers.kafka_server import KafkaCluster, KafkaNode
from coordkit.testing.servers.ports import free_port

BROKER_USER = "broker"
BROKER_PASSWORD = "broker-inter-secret-3c9e"
#: A user who may log in but holds no ACL (ClusterAction refused).
INTRUDER_USER = "mallory"
INTRUDER_PASSWORD = "mallory-secret-d41f"
SECRETS = (BROKER_PASSWORD, INTRUDER_PASSWORD)
SCRAM_LOGIN = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="{BROKER_USER}" password="{BROKER_PASSWORD}";'
)
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def coordkit_args(pems: Path, *, plaintext: bool = False) -> list[str]:
    """``--config`` words of a ``coordkit serve`` whose listener is SASL_SSL, the inter-broker
    one, its brokers logging in to each other with SCRAM-SHA-256 (``plaintext``: a PLAINTEXT
    listener too, after it, as Kafka's fixture has for its readiness check)."""
    listeners = "SASL_SSL://127.0.0.1:0" + (",PLAINTEXT://127.0.0.1:0" if plaintext else "")
    words = [
        f"listeners={listeners}",
        "inter.broker.listener.name=SASL_SSL",
        f"sasl.enabled.mechanisms={SCRAM_SHA_256}",
        f"sasl.mechanism.inter.broker.protocol={SCRAM_SHA_256}",
        f"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config={SCRAM_LOGIN}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={pems}/server-keystore.pem",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={pems}/ca.pem",
        f"authorizer.class.name={AUTHORIZER}",
        f"super.users=User:{BROKER_USER}",
    ]
    return [arg for word in words for arg in ("--config", word)]


def kafka_properties(pems: Path) -> dict[str, str]:
    """The same for a Kafka 3.9 broker (beside the fixture's PLAINTEXT listener, which only its
    readiness check uses: see :class:`SecuredKafka`)."""
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": SCRAM_SHA_256,
        "sasl.mechanism.inter.broker.protocol": SCRAM_SHA_256,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_LOGIN,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": f"{pems}/server-keystore.pem",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": f"{pems}/ca.pem",
        "authorizer.class.name": AUTHORIZER,
        "super.users": f"User:{BROKER_USER}",
    }


class SecuredKafka(KafkaCluster):
    """Kafka's fixture with a SASL_SSL listener (the inter-broker one) beside its PLAINTEXT."""

    sasl_ports: dict[int, int]

    def _node_properties(self, node: KafkaNode) -> dict[str, str]:
        properties = super()._node_properties(node)
        ports = self.__dict__.setdefault("sasl_ports", {})
        port = ports.setdefault(node.node_id, free_port())
        secured = f"SASL_SSL://127.0.0.1:{port}"
        properties["listeners"] += f",{secured}"
        properties["advertised.listeners"] += f",{secured}"
        return properties

    def secured_address(self, node_id: int) -> str:
        return f"127.0.0.1:{self.sasl_ports[node_id]}"


def add_scram_users(url: str) -> None:
    """The brokers' user and the intruder, in the store as Kafka 3.9 keeps them (before any
    broker starts: Kafka's brokers read them at their start)."""
    store = open_store(url)
    try:
        for user, password in ((BROKER_USER, BROKER_PASSWORD),
                               (INTRUDER_USER, INTRUDER_PASSWORD)):  # fmt: skip
            text = new_credential(SCRAM_SHA_256, password).to_text()
            write_user_configs(store, user, {SCRAM_SHA_256: text})
    finally:
        store.close()


def client_settings(pems: Path) -> dict[str, Any]:
    """kafka-python's settings of a client logging in as the brokers' user over SASL_SSL."""
    return {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": SCRAM_SHA_256,
        "sasl_plain_username": BROKER_USER,
        "sasl_plain_password": BROKER_PASSWORD,
        "ssl_cafile": str(pems / "ca.pem"),
    }


def connect_as(address: str, pems: Path, user: str, password: str) -> BrokerConnection:
    """A raw connection to a SASL_SSL listener, logged in as ``user`` (coordkit's own
    connector: what one broker opens to another)."""
    from coordkit.serve.listeners.config import parse_security_configs
    from coordkit.serve.listeners.tls import client_context

    configs = parse_security_configs(
        [("listeners", "SSL://127.0.0.1:0"), ("inter.broker.listener.name", "SSL"),
         ("ssl.truststore.location", f"{pems}/ca.pem")],
        "127.0.0.1", 0,
    )  # fmt: skip
    connector = BrokerConnector("SASL_SSL", "SASL_SSL", client_context(configs, "SSL"),
                                SaslCredentials(SCRAM_SHA_256, user, password))  # fmt: skip
    host, port = address.rsplit(":", 1)
    return BrokerConnection((host, int(port)), "coordkit-test", timeout=20, connector=connector)


def inter_broker_answers(connection: BrokerConnection, topic: str) -> dict[str, Any]:
    """The answers to each inter-broker request (a broker's or a controller's) sent on
    ``connection``: the top-level error and each partition's, by api; sent by a principal
    without ClusterAction, every one is refused (CLUSTER_AUTHORIZATION_FAILED, or
    TOPIC_AUTHORIZATION_FAILED for a follower's fetch and epochs)."""
    from coordkit.protocol import messages
    from coordkit.serve.classes import nested

    m = messages
    common = {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1}
    stop = nested(m.StopReplicaRequest, "StopReplicaTopicState")(topic_name=topic, partition_states=[
        nested(m.StopReplicaRequest, "StopReplicaPartitionState")(partition_index=0,
                                                                  leader_epoch=-1)])  # fmt: skip
    fetch = m.FetchRequest(replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=1024,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=[
        nested(m.FetchRequest, "FetchTopic")(topic=topic, partitions=[
            nested(m.FetchRequest, "FetchPartition")(partition=0, current_leader_epoch=-1,
                                                     fetch_offset=0, last_fetched_epoch=-1,
                                                     log_start_offset=-1,
                                                     partition_max_bytes=1024)])],
        forgotten_topics_data=[], rack_id="")  # fmt: skip
    epochs = m.OffsetForLeaderEpochRequest(replica_id=2, topics=[
        nested(m.OffsetForLeaderEpochRequest, "OffsetForLeaderTopic")(topic=topic, partitions=[
            nested(m.OffsetForLeaderEpochRequest, "OffsetForLeaderPartition")(
                partition=0, current_leader_epoch=-1, leader_epoch=0)])])  # fmt: skip
    verify = m.AddPartitionsToTxnRequest(transactions=[
        nested(m.AddPartitionsToTxnRequest, "AddPartitionsToTxnTransaction")(
            transactional_id="t", producer_id=0, producer_epoch=0, verify_only=True, topics=[
                nested(m.AddPartitionsToTxnRequest, "AddPartitionsToTxnTopic")(
                    name=topic, partitions=[0])])])  # fmt: skip
    requests = {
        "UpdateMetadata": (m.UpdateMetadataRequest(**common, topic_states=[], live_brokers=[]), 7),
        "StopReplica": (m.StopReplicaRequest(**common, topic_states=[stop]), 3),
        "ControlledShutdown": (m.ControlledShutdownRequest(broker_id=2, broker_epoch=-1), 3),
        "AlterPartition": (m.AlterPartitionRequest(broker_id=2, broker_epoch=-1, topics=[]), 2),
        "AllocateProducerIds": (m.AllocateProducerIdsRequest(broker_id=2, broker_epoch=-1), 0),
        "Fetch": (fetch, 12),
        "OffsetForLeaderEpoch": (epochs, 4),
        # A leader verifying a transactional Produce with the coordinator (KIP-890).
        "AddPartitionsToTxn": (verify, 4),
    }
    answers: dict[str, Any] = {}
    for api, (body, version) in requests.items():
        answer = connection.call(body, version)
        partitions: list[int] = [p.error_code for p in getattr(answer, "partition_errors", None)
                                 or ()]  # fmt: skip
        for t in getattr(answer, "topics", None) or getattr(answer, "responses", None) or ():
            partitions += [p.error_code for p in t.partitions]
        answers[api] = (getattr(answer, "error_code", 0), partitions)
    return answers


#: What a principal without ClusterAction is answered (Kafka 3.9's KafkaApis).
REFUSED = {
    "UpdateMetadata": (31, []),
    "StopReplica": (31, [31]),
    "ControlledShutdown": (31, []),
    "AlterPartition": (31, []),
    "AllocateProducerIds": (31, []),
    "Fetch": (0, [29]),
    "OffsetForLeaderEpoch": (0, [29]),
    "AddPartitionsToTxn": (31, []),
}
