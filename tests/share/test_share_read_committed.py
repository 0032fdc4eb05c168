"""A share group's ``share.isolation.level`` (a GROUP config, set through IncrementalAlterConfigs)
with a transactional confluent-kafka producer, on ``coordkit serve`` (one broker on the
``--backend`` store) and on a Kafka 4.4 node, the same steps on both:

* a transaction committed, one aborted, one left open and a record produced after it without a
  transaction; a confluent-kafka ``ShareConsumer`` of a read_committed group receives exactly the
  committed records — none of the aborted ones, nothing at or past the open transaction (the
  last stable offset) — and, once the open transaction commits, its records and the one after;
* a group left at Kafka 4.4's default (read_uncommitted) receives every record, the aborted and
  the open transaction's too.

Control batches (the transactions' markers) are acquired like any batch, on both, and no client
hands them to the application.
"""

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
from serve.conftest import ServeFactory

TOPIC = "orders"
TIMEOUT = 60
#: Long enough for a share consumer to join and be given the partitions, and for a record it
#: should not get to have come if it were going to.
QUIET_SECONDS = 6
#: A single Kafka node keeps its internal topics on itself.
KAFKA_PROPERTIES = {
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
COMMITTED = [f"committed-{i}" for i in range(5)]
ABORTED = [f"aborted-{i}" for i in range(4)]
OPEN = [f"open-{i}" for i in range(3)]
AFTER = ["after-open"]


@pytest.fixture(scope="module")
def kafka_received() -> Iterator[dict[str, list[str]]]:
    """What the groups received on a Kafka 4.4 node (once for every backend)."""
    cluster = KafkaCluster(broker_ids=(1,), properties=KAFKA_PROPERTIES).start()
    try:
        yield run(cluster.bootstrap)
    finally:
        cluster.close()


def set_group_configs(admin: AdminClient, group: str, configs: dict[str, str]) -> None:
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])  # fmt: skip
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def transaction(producer: Producer, values: list[str], *, commit: bool | None) -> None:
    """``values`` in one transaction, committed, aborted or (``None``) left open."""
    producer.begin_transaction()
    for value in values:
        producer.produce(TOPIC, value=value.encode(), partition=0)
    producer.flush(30)
    if commit is True:
        producer.commit_transaction(30)
    elif commit is False:
        producer.abort_transaction(30)


class Group:
    """One share consumer of a group, accepting what it gets (implicit acknowledgement)."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                       "log_level": 3})  # fmt: skip
        self.consumer.subscribe([TOPIC])
        self.values: list[str] = []

    def poll_until(self, wanted: set[str]) -> None:
        """Poll until ``wanted`` came (or the timeout), then for QUIET_SECONDS more."""
        deadline = time.monotonic() + TIMEOUT
        while not wanted <= set(self.values) and time.monotonic() < deadline:
            self._poll()
        quiet = time.monotonic() + QUIET_SECONDS
        while time.monotonic() < quiet:
            self._poll()

    def _poll(self) -> None:
        for message in self.consumer.poll(0.5):
            if message.error() is None:
                self.values.append((message.value() or b"").decode())

    def close(self) -> None:
        self.consumer.close()


def run(bootstrap: str) -> dict[str, list[str]]:
    """The steps of the module's docstring; what each group received, in order, at each step."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    set_group_configs(
        admin,
        "committed",
        {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"},
    )
    set_group_configs(admin, "uncommitted", {"share.auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "orders-writer"})
    producer.init_transactions(30)
    transaction(producer, COMMITTED, commit=True)
    transaction(producer, ABORTED, commit=False)
    transaction(producer, OPEN, commit=None)
    plain = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    plain.produce(TOPIC, value=AFTER[0].encode(), partition=0)
    assert plain.flush(30) == 0
    committed, uncommitted = Group(bootstrap, "committed"), Group(bootstrap, "uncommitted")
    try:
        committed.poll_until(set(COMMITTED))
        before_commit = list(committed.values)
        uncommitted.poll_until(set(COMMITTED + ABORTED + OPEN + AFTER))
        producer.commit_transaction(30)
        committed.poll_until(set(COMMITTED + OPEN + AFTER))
        return {"before commit": before_commit, "committed": committed.values,
                "uncommitted": uncommitted.values}  # fmt: skip
    finally:
        committed.close()
        uncommitted.close()


def test_read_committed_share_group_receives_only_committed_records_as_kafka(
    serve: ServeFactory, kafka_received: dict[str, list[str]]
) -> None:
    server = serve(brokers=1)
    mine = run(server.bootstrap)
    assert mine["before commit"] == COMMITTED
    assert mine["committed"] == COMMITTED + OPEN + AFTER
    assert mine["uncommitted"] == COMMITTED + ABORTED + OPEN + AFTER
    assert mine == kafka_received
