"""Three Kafka 3.9 brokers in ZooKeeper mode on a chroot of the test ZooKeeper: they come up and
answer Metadata, Kafka's own tools create and describe a topic, and a broker killed with SIGKILL
leaves the cluster's Metadata and comes back with the same id and data."""

from __future__ import annotations

from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper, kafka_tool


def test_every_broker_answers_metadata_listing_the_three(
    zookeeper_mode_cluster: KafkaCluster,
) -> None:
    cluster = zookeeper_mode_cluster
    for node in cluster.nodes.values():
        metadata = node.metadata()
        assert metadata is not None
        assert {i: (b.port, b.rack) for i, b in metadata.brokers.items()} == {
            1: (cluster.node(1).port, "a"),
            2: (cluster.node(2).port, "b"),
            3: (cluster.node(3).port, "a"),
        }
        assert metadata.controller_id in {1, 2, 3}


def test_the_brokers_register_under_the_clusters_chroot(
    zookeeper_mode_cluster: KafkaCluster, zookeeper: StandaloneZooKeeper
) -> None:
    # Kafka's own ZooKeeper shell (the one of its release) reads the chroot Kafka created.
    listed = kafka_tool(
        zookeeper_mode_cluster.version,
        "zookeeper-shell",
        zookeeper.hosts,
        "ls",
        f"{zookeeper_mode_cluster.chroot}/brokers/ids",
        check=True,
    )
    assert "[1, 2, 3]" in listed.stdout.splitlines()


def test_kafka_topics_creates_a_topic_and_describes_it(
    zookeeper_mode_cluster: KafkaCluster,
) -> None:
    cluster = zookeeper_mode_cluster
    created = cluster.tool(
        "kafka-topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic",
        "orders", "--partitions", "3", "--replication-factor", "3",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert "Created topic orders." in created.stdout
    described = cluster.tool(
        "kafka-topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", "orders"
    )
    assert described.returncode == 0, described.stderr
    summary = described.stdout.splitlines()[0]
    assert summary.startswith("Topic: orders\t")
    assert "PartitionCount: 3\tReplicationFactor: 3" in summary
    assert cluster.metadata().topics["orders"] == 3


def test_a_killed_broker_leaves_the_metadata_and_restarts_with_its_id(
    zookeeper_mode_cluster: KafkaCluster,
) -> None:
    cluster = zookeeper_mode_cluster
    cluster.kill(3)
    # Once its ZooKeeper session expires, the controller tells the others it is gone.
    assert set(cluster.wait_ready().brokers) == {1, 2}
    assert set(cluster.metadata().brokers) == {1, 2}
    back = cluster.restart(3, graceful=False)
    assert set(back.brokers) == {1, 2, 3}
    assert back.brokers[3].port == cluster.node(3).port
