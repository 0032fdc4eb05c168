"""The legacy consumer's registration and rebalance on every backend: registration JSON, Kafka's
split over consumer threads, churn, owner-node conflicts and retries, brokers and topic changes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from coordkit.engine.legacy import (
    AssignmentContext,
    LegacyConsumerConfig,
    LegacyRebalanceFailedError,
    OwnershipChange,
)
from coordkit.kafka import layout
from coordkit.kafka.model import ConsumerRegistration, TopicPartition
from engine.legacy.world import LegacyWorld, Owners, ceil_range, kafka_range
from harness.waiting import wait_for


def test_registration_json_follows_seed_001(world: LegacyWorld) -> None:
    world.add_broker()
    world.create_topic("orders", 4)
    consumer = world.consumer({"orders": 2, "audit": 1})

    assert re.fullmatch(r"billing_testhost-\d{13}-[0-9a-f]{1,8}", consumer.consumer_id)
    assert consumer.threads == [f"{consumer.consumer_id}-0", f"{consumer.consumer_id}-1"]
    data, stat = world.admin.get(layout.consumer_registration_path("billing", consumer.consumer_id))
    assert stat.ephemeral
    raw = json.loads(data)
    assert set(raw) == {"version", "subscription", "pattern", "timestamp"}
    assert raw["version"] == 1
    assert raw["pattern"] == "static"
    assert raw["subscription"] == {"audit": 1, "orders": 2}
    assert isinstance(raw["timestamp"], str)
    assert raw["timestamp"].isdigit()
    decoded = layout.decode_znode(
        layout.consumer_registration_path("billing", consumer.consumer_id), data
    )
    assert isinstance(decoded, ConsumerRegistration)
    assert world.view().registrations == {consumer.consumer_id: decoded}


def test_thread_ids_sort_as_kafka_compares_them() -> None:
    context = AssignmentContext.from_registrations(
        "g_c",
        {"g_c": ConsumerRegistration({"t": 12}, "1"), "g_b": ConsumerRegistration({"t": 1}, "1")},
        {"t": 13},
    )
    order = [str(t) for t in context.consumers_for_topic["t"]]
    assert order[:4] == ["g_b-0", "g_c-0", "g_c-1", "g_c-10"]  # text order: "-10" before "-2"
    assert order == sorted(order)


@pytest.mark.parametrize(
    ("assignor", "model"), [("range", kafka_range), ("range-ceil", ceil_range)]
)
def test_consumers_share_partitions_over_threads(
    world: LegacyWorld, assignor: str, model: Callable[..., Owners]
) -> None:
    world.add_broker()
    world.create_topic("orders", 17)
    world.create_topic("audit", 5)
    # Eleven streams in one consumer puts threads -10 between -1 and -2 in Kafka's order.
    world.consumer({"orders": 11, "audit": 1}, assignor=assignor, start=False)
    world.consumer({"orders": 2}, assignor=assignor, start=False)
    world.consumer({"orders": 1, "audit": 2}, assignor=assignor, start=False)
    for consumer in world.consumers:
        consumer.start(wait=False)

    expected = model(world.subscriptions(), world.partitions)
    view = world.wait_stable(expected)

    assert set(view.owners) == {
        TopicPartition(t, p) for t, n in world.partitions.items() for p in range(n)
    }
    assert world.history.violations() == []


def test_roundrobin_deals_partitions_over_all_threads(world: LegacyWorld) -> None:
    world.add_broker()
    world.create_topic("orders", 10)
    world.create_topic("audit", 7)
    for _ in range(3):
        world.consumer({"orders": 2, "audit": 2}, assignor="roundrobin", start=False)
    for consumer in world.consumers:
        consumer.start(wait=False)

    def dealt() -> bool:
        owners = world.view().owners
        return all(c.idle for c in world.consumers) and len(owners) == 17

    wait_for(dealt, what="all 17 partitions owned")
    per_thread = world.view().owners_by_thread()
    counts = sorted(len(ps) for ps in per_thread.values())
    assert len(per_thread) == 6
    assert counts[-1] - counts[0] <= 1
    assert world.history.violations() == []


def test_churn_keeps_single_ownership(world: LegacyWorld) -> None:
    world.add_broker()
    world.create_topic("orders", 12)
    first = world.consumer({"orders": 1})
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "one consumer")

    second = world.consumer({"orders": 2})
    third = world.consumer({"orders": 1})
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "three joined")

    second.close()  # a graceful leave
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "after a leave")

    third.crash()  # the session ends: ephemeral registration and owner nodes vanish
    view = world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "after a crash")
    assert set(view.owners.values()) == {f"{first.consumer_id}-0"}

    world.consumer({"orders": 3})
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "after a rejoin")

    assert world.history.violations() == []
    # Every member saw every change: the herd. The first consumer rebalanced once per step.
    assert first.rebalances.count >= 5


def test_owner_node_conflict_retries_after_backoff(world: LegacyWorld) -> None:
    world.add_broker()
    world.create_topic("orders", 4)
    intruder = world.open_session()
    held = layout.consumer_owner_path("billing", "orders", 2)
    intruder.create(held, b"someone-else-0", ephemeral=True, make_parents=True)
    config = LegacyConsumerConfig(rebalance_backoff_ms=100, rebalance_max_retries=200, host="h")
    consumer = world.consumer({"orders": 1}, config=config, start=False)
    consumer.start(wait=False)

    def rolled_back() -> bool:
        return any(
            e.change is OwnershipChange.RELEASED and e.reason == "conflict-rollback"
            for e in world.history.events
        )

    wait_for(rolled_back, what="an attempt to meet the held owner node and roll back")
    assert consumer.owned() == {}  # never fetches while a claim is incomplete
    intruder.close()
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions))

    record = consumer.rebalances.records[0]
    assert record.reasons == ("start",)
    assert record.succeeded
    assert record.attempts >= 2
    assert record.conflicts >= 1
    assert record.duration_s >= (record.attempts - 1) * config.rebalance_backoff_s
    assert consumer.rebalances.ops.writes > 0
    assert world.history.violations() == []


def test_exhausted_retries_raise_naming_group_and_consumer(world: LegacyWorld) -> None:
    world.add_broker()
    world.create_topic("orders", 2)
    intruder = world.open_session()
    intruder.create(
        layout.consumer_owner_path("billing", "orders", 0),
        b"x-0",
        ephemeral=True,
        make_parents=True,
    )
    config = LegacyConsumerConfig(rebalance_backoff_ms=10, rebalance_max_retries=3, host="h")
    consumer = world.consumer({"orders": 1}, config=config, start=False)

    with pytest.raises(LegacyRebalanceFailedError) as info:
        consumer.start()

    message = str(info.value)
    assert "'billing'" in message
    assert consumer.consumer_id in message
    assert "after 3 attempts" in message
    assert "orders-0" in message
    assert info.value.attempts == 3
    assert consumer.consumer_id not in world.view().registrations  # closed on failure
    assert world.view().owners == {TopicPartition("orders", 0): "x-0"}


def test_no_live_broker_defers_until_one_registers(world: LegacyWorld) -> None:
    world.create_topic("orders", 3)
    consumer = world.consumer({"orders": 1})
    record = consumer.rebalances.last
    assert record is not None
    assert record.deferred
    assert consumer.owned() == {}

    world.add_broker(1)
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "a broker appeared")


def test_added_partitions_trigger_a_rebalance(world: LegacyWorld) -> None:
    world.add_broker()
    world.create_topic("orders", 2)
    world.consumer({"orders": 1})
    world.consumer({"orders": 1})
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions))

    world.create_topic("orders", 6)  # rewrites /brokers/topics/orders with more partitions
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "six partitions")
    assert world.history.violations() == []
