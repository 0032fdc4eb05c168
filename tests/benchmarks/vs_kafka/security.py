"""The cost of TLS and SASL (issue #36's done-when): the same produce and consume workload through
librdkafka on PLAINTEXT, SSL and SASL_SSL with SCRAM-SHA-256, against each side's cluster of three
brokers, each case with its ratio to the side's own PLAINTEXT figure.

Each side runs one cluster with the three listeners (TLS from throw-away PEM files, the
``ssl.keystore.type=PEM`` settings on both sides; the SCRAM user created by
AlterUserScramCredentials over PLAINTEXT): coordkit as ``coordkit serve --brokers 3`` in one
process on the memory store (the throughput cases' form), Kafka 4 as its three KRaft nodes with
the production JVM options. The listeners secured are the clients'; replication stays as each side
runs it (coordkit's in-process, Kafka's PLAINTEXT inter-broker listener), so the ratio is what
securing the clients' connections costs. A topic per listener, replication factor 3, acks=all.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from coordkit.testing.servers import KafkaCluster
from coordkit.testing.servers.kafka_server import KafkaNode
from coordkit.testing.servers.kafka_tools import PRODUCTION_JVM_OPTIONS
from coordkit.testing.servers.ports import free_port
from vs_kafka.clusters import (
    BROKER_IDS,
    KAFKA_ONLY_CONFIG,
    SHARED_CONFIG,
    STOP_TIMEOUT,
    _drain,
    create_topic,
    serve_command,
)
from vs_kafka.throughput import PARTITIONS, Figures, consume, produce

CASES = ("security",)
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
MECHANISM = "SCRAM-SHA-256"
USER, PASSWORD = "bench", "bench-scram-secret-0b7e"
RECORD_SIZE = 1024
#: Measured rounds (after a warm-up round); each figure is the median of its rounds.
ROUNDS = 3
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
Case = Callable[[str, Callable[[], Figures]], None]


def _security_config(pems: Path) -> dict[str, str]:
    """The broker settings of the SSL and SASL_SSL listeners (Kafka's names, both sides)."""
    return {
        "sasl.enabled.mechanisms": MECHANISM,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": f"{pems}/server-keystore.pem",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": f"{pems}/ca.pem",
    }


def _client(protocol: str, pems: Path) -> dict[str, Any]:
    """librdkafka's settings for ``protocol``."""
    config: dict[str, Any] = {"security.protocol": protocol}
    if protocol != "PLAINTEXT":
        config["ssl.ca.location"] = str(pems / "ca.pem")
    if protocol == "SASL_SSL":
        config.update({"sasl.mechanism": MECHANISM, "sasl.username": USER,
                       "sasl.password": PASSWORD})  # fmt: skip
    return config


class _ListenersKafka(KafkaCluster):
    """Kafka's KRaft fixture with SSL and SASL_SSL listeners beside PLAINTEXT."""

    ports: dict[tuple[int, str], int]

    def _node_properties(self, node: KafkaNode) -> dict[str, str]:
        properties = super()._node_properties(node)
        ports = self.__dict__.setdefault("ports", {})
        for protocol in PROTOCOLS[1:]:
            port = ports.setdefault((node.node_id, protocol), free_port())
            properties["listeners"] += f",{protocol}://127.0.0.1:{port}"
            properties["advertised.listeners"] += f",{protocol}://127.0.0.1:{port}"
        properties["listener.security.protocol.map"] += ",SSL:SSL,SASL_SSL:SASL_SSL"
        return properties

    def bootstraps(self) -> dict[str, str]:
        found = {"PLAINTEXT": self.bootstrap}
        for protocol in PROTOCOLS[1:]:
            found[protocol] = ",".join(f"127.0.0.1:{self.ports[(b, protocol)]}"
                                       for b in self.nodes)  # fmt: skip
        return found


@contextlib.contextmanager
def _coordkit(pems: Path) -> Iterator[dict[str, str]]:
    listeners = ",".join(f"{p}://127.0.0.1:0" for p in PROTOCOLS)
    words = [f"listeners={listeners}", *(f"{k}={v}" for k, v in _security_config(pems).items())]
    process = subprocess.Popen(
        serve_command("--store", "memory://bench-security", "--brokers", "3", "--port", "0",
                      *(a for w in words for a in ("--config", w))),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )  # fmt: skip
    found: dict[str, list[str]] = {p: [] for p in PROTOCOLS}
    assert process.stdout is not None
    for line in process.stdout:
        if match := re.match(r"broker \d+ listening on (\S+)", line):
            found["PLAINTEXT"].append(match.group(1))
        elif match := re.match(r"listener (\S+) of broker \d+ on (\S+)", line):
            found[match.group(1)].append(match.group(2))
        elif line.startswith("store "):
            break
    else:
        raise SystemExit(f"coordkit serve exited with {process.wait()} before it served")
    _drain(process)
    try:
        yield {p: ",".join(a) for p, a in found.items()}
    finally:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()


@contextlib.contextmanager
def _cluster(side: str, heap: str, pems: Path) -> Iterator[dict[str, str]]:
    """Each listener's bootstrap servers on a fresh cluster of ``side``."""
    if side == "kafka":
        kafka = _ListenersKafka(
            broker_ids=BROKER_IDS, heap=heap, jvm_options=PRODUCTION_JVM_OPTIONS,
            properties={**SHARED_CONFIG, **KAFKA_ONLY_CONFIG, **_security_config(pems)},
        )  # fmt: skip
        with kafka:
            yield kafka.bootstraps()
    else:
        with _coordkit(pems) as bootstraps:
            yield bootstraps


def _create_user(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism
    from confluent_kafka.admin import UserScramCredentialUpsertion as Upsertion

    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = Upsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                       PASSWORD.encode())  # fmt: skip
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)


def _median(runs: list[Figures]) -> Figures:
    """Each figure's median over ``runs``."""
    names = dict.fromkeys(name for run in runs for name in run)
    return {name: statistics.median(run[name] for run in runs if name in run) for name in names}


def run(side: str, heap: str, records: int, case: Case) -> None:
    """Produce then consume ``records`` records of 1 KiB through each listener of ``side``:
    a warm-up round through every listener first (not counted: the JIT, the TLS sessions'
    first handshakes), then :data:`ROUNDS` rounds, the listeners in a rotated order each round,
    each figure the median of its rounds; a secured listener's rec/s also over PLAINTEXT's."""
    with tempfile.TemporaryDirectory(prefix="vs-kafka-pems-") as directory:
        from serve.security_servers import make_pems

        pems = make_pems(Path(directory))
        with _cluster(side, heap, pems) as bootstraps:
            _create_user(bootstraps["PLAINTEXT"])
            topics = {p: f"security-{p.lower().replace('_', '-')}" for p in PROTOCOLS}
            for topic in topics.values():
                create_topic(bootstraps["PLAINTEXT"], topic, PARTITIONS)
            runs: dict[tuple[str, str], list[Figures]] = {}
            for round_ in range(ROUNDS + 1):
                order = PROTOCOLS[round_ % 3 :] + PROTOCOLS[: round_ % 3]
                count = max(records // 5, 1) if round_ == 0 else records
                for protocol in order:
                    bootstrap, client = bootstraps[protocol], _client(protocol, pems)
                    print(f"  {side}: {protocol} round {round_} ({count} records) ...", flush=True)
                    written = produce(
                        bootstrap, topics[protocol], count, RECORD_SIZE, "all", client
                    )
                    read = consume(bootstrap, topics[protocol], count, PARTITIONS, client)
                    if round_:
                        runs.setdefault((protocol, "produce"), []).append(written)
                        runs.setdefault((protocol, "consume"), []).append(read)
            for protocol in PROTOCOLS:
                label = "SASL_SSL/SCRAM" if protocol == "SASL_SSL" else protocol
                for kind, title in (("produce", "produce acks=all 1024B"),
                                    ("consume", "consume 1024B")):  # fmt: skip
                    figures = _median(runs[(protocol, kind)])
                    base = _median(runs[("PLAINTEXT", kind)])
                    if protocol != "PLAINTEXT" and base.get("rec/s"):
                        # The cost: this listener's throughput over PLAINTEXT's, same side.
                        figures["÷ PLAINTEXT"] = figures["rec/s"] / base["rec/s"]
                    case(f"{label} {title}", lambda f=figures: f)  # type: ignore[misc]
