"""AlterShareGroupOffsets on a group that does not exist makes it, an empty share group, as Kafka
4.4's ``getOrMaybeCreateShareGroup`` does: Kafka 4.4's ``kafka-share-groups.sh`` against
``coordkit serve`` (one broker on the ``--backend`` store) and against a Kafka 4.4 node, the same
commands, their outputs compared — ``--reset-offsets`` of a new group, then ``--list`` and
``--describe`` (``--state``, ``--offsets``) show it; ``--reset-offsets`` of a consumer group
(not a share group) is refused."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coordkit.testing.servers import KafkaCluster
from coordkit.testing.servers.kafka_tools import KAFKA_KRAFT_VERSION, kafka_tool
from serve.conftest import ServeFactory

TOPIC = "jobs"
NEW_GROUP = "made-by-reset"
CONSUMER_GROUP = "readers"
#: A single Kafka node keeps its internal topics on itself.
KAFKA_PROPERTIES = {
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}
#: The coordinator column (its address and id differ between the two nodes).
COORDINATOR = re.compile(r"\S+:\d+\s+\(\d+\)")
RESET = ("--reset-offsets", "--topic", TOPIC, "--to-earliest", "--execute")
COMMANDS = [
    ("--list",),
    ("--group", NEW_GROUP, *RESET),
    ("--list",),
    ("--describe", "--group", NEW_GROUP, "--state"),
    ("--describe", "--group", NEW_GROUP, "--offsets"),
    ("--group", CONSUMER_GROUP, *RESET),
    ("--list",),
]


def outputs(bootstrap: str) -> list[tuple[int, list[list[str]]]]:
    """The topic with records, a consumer group with committed offsets, then the commands: each
    one's exit status and the words of its output's lines (the coordinator's address left
    out)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(6):
        producer.produce(TOPIC, value=b"v%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": CONSUMER_GROUP})
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    consumer.close()
    found = []
    for command in COMMANDS:
        done = kafka_tool(KAFKA_KRAFT_VERSION, "kafka-share-groups", "--bootstrap-server",
                          bootstrap, *command)  # fmt: skip
        text = COORDINATOR.sub("<coordinator>", done.stdout + done.stderr)
        found.append((done.returncode, [line.split() for line in text.splitlines() if line]))
    return found


@pytest.fixture(scope="module")
def kafka_outputs() -> Iterator[list[tuple[int, list[list[str]]]]]:
    """The commands' outputs on a Kafka 4.4 node (once for every backend)."""
    cluster = KafkaCluster(broker_ids=(1,), properties=KAFKA_PROPERTIES).start()
    try:
        yield outputs(cluster.bootstrap)
    finally:
        cluster.close()


def test_reset_offsets_makes_an_empty_share_group_as_kafka(
    serve: ServeFactory, kafka_outputs: list[tuple[int, list[list[str]]]]
) -> None:
    server = serve(brokers=1)
    mine = outputs(server.bootstrap)
    assert mine == kafka_outputs
    # What the commands showed: no share group, then the new one listed, Empty, its offsets at
    # the start of both partitions (a lag of their three records); the consumer group's reset
    # refused, and it is not listed.
    assert mine[0][1] == []
    assert mine[2][1] == [[NEW_GROUP]]
    assert mine[3][1][1] == [NEW_GROUP, "<coordinator>", "Empty", "0"]
    assert [row[-2:] for row in mine[4][1][1:]] == [["0", "3"], ["0", "3"]]
    assert f"Group {CONSUMER_GROUP} is not a share group." in " ".join(mine[5][1][0])
    assert mine[6][1] == [[NEW_GROUP]]
