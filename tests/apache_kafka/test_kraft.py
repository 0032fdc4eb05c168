"""Three combined broker+controller nodes of Kafka 4 (KRaft, static quorum): they come up with
storage formatted by Kafka's storage tool, answer Metadata with three brokers and a controller
id, and Kafka's own tools see the quorum and a topic."""

from __future__ import annotations

from coordkit.testing.servers import KafkaCluster


def test_the_nodes_answer_metadata_with_three_brokers_and_a_controller(
    kraft_cluster: KafkaCluster,
) -> None:
    for node in kraft_cluster.nodes.values():
        metadata = node.metadata()
        assert metadata is not None
        assert sorted(metadata.brokers) == [1, 2, 3]
        assert metadata.controller_id in {1, 2, 3}
        assert metadata.cluster_id == kraft_cluster.cluster_id


def test_the_metadata_quorum_tool_sees_three_voters(kraft_cluster: KafkaCluster) -> None:
    described = kraft_cluster.tool(
        "kafka-metadata-quorum", "--bootstrap-server", kraft_cluster.bootstrap, "describe",
        "--status",
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    status = dict(line.split(":", 1) for line in described.stdout.splitlines() if ":" in line)
    assert status["ClusterId"].strip() == kraft_cluster.cluster_id
    assert int(status["LeaderId"]) in {1, 2, 3}
    assert status["CurrentVoters"].count('"id"') == 3


def test_kafka_topics_creates_a_topic_the_metadata_lists(kraft_cluster: KafkaCluster) -> None:
    created = kraft_cluster.tool(
        "kafka-topics", "--bootstrap-server", kraft_cluster.bootstrap, "--create", "--topic",
        "events", "--partitions", "2", "--replication-factor", "3",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    described = kraft_cluster.tool(
        "kafka-topics", "--bootstrap-server", kraft_cluster.bootstrap, "--describe", "--topic",
        "events",
    )  # fmt: skip
    assert "PartitionCount: 2\tReplicationFactor: 3" in described.stdout
    assert kraft_cluster.metadata().topics["events"] == 2
