"""Kafka 4.4's ``kafka-share-groups.sh`` against ``coordkit serve`` (one broker on the
``--backend`` store) and against a Kafka 4.4 node, the same commands after the same share
consumption, their outputs compared: ``--list``, ``--describe`` (start offsets and lags, from
DescribeShareGroupOffsets), ``--reset-offsets --to-earliest --execute`` (AlterShareGroupOffsets),
``--delete-offsets`` (DeleteShareGroupOffsets) and ``--delete``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from coordkit.testing.servers import KafkaCluster
from coordkit.testing.servers.kafka_tools import KAFKA_KRAFT_VERSION, kafka_tool
from serve.conftest import ServeFactory

TOPIC = "jobs"
GROUP = "tools"
RECORDS = 20
#: A single Kafka node keeps its internal topics on itself.
KAFKA_PROPERTIES = {
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}
COMMANDS = [
    ("--list",),
    ("--describe", "--group", GROUP),
    ("--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--execute"),
    ("--describe", "--group", GROUP),
    ("--delete-offsets", "--group", GROUP, "--topic", TOPIC),
    ("--describe", "--group", GROUP),
    ("--delete", "--group", GROUP),
    ("--list",),
]


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    cluster = KafkaCluster(broker_ids=(1,), properties=KAFKA_PROPERTIES).start()
    try:
        yield cluster.bootstrap
    finally:
        cluster.close()


def consume_all(bootstrap: str) -> None:
    """The topic, the group from the earliest record, every record accepted by one share
    consumer, which then leaves."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    earliest = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    for future in admin.incremental_alter_configs([earliest]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"v%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                              "log_level": 3})  # fmt: skip
    consumer.subscribe([TOPIC])
    got = 0
    deadline = time.monotonic() + 60
    while got < RECORDS and time.monotonic() < deadline:
        got += sum(1 for m in consumer.poll(0.5) if m.error() is None)
    consumer.commit_sync()
    consumer.close()
    assert got == RECORDS


def outputs(bootstrap: str) -> list[tuple[int, str]]:
    found = []
    for command in COMMANDS:
        done = kafka_tool(KAFKA_KRAFT_VERSION, "kafka-share-groups", "--bootstrap-server",
                          bootstrap, *command)  # fmt: skip
        found.append((done.returncode, done.stdout.strip()))
    return found


def test_kafka_share_groups_answers_as_on_kafka(serve: ServeFactory, kafka: str) -> None:
    server = serve(brokers=1)
    consume_all(server.bootstrap)
    consume_all(kafka)
    mine, theirs = outputs(server.bootstrap), outputs(kafka)
    assert mine == theirs
    # What the commands showed: every record consumed (no lag), reset to the start (a lag of
    # all ten records of each partition), then no offsets.
    assert [row[-1] for row in table(mine[1][1])] == ["0", "0"]
    assert [row[-2:] for row in table(mine[3][1])] == [["0", "10"], ["0", "10"]]
    assert "has no offset information" in mine[5][1]


def table(text: str) -> list[list[str]]:
    """The rows (words) of a tool's table, without its heading."""
    return [line.split() for line in text.splitlines()[1:] if line.strip()]
