"""The two clusters of the scenario differential, started once per module (``conftest.py``)
and reused by every scenario: three Kafka 4.4 KRaft nodes (``KafkaCluster``, the jars of ``bash kafka-dist/fetch.sh``)
and a ``coordkit serve`` of three brokers on the memory store, configured alike.

Before the first scenario each cluster is warmed up, so that no scenario depends on being the
first to ask: ``__consumer_offsets`` exists with a leader for each partition, and every broker has
handed out a producer id (Kafka's first InitProducerId on a broker answers
COORDINATOR_LOAD_IN_PROGRESS while the broker fetches its block of ids).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from coordkit.protocol import APIS_BY_KEY, messages
from coordkit.testing.servers import KafkaCluster
from coordkit.testing.waiting import wait_for
from differential.harness import WAIT_SECONDS, Connection, Scenario, Side

#: The consumer group protocol's (KIP-848) configs both clusters run with: Kafka's defaults
#: but for the group size, which ``consumer_group_apis.group_max_size`` reaches.
CONSUMER_GROUP_CONFIGS = {
    "group.consumer.assignors": "uniform,range",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.max.size": "3",
}
#: Broker configs both clusters run with (coordkit serve takes Kafka's names with --config).
SHARED_CONFIGS = {
    **CONSUMER_GROUP_CONFIGS,
    # Every rebalance of a scenario is driven by its requests, never by a timer.
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.max.session.timeout.ms": "1800000",
    "offsets.topic.num.partitions": "5",
    "offsets.topic.replication.factor": "3",
    # __transaction_state (the transaction scenarios) made as small as __consumer_offsets.
    "transaction.state.log.num.partitions": "5",
    # Kafka's default; coordkit's is false.
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "delete.topic.enable": "true",
    # A consumer group's target is computed in the heartbeat that needs it, not held back by
    # Kafka 4.4's one-second batching (coordkit honours the same config).
    "group.consumer.assignment.interval.ms": "0",
    # Records are kept: Kafka's 7-day default would delete records whose create times are
    # older, as the scenarios' and the Java program's fixed ones (2023) are, at the first
    # retention check; a recording made then would read nothing. The retention scenarios give
    # their topics retention.ms or retention.bytes, checked every second.
    "log.retention.ms": "-1",
    "log.retention.check.interval.ms": "1000",
    # The compaction scenarios wait for each side's log cleaner (Kafka's default: 15 s).
    "log.cleaner.backoff.ms": "1000",
}
#: Configs only the Kafka cluster gets, because coordkit serve has no such setting: the
#: scenarios that depend on them record the difference (see the table of docs/serve.md).
KAFKA_ONLY_CONFIGS = {
    "group.max.size": "3",
    # Kafka 4.4 computes a consumer group's target on a background thread (KIP-1263);
    # coordkit computes it in the heartbeat that changes the group, which this makes Kafka do
    # too (with the assignment interval of SHARED_CONFIGS at 0), so epochs follow from the
    # requests alone.
    "group.consumer.assignor.offload.enable": "false",
    # The same for share groups (coordkit computes a share group's target in the heartbeat).
    "group.share.assignment.interval.ms": "0",
    "group.share.assignor.offload.enable": "false",
}
#: Kafka's brokers have racks (coordkit serve has no option to give its brokers one).
KAFKA_RACKS = {1: "a", 2: "b", 3: "a"}
KAFKA_BROKER_IDS = (1, 2, 3)
#: Seconds coordkit serve may take to print its addresses (a bound, generous for a shared,
#: loaded machine: its start is a second or two when idle).
STARTUP_SECONDS = 180
STOP_SECONDS = 30


@attrs.frozen
class ClusterUnderTest:
    """What a scenario side needs of a cluster: its name, brokers and the api versions it
    serves (api name → lowest, highest)."""

    name: str
    addresses: tuple[tuple[str, int], ...]
    broker_ids: tuple[int, ...]
    api_versions: Mapping[str, tuple[int, int]]

    def side(self, run: Scenario, salt: str = "") -> Side:
        return Side(self.name, self.addresses, self.broker_ids, run, salt=salt)


WARM_UP = Scenario("fixture.warm_up", lambda side: [], {})


def api_versions(address: tuple[str, int]) -> dict[str, tuple[int, int]]:
    """The ranges a broker advertises, for the apis coordkit's codec knows."""
    connection = Connection(address, lambda _api, _version: None)
    try:
        request = messages.ApiVersionsRequest(client_software_name="coordkit-differential",
                                              client_software_version="1.0")  # fmt: skip
        answer = connection.call(request, 3)
    finally:
        connection.close()
    return {
        APIS_BY_KEY[k.api_key].name: (k.min_version, k.max_version)
        for k in answer.api_keys
        if k.api_key in APIS_BY_KEY
    }


def warm_up(cluster: ClusterUnderTest) -> ClusterUnderTest:
    """The offsets topic created and led, a producer id handed out by every broker."""
    side = cluster.side(WARM_UP)
    side.coordinator("differential-warm-up")
    side.wait_topic_ready("__consumer_offsets", int(SHARED_CONFIGS["offsets.topic.num.partitions"]))
    request = messages.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000,
                                             producer_id=-1, producer_epoch=-1)  # fmt: skip
    for index in range(side.size):
        wait_for(
            lambda i=index: side.helper_call(i, request).error_code == 0,  # type: ignore[misc]
            WAIT_SECONDS,
            f"{cluster.name}: a producer id from broker {index}",
        )
    return cluster


class CoordkitServe:
    """``coordkit serve --store STORE --brokers 3 --port 0`` with :data:`SHARED_CONFIGS`, in a
    process of its own (its log in a temporary file, read when a test fails); the memory store
    unless ``store`` names another (the tools' tests run it on each), with ``args`` after the
    others (``--data-dir DIR``)."""

    def __init__(self, store: str = "memory://", args: Sequence[str] = ()) -> None:
        self.log_file = Path(tempfile.mkstemp(prefix="coordkit-differential-", suffix=".log")[1])
        configs = [word for k, v in SHARED_CONFIGS.items() for word in ("--config", f"{k}={v}")]
        command = [sys.executable, "-c", "from coordkit.cli import main; main()", "serve",
                   "--store", store, "--brokers", "3", "--port", "0", *configs, *args]  # fmt: skip
        with self.log_file.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=log, text=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )  # fmt: skip
        self.addresses: dict[int, tuple[str, int]] = {}
        self._read_banner()
        # Nothing more is expected on its standard output, but a full pipe would block it.
        threading.Thread(target=self._drain, daemon=True).start()

    def _read_banner(self) -> None:
        assert self.process.stdout is not None
        timer = threading.Timer(STARTUP_SECONDS, self.process.kill)
        timer.start()
        try:
            for line in self.process.stdout:
                if line.startswith("broker "):
                    words = line.split()
                    host, port = words[-1].rsplit(":", 1)
                    self.addresses[int(words[1])] = (host, int(port))
                elif line.startswith("store "):
                    return
        finally:
            timer.cancel()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(STOP_SECONDS)
        tail = self.log_tail()  # read before stop() removes the log
        self.stop()
        raise AssertionError(
            f"coordkit serve did not start within {STARTUP_SECONDS} s (exit status "
            f"{self.process.returncode}):\n{tail}"
        )

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for _ in self.process.stdout:
            pass

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(STOP_SECONDS)
        self.log_file.unlink(missing_ok=True)


@attrs.frozen
class Clusters:
    kafka: ClusterUnderTest
    coordkit: ClusterUnderTest
    kafka_cluster: KafkaCluster = attrs.field(repr=False)
    serve: CoordkitServe = attrs.field(repr=False)

    def logs(self) -> str:
        return (
            f"== coordkit serve\n{self.serve.log_tail()}\n"
            f"== Kafka\n{self.kafka_cluster.log_tail(lines=20)}"
        )
