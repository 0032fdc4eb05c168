"""coordkit pointed at the ZooKeeper of a live Kafka 3.9 cluster (issue #30, interoperation): its
read commands see what Kafka wrote (`tree`, `topics list/describe`, `brokers`, `cluster check`),
`cluster check` follows a broker's crash until Kafka's controller has acted, and the lab studies
the cluster (`--from-store`'s snapshot)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from coordkit.testing.waiting import wait_for
from coordkit_lab.runner import ERROR_METRIC, run_scenario
from coordkit_lab.study import parse_study, snapshot_store

#: Seconds to wait for what Kafka does on its own (a crashed broker's session expiring included).
WAIT_SECONDS = 60
RACKS = {1: "a", 2: "b", 3: "a"}


@pytest.fixture(scope="module")
def cluster(zookeeper: StandaloneZooKeeper) -> Iterator[KafkaCluster]:
    with KafkaCluster(zookeeper=zookeeper.hosts, broker_ids=(1, 2, 3), racks=RACKS) as kafka:
        for topic, partitions, factor in (("orders", 3, 2), ("audit", 2, 3)):
            made = kafka.tool(
                "kafka-topics", "--bootstrap-server", kafka.bootstrap, "--create",
                "--topic", topic, "--partitions", str(partitions),
                "--replication-factor", str(factor),
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
        wait_for(lambda: kafka.metadata().topics.get("audit") == 2, WAIT_SECONDS, "Kafka's topics")
        yield kafka


@pytest.fixture(scope="module")
def url(cluster: KafkaCluster, zookeeper: StandaloneZooKeeper) -> str:
    return f"zookeeper://{zookeeper.hosts}{cluster.chroot}"


def coordkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from coordkit.cli import main; main()", *args],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _kafka_describe(cluster: KafkaCluster, topic: str) -> list[str]:
    """kafka-topics --describe's partition lines, as Kafka's own tool prints them."""
    described = cluster.tool(
        "kafka-topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", topic
    )
    assert described.returncode == 0, described.stderr
    return [" ".join(line.split()) for line in described.stdout.splitlines()[1:]]


def _without_kafkas_extra_columns(line: str) -> str:
    return line.split(" Elr:", maxsplit=1)[0].split(" Offline:", maxsplit=1)[0]


def test_tree_shows_kafkas_nodes(url: str) -> None:
    shown = coordkit("tree", "/", "--depth", "2", "--store", url)
    assert shown.returncode == 0, shown.stderr
    for name in ("brokers", "controller", "controller_epoch", "cluster", "config", "feature"):
        assert f"── {name}" in shown.stdout, name


def test_topics_list_and_describe_read_what_kafka_wrote(cluster: KafkaCluster, url: str) -> None:
    listed = coordkit("topics", "list", "--store", url)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["audit", "orders"]
    for topic in ("orders", "audit"):
        described = coordkit("topics", "describe", "--topic", topic, "--store", url)
        assert described.returncode == 0, described.stderr
        ours = [" ".join(line.split()) for line in described.stdout.splitlines()[1:]]
        # Kafka's tool adds columns coordkit's (kafka-topics.sh --zookeeper's) does not have.
        theirs = [_without_kafkas_extra_columns(line) for line in _kafka_describe(cluster, topic)]
        assert ours == theirs


def test_brokers_lists_kafkas_brokers_with_racks(cluster: KafkaCluster, url: str) -> None:
    shown = coordkit("brokers", "--store", url)
    assert shown.returncode == 0, shown.stderr
    assert "3 broker(s) registered" in shown.stdout
    for broker_id, rack in RACKS.items():
        row = next(r for r in shown.stdout.splitlines() if r.startswith(f"│  {broker_id} │"))
        assert f":{cluster.node(broker_id).port} " in row
        assert f" {rack} " in row


def test_the_lab_studies_a_kafka_cluster_without_writing(url: str) -> None:
    manager = get_plugin_manager()
    snapshot = snapshot_store(url)
    topics = snapshot.document["topics"]
    assert {name: spec["partitions"] for name, spec in topics.items()} == {"orders": 3, "audit": 2}
    assert all(len(set(racks)) == 2 for racks in topics["orders"]["replica_racks"])
    document = {**snapshot.document, "members": {"solo": {"topics": ["orders", "audit"]}}}
    document.pop("groups", None)
    study = parse_study(document, manager, where=url)
    specs = study.specs(manager)
    rows = [row for spec in specs for row in run_scenario(spec, manager)]
    assert rows
    assert all(row[12] != ERROR_METRIC for row in rows)


def test_cluster_check_follows_a_crash_until_kafkas_controller_acts(
    cluster: KafkaCluster, url: str
) -> None:
    """Healthy: exit 0. Broker 3 killed while the others are stopped (so no controller can act
    before the check looks): exit 1 naming the partitions without a live leader. The others
    resumed: Kafka's controller moves leadership and shrinks the ISRs; exit 0 again."""
    assert coordkit("cluster", "check", "--store", url).returncode == 0
    others = [cluster.node(b) for b in (1, 2)]
    cluster.kill(3)
    for node in others:
        assert node.pid is not None
        os.kill(node.pid, signal.SIGSTOP)
    try:
        # The three sessions expire alike; the check sees brokers gone and leaders dead.
        broken = wait_for(
            lambda: (r := coordkit("cluster", "check", "--store", url)).returncode == 1 and r,
            WAIT_SECONDS,
            "cluster check to see the crash",
        )
    finally:
        for node in others:
            assert node.pid is not None
            os.kill(node.pid, signal.SIGCONT)
    assert broken.stdout.strip(), broken.stderr
    assert "orders" in broken.stdout + broken.stderr
    healed = wait_for(
        lambda: (r := coordkit("cluster", "check", "--store", url)).returncode == 0 and r,
        WAIT_SECONDS,
        "Kafka's controller to act and cluster check to pass",
    )
    assert "converged" in healed.stdout
    cluster.restart(3)
