"""The legacy consumer's offsets (through the ``zookeeper`` storage) and session handling."""

from __future__ import annotations

from coordkit.engine.legacy import LegacyConsumerConfig
from coordkit.kafka.model import TopicPartition
from engine.legacy.world import LegacyWorld, kafka_range
from harness.backends import Backend
from harness.waiting import wait_for


def test_offsets_resume_after_close_and_after_crash(world: LegacyWorld) -> None:
    world.add_broker()
    world.create_topic("orders", 3)
    first = world.consumer({"orders": 1})
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions))
    assert set(first.positions().values()) == {0}
    for p, count in enumerate((5, 0, 9)):
        first.consume(TopicPartition("orders", p), count)
    first.close()  # auto-commit on close
    assert world.view().offsets == {TopicPartition("orders", 0): 5, TopicPartition("orders", 2): 9}

    second = world.consumer({"orders": 1})
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "the second consumer")
    assert second.positions() == {
        TopicPartition("orders", 0): 5,
        TopicPartition("orders", 1): 0,
        TopicPartition("orders", 2): 9,
    }
    second.consume(TopicPartition("orders", 1), 4)
    assert second.commit_offsets() == 1
    second.consume(TopicPartition("orders", 1), 100)  # consumed, never committed
    second.crash()

    third = world.consumer({"orders": 1})
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "the third consumer")
    assert third.positions()[TopicPartition("orders", 1)] == 4


def test_offsets_are_committed_before_partitions_move(world: LegacyWorld) -> None:
    world.add_broker()
    world.create_topic("orders", 2)
    first = world.consumer({"orders": 1})
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions))
    consumed = {TopicPartition("orders", 0): 3, TopicPartition("orders", 1): 7}
    for tp, count in consumed.items():
        first.consume(tp, count)

    second = world.consumer({"orders": 1})
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "two consumers")
    assert len(second.owned()) == 1
    # Whichever partition moved, the first consumer committed it before releasing it.
    assert second.positions() == {tp: consumed[tp] for tp in second.owned()}
    assert first.positions() == {tp: consumed[tp] for tp in first.owned()}


def test_session_loss_reregisters_and_rebalances(world: LegacyWorld, backend: Backend) -> None:
    world.add_broker()
    world.create_topic("orders", 4)
    # The expired session's owner nodes go when the server reaps it, which a loaded machine may
    # delay: retry long enough that the new session's claims outlast the reaping.
    patient = LegacyConsumerConfig(rebalance_backoff_ms=50, rebalance_max_retries=600, host="h")
    lost = world.consumer({"orders": 1}, config=patient)
    other = world.consumer({"orders": 1}, config=patient)
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions))
    session = lost.store.session_id
    rebalances = lost.rebalances.count

    backend.expire(lost.store.inner)

    wait_for(
        lambda: lost.store.session_id != session and lost.rebalances.count > rebalances,
        what="a rebalance in the new session",
    )
    view = world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "after expiry")
    assert set(view.registrations) == {lost.consumer_id, other.consumer_id}
    stats = [world.admin.exists(f"/consumers/billing/owners/orders/{p}") for p in range(4)]
    owner_sessions = {stat.ephemeral_owner for stat in stats if stat is not None}
    assert owner_sessions == {lost.store.session_id, other.store.session_id}
