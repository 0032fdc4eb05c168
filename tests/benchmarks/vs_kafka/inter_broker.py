"""The cost of a secured inter-broker listener on replication (issue #36): the processes-produce
workload (:func:`vs_kafka.processes.produce`: ``--records`` records of ``--record-size`` bytes,
acks=all, ``--producers`` librdkafka producers, after a warm-up) on three brokers whose
``inter.broker.listener.name`` is PLAINTEXT, SSL, then SASL_SSL with SCRAM-SHA-256, the clients on
a PLAINTEXT listener every time, so that the difference is what the followers' fetches (and the
controller's requests) pay for TLS and the login.

coordkit: three ``coordkit serve --broker-id N`` processes on one private ZooKeeper (a chroot per
listener, the brokers' SCRAM user written there first); Kafka 4.4: three combined KRaft nodes (the
controller listener stays PLAINTEXT; the brokers' SCRAM user given to ``kafka-storage format
--add-scram``), the production JVM options. A fresh cluster for each listener; each figure beside
the side's PLAINTEXT one (``÷ PLAINTEXT``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper, kafka_tool
from coordkit.testing.servers.kafka_server import KafkaNode, KafkaStartError
from coordkit.testing.servers.kafka_tools import PRODUCTION_JVM_OPTIONS
from coordkit.testing.servers.ports import free_port
from vs_kafka.clusters import (
    BROKER_IDS,
    KAFKA_ONLY_CONFIG,
    SHARED_CONFIG,
    START_TIMEOUT,
    STOP_TIMEOUT,
    _drain,
    answers_metadata,
    create_topic,
    serve_command,
)
from vs_kafka.processes import PARTITIONS, WARM_UP_RECORDS, produce

CASES = ("security-inter-broker",)
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
MECHANISM = "SCRAM-SHA-256"
BROKER_USER, BROKER_PASSWORD = "broker", "bench-broker-secret-6d2a"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
Figures = dict[str, float]
Case = Callable[[str, Callable[[], Figures]], None]


def _broker_config(inter: str, pems: Path) -> dict[str, str]:
    """The settings of a broker whose inter-broker listener is ``inter`` (Kafka's names)."""
    return {
        "inter.broker.listener.name": inter,
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": (
            f'{SCRAM_MODULE} required username="{BROKER_USER}" password="{BROKER_PASSWORD}";'
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": f"{pems}/server-keystore.pem",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": f"{pems}/ca.pem",
    }


@contextlib.contextmanager
def _coordkit(inter: str, pems: Path, zookeeper: StandaloneZooKeeper) -> Iterator[str]:
    """Three processes; the clients' PLAINTEXT bootstrap servers."""
    from coordkit.plugins import open_store
    from coordkit.serve.listeners.scram import new_credential, write_user_configs

    url = f"zookeeper://{zookeeper.hosts}/inter-{inter.lower()}-{time.time_ns()}?session_timeout=6"
    store = open_store(url)
    try:
        text = new_credential(MECHANISM, BROKER_PASSWORD).to_text()
        write_user_configs(store, BROKER_USER, {MECHANISM: text})
    finally:
        store.close()
    config = {"listeners": ",".join(f"{p}://127.0.0.1:0" for p in LISTENERS),
              **_broker_config(inter, pems)}  # fmt: skip
    words = [a for k, v in config.items() for a in ("--config", f"{k}={v}")]
    processes = []
    addresses: list[str] = []
    try:
        for broker in BROKER_IDS:
            process = subprocess.Popen(
                serve_command("--store", url, "--broker-id", str(broker), "--port", "0", *words),
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )  # fmt: skip
            processes.append(process)
            addresses.append(_plaintext_address(process, inter))
            _drain(process)
        for broker, address in zip(BROKER_IDS, addresses, strict=True):
            deadline = time.monotonic() + START_TIMEOUT
            while not answers_metadata(address, broker):
                if time.monotonic() > deadline:
                    raise SystemExit(f"coordkit broker {broker} does not answer Metadata")
                time.sleep(0.05)
        yield ",".join(addresses)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()


def _plaintext_address(process: subprocess.Popen[str], inter: str) -> str:
    """The PLAINTEXT listener's address among what ``coordkit serve`` prints (the first line
    names the inter-broker listener's, ``listener NAME of broker N on`` the others')."""
    assert process.stdout is not None
    for line in process.stdout:
        if inter == "PLAINTEXT" and (match := re.match(r"broker \d+ listening on (\S+)", line)):
            return match.group(1)
        if match := re.match(r"listener PLAINTEXT of broker \d+ on (\S+)", line):
            return match.group(1)
        if line.startswith("store "):
            break
    raise SystemExit(f"coordkit serve printed no PLAINTEXT listener (exit {process.poll()})")


class _SecuredKRaft(KafkaCluster):
    """Kafka's KRaft fixture with SSL and SASL_SSL listeners, the brokers' SCRAM user formatted
    into the metadata log."""

    ports: dict[tuple[int, str], int]

    def _node_properties(self, node: KafkaNode) -> dict[str, str]:
        properties = super()._node_properties(node)
        ports = self.__dict__.setdefault("ports", {})
        for protocol in LISTENERS[1:]:
            port = ports.setdefault((node.node_id, protocol), free_port())
            properties["listeners"] += f",{protocol}://127.0.0.1:{port}"
            properties["advertised.listeners"] += f",{protocol}://127.0.0.1:{port}"
        properties["listener.security.protocol.map"] += ",SSL:SSL,SASL_SSL:SASL_SSL"
        return properties

    def _prepare(self) -> None:
        for node in self.nodes.values():
            if node.owns_data_dir:
                shutil.rmtree(node.data_dir, ignore_errors=True)
            node.write_config(self._node_properties(node))
            formatted = kafka_tool(
                self.version, "kafka-storage", "format", "--cluster-id", self.cluster_id,
                "--config", str(node.config_path), "--add-scram",
                f"{MECHANISM}=[name={BROKER_USER},password={BROKER_PASSWORD}]",
            )  # fmt: skip
            if formatted.returncode != 0:
                raise KafkaStartError(f"kafka-storage format: {formatted.stdout}{formatted.stderr}")


@contextlib.contextmanager
def _kafka(inter: str, pems: Path, heap: str) -> Iterator[str]:
    properties = {**SHARED_CONFIG, **KAFKA_ONLY_CONFIG, **_broker_config(inter, pems)}
    with _SecuredKRaft(broker_ids=BROKER_IDS, heap=heap, properties=properties,
                       jvm_options=PRODUCTION_JVM_OPTIONS) as kafka:  # fmt: skip
        yield kafka.bootstrap


def run(args: argparse.Namespace, side: str, case: Case) -> None:
    if "security-inter-broker" not in args.case:
        return
    base: Figures = {}
    with tempfile.TemporaryDirectory(prefix="vs-kafka-inter-") as directory:
        from serve.security_servers import make_pems

        pems = make_pems(Path(directory))
        zookeeper = StandaloneZooKeeper().start() if side == "coordkit" else None
        try:
            for inter in LISTENERS:
                cluster = (_coordkit(inter, pems, zookeeper) if zookeeper is not None
                           else _kafka(inter, pems, args.kafka_heap))  # fmt: skip
                with cluster as bootstrap:
                    warm = min(args.records, WARM_UP_RECORDS)
                    create_topic(bootstrap, "inter-warm-up", PARTITIONS)
                    produce(bootstrap, "inter-warm-up", warm, args.record_size, args.producers,
                            f"{side} {inter} warm-up")  # fmt: skip
                    create_topic(bootstrap, "inter-produce", PARTITIONS)
                    figures = produce(bootstrap, "inter-produce", args.records, args.record_size,
                                      args.producers, f"{side} {inter}")  # fmt: skip
                if inter == "PLAINTEXT":
                    base = figures
                elif base.get("rec/s"):
                    figures["÷ PLAINTEXT"] = figures["rec/s"] / base["rec/s"]
                label = "SASL_SSL/SCRAM" if inter == "SASL_SSL" else inter
                case(f"inter-broker {label} produce acks=all", lambda f=figures: f)  # type: ignore[misc]
        finally:
            if zookeeper is not None:
                zookeeper.close()
