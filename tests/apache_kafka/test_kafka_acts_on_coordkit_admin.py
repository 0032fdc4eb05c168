"""coordkit's admin commands write a live Kafka 3.9 cluster's ZooKeeper, and Kafka's controller
carries them out (issue #30, interoperation): topics created, grown, reconfigured and deleted,
reassignments planned with every placement strategy and run to completion, preferred leaders
elected — each checked through Kafka's own brokers (Metadata, DescribeConfigs), never through the
tree coordkit wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from coordkit.plugins import get_plugin_manager
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from coordkit.testing.waiting import wait_for

WAIT_SECONDS = 60
RACKS = {1: "a", 2: "b", 3: "a", 4: "b"}


@pytest.fixture(scope="module")
def cluster(zookeeper: StandaloneZooKeeper) -> Iterator[KafkaCluster]:
    # Kafka's controller holds a preferred election of its own 5 s after every controller failover
    # (auto.leader.rebalance.enable): off, so that the only elections are the ones coordkit asks.
    with KafkaCluster(
        zookeeper=zookeeper.hosts, broker_ids=(1, 2, 3, 4), racks=RACKS,
        properties={"auto.leader.rebalance.enable": "false"},
    ) as kafka:  # fmt: skip
        yield kafka


@pytest.fixture(scope="module")
def url(cluster: KafkaCluster, zookeeper: StandaloneZooKeeper) -> str:
    return f"zookeeper://{zookeeper.hosts}{cluster.chroot}"


@pytest.fixture(scope="module")
def admin(cluster: KafkaCluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
    yield client
    client.close()


def coordkit(*args: str) -> str:
    """Run a coordkit command; its output (a failure fails the test with its stderr)."""
    done = subprocess.run(
        [sys.executable, "-c", "from coordkit.cli import main; main()", *args],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"coordkit {' '.join(args)}: {done.stderr}"
    return done.stdout


def kafka_view(admin: KafkaAdminClient, topic: str) -> dict[int, dict[str, Any]] | None:
    """Partition → leader, replicas, ISR as Kafka's brokers answer; ``None`` while unknown."""
    (found,) = admin.describe_topics([topic])
    if found["error_code"] != 0:
        return None
    return {
        p["partition_index"]: {
            "leader": p["leader_id"], "replicas": p["replica_nodes"], "isr": sorted(p["isr_nodes"])
        }
        for p in found["partitions"]
    }  # fmt: skip


def wait_kafka(admin: KafkaAdminClient, topic: str, check: Any, what: str) -> Any:
    def ready() -> Any:
        view = kafka_view(admin, topic)
        return view if view is not None and check(view) else None

    return wait_for(ready, WAIT_SECONDS, what)


def all_in_sync(view: dict[int, dict[str, Any]]) -> bool:
    return all(sorted(p["replicas"]) == p["isr"] and p["leader"] >= 0 for p in view.values())


def test_a_topic_created_grown_configured_and_deleted_by_coordkit(
    url: str, admin: KafkaAdminClient
) -> None:
    coordkit("topics", "create", "--store", url, "--topic", "made", "--partitions", "3",
             "--replication-factor", "2")  # fmt: skip
    view = wait_kafka(admin, "made", lambda v: len(v) == 3 and all_in_sync(v), "Kafka's leaders")
    for partition in view.values():
        assert len({RACKS[r] for r in partition["replicas"]}) == 2  # Kafka's rack-aware placement

    coordkit("topics", "alter", "--store", url, "--topic", "made", "--partitions", "5")
    wait_kafka(admin, "made", lambda v: len(v) == 5 and all_in_sync(v), "the added partitions")

    coordkit("topics", "alter", "--store", url, "--topic", "made", "--config", "retention.ms=1000")

    def retention() -> str | None:
        found = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "made")])
        (configs,) = next(iter(found.values())).values()
        value = configs.get("retention.ms")
        value = value.get("value") if isinstance(value, dict) else value
        return value if value == "1000" else None

    wait_for(retention, WAIT_SECONDS, "Kafka's brokers to take the config coordkit wrote")

    coordkit("topics", "delete", "--store", url, "--topic", "made")
    wait_for(lambda: kafka_view(admin, "made") is None, WAIT_SECONDS, "Kafka to delete the topic")
    assert "made" not in coordkit("topics", "list", "--store", url).split()


PLACEMENTS = sorted(get_plugin_manager().placements.names())


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_a_reassignment_planned_by_coordkit_is_carried_out_by_kafka(
    placement: str, url: str, admin: KafkaAdminClient, tmp_path: Path
) -> None:
    topic = f"moving-{placement}"
    coordkit("topics", "create", "--store", url, "--topic", topic,
             "--replica-assignment", "1:2,2:1,1:2,2:1")  # fmt: skip
    wait_kafka(admin, topic, all_in_sync, "Kafka's leaders")
    wanted = tmp_path / "topics.json"
    wanted.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    generated = coordkit("reassign", "--store", url, "--generate", "--placement", placement,
                         "--topics-to-move-json-file", str(wanted), "--broker-list", "3,4")  # fmt: skip
    plan_text = generated.split("Proposed partition reassignment configuration")[1].strip()
    plan = json.loads(plan_text.splitlines()[0])
    targets = {p["partition"]: p["replicas"] for p in plan["partitions"]}
    assert sorted(targets) == [0, 1, 2, 3]
    assert all(set(r) <= {3, 4} and len(r) == 2 for r in targets.values())
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    coordkit("reassign", "--store", url, "--execute", "--reassignment-json-file", str(plan_file))

    def moved(view: dict[int, dict[str, Any]]) -> bool:
        return all(view[p]["replicas"] == r for p, r in targets.items()) and all_in_sync(view)

    final = wait_kafka(admin, topic, moved, "Kafka's controller to complete the reassignment")
    assert all(p["leader"] in {3, 4} for p in final.values())
    # Kafka's controller has finished (its brokers say so): the admin node is gone too.
    verified = coordkit(
        "reassign", "--store", url, "--verify", "--reassignment-json-file", str(plan_file)
    )
    assert verified.count("completed successfully") == 4, verified


def test_a_preferred_election_asked_by_coordkit_is_held_by_kafka(
    cluster: KafkaCluster, url: str, admin: KafkaAdminClient, tmp_path: Path
) -> None:
    coordkit("topics", "create", "--store", url, "--topic", "preferred",
             "--replica-assignment", "1:2,1:2")  # fmt: skip
    wait_kafka(admin, "preferred", all_in_sync, "Kafka's leaders")
    # Broker 1 bounces: leadership moves to 2, and 1 comes back as a follower.
    cluster.restart(1)
    wait_kafka(admin, "preferred", lambda v: all_in_sync(v) and all(p["leader"] == 2 for p in v.values()),
               "leadership on broker 2 with broker 1 back in the ISR")  # fmt: skip
    partitions = tmp_path / "partitions.json"
    partitions.write_text(json.dumps({"partitions": [{"topic": "preferred", "partition": 0}]}))
    coordkit("elect-preferred", "--store", url, "--path-to-json-file", str(partitions))
    view = wait_kafka(admin, "preferred", lambda v: v[0]["leader"] == 1, "broker 1 to lead p0")
    assert view[1]["leader"] == 2  # not asked for
    coordkit("elect-preferred", "--store", url)
    wait_kafka(admin, "preferred", lambda v: v[1]["leader"] == 1, "broker 1 to lead every p")
