"""``coordkit serve --group-coordinator murmur2|rendezvous`` (issue 38): FindCoordinator answers,
for a group and for a transactional id, the leader of the partition the strategy names (ids chosen
so that Kafka's formula names another broker), and a consume-transform-produce transaction of
confluent-kafka (its offsets sent to a group placed by the strategy) commits, its records read
back read_committed and its offsets the group's."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coordkit.plugins import get_plugin_manager
from coordkit.protocol import messages
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient, ServeFactory, ServeProcess

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 7
TIMEOUT = 30
COORDINATOR_NOT_AVAILABLE = 15
OFFSETS_TOPIC = "__consumer_offsets"
STATE_TOPIC = "__transaction_state"


def _leaders(server: ServeProcess, topic: str) -> dict[int, int]:
    """Partition → leader of ``topic``, once every partition has one."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap})

    def ask() -> dict[int, int] | None:
        found = admin.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
        if found is None or found.error is not None or len(found.partitions) != PARTITIONS:
            return None
        leaders = {p: meta.leader for p, meta in found.partitions.items()}
        return leaders if all(leader >= 0 for leader in leaders.values()) else None

    return wait_for(ask, TIMEOUT, f"leaders of {topic}")


def _find(client: RawClient, key: str, key_type: int) -> int:
    def ask() -> tuple[int] | None:  # a tuple: broker 0 is an answer too
        answer = client.call(messages.FindCoordinatorRequest(key=key, key_type=key_type), 3)
        if answer.error_code == COORDINATOR_NOT_AVAILABLE:
            return None
        assert answer.error_code == 0, f"FindCoordinator {key!r}: error {answer.error_code}"
        return (int(answer.node_id),)

    return wait_for(ask, TIMEOUT, f"the coordinator of {key!r}")[0]


def _placed_elsewhere_than_kafka(strategy: str, leaders: dict[int, int], prefix: str) -> str:
    """An id whose coordinator under ``strategy`` is another broker than under Kafka's rule."""
    manager = get_plugin_manager()
    ours = manager.group_coordinator_selection(strategy)
    kafka = manager.group_coordinator_selection("kafka")
    for n in range(1000):
        candidate = f"{prefix}-{n}"
        mine = leaders[ours.partition_for(candidate, PARTITIONS)]
        if mine != leaders[kafka.partition_for(candidate, PARTITIONS)]:
            return candidate
    raise AssertionError(f"no id that {strategy} and kafka place on different brokers")


@pytest.mark.parametrize("strategy", ["murmur2", "rendezvous"])
def test_groups_and_transactions_follow_the_chosen_coordinator_strategy(
    strategy: str, serve: ServeFactory, raw_client: Callable[[str], RawClient]
) -> None:
    server = serve(
        "--group-coordinator", strategy,
        "--config", f"offsets.topic.num.partitions={PARTITIONS}",
        "--config", f"transaction.state.log.num.partitions={PARTITIONS}",
        "--config", "group.initial.rebalance.delay.ms=0",
    )  # fmt: skip
    client = raw_client(server.addresses[0])
    manager = get_plugin_manager()
    selection = manager.group_coordinator_selection(strategy)
    # The first lookups create the internal topics; the strategy's partitions decide the rest.
    _find(client, "warm-up", 0)
    _find(client, "warm-up", 1)
    offsets_leaders = _leaders(server, OFFSETS_TOPIC)
    state_leaders = _leaders(server, STATE_TOPIC)
    group = _placed_elsewhere_than_kafka(strategy, offsets_leaders, "group")
    transactional_id = _placed_elsewhere_than_kafka(strategy, state_leaders, "txn")
    assert _find(client, group, 0) == offsets_leaders[selection.partition_for(group, PARTITIONS)]
    assert (
        _find(client, transactional_id, 1)
        == state_leaders[selection.partition_for(transactional_id, PARTITIONS)]
    )

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for done in admin.create_topics([NewTopic(t, 1, 3) for t in ("input", "output")]).values():
        done.result(TIMEOUT)
    seed = Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
    failures: list[object] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(error)

    for n in range(6):
        seed.produce("input", value=f"in-{n}".encode(), on_delivery=delivered)
    assert seed.flush(TIMEOUT) == 0
    assert not failures
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})  # fmt: skip
    consumer.subscribe(["input"])
    producer = Producer({"bootstrap.servers": server.bootstrap,
                         "transactional.id": transactional_id})  # fmt: skip
    producer.init_transactions(TIMEOUT)
    consumed: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(consumed) < 6 and time.monotonic() < deadline:
        batch = [m for m in consumer.consume(10, 1.0) if m.error() is None]
        consumed += [m.value() for m in batch]
    assert sorted(consumed) == [f"in-{n}".encode() for n in range(6)]
    producer.begin_transaction()
    for value in consumed:
        producer.produce("output", value=value.upper())
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), TIMEOUT
    )
    producer.commit_transaction(TIMEOUT)
    committed = consumer.committed([TopicPartition("input", 0)], TIMEOUT)
    consumer.close()
    assert committed[0].offset == 6

    reader = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"{group}-reader",
                       "auto.offset.reset": "earliest",
                       "isolation.level": "read_committed"})  # fmt: skip
    reader.subscribe(["output"])
    output: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while len(output) < 6 and time.monotonic() < deadline:
        output += [m.value() for m in reader.consume(10, 1.0) if m.error() is None]
    reader.close()
    assert sorted(output) == [f"IN-{n}".encode() for n in range(6)]
