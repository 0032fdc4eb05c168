"""Rebalances on metadata and subscription changes (Kafka's ConsumerCoordinator): the group leader
rejoins when a subscribed topic gains partitions, is created or is deleted; a member rejoins when
``subscribe`` changes its topics. Invariants are checked at every stable point."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from coordkit.engine import Cluster
from coordkit.engine.groups import ConsumerError, GroupCoordinator
from coordkit.engine.groups.topic_metadata import MetadataSnapshot, TopicMetadataWatch
from coordkit.errors import StoreClosedError
from harness.waiting import wait_for

from .conftest import partitions_of, start, wait_stable

ORDERS = partitions_of("orders", 6)
ASSIGNORS = ["range", "cooperative-sticky"]


def wait_ready(cluster: Cluster, what: str) -> None:
    wait_for(lambda: cluster.settled() and not cluster.view().uninitialised, what=what)


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_added_partitions_are_assigned(
    group_cluster: Callable[..., Cluster], assignor: str
) -> None:
    cluster = group_cluster()
    consumers = [start(cluster, "g", ["orders"], assignors=(assignor,)) for _ in range(2)]
    before = wait_stable(cluster, "g", consumers, ORDERS)

    cluster.add_partitions("orders", 9)
    after = wait_stable(cluster, "g", consumers, partitions_of("orders", 9))
    assert after.generation > before.generation
    owned = [tp for c in consumers for tp in c.assignment() if tp.partition >= 6]
    assert sorted(owned) == partitions_of("orders", 9)[6:]  # each new one has exactly one owner


def test_a_topic_created_after_subscribing_gets_assigned(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster()
    consumers = [start(cluster, "g", ["orders", "later"]) for _ in range(2)]
    wait_stable(cluster, "g", consumers, ORDERS)  # "later" does not exist yet

    cluster.create_topic("later", 4, 2)
    wait_stable(cluster, "g", consumers, ORDERS + partitions_of("later", 4))


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_a_deleted_topic_is_given_up(group_cluster: Callable[..., Cluster], assignor: str) -> None:
    cluster = group_cluster()
    cluster.create_topic("doomed", 3, 2)
    wait_ready(cluster, "doomed to be ready")
    consumers = [start(cluster, "g", ["orders", "doomed"], assignors=(assignor,)) for _ in range(2)]
    wait_stable(cluster, "g", consumers, ORDERS + partitions_of("doomed", 3))

    cluster.delete_topic("doomed")
    wait_stable(cluster, "g", consumers, ORDERS)


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_subscribe_changes_rebalance_the_group(
    group_cluster: Callable[..., Cluster], assignor: str
) -> None:
    cluster = group_cluster()
    cluster.create_topic("extra", 3, 2)
    wait_ready(cluster, "extra to be ready")
    first, second = (start(cluster, "g", ["orders"], assignors=(assignor,)) for _ in range(2))
    wait_stable(cluster, "g", [first, second], ORDERS)
    extra = partitions_of("extra", 3)

    first.subscribe(["orders", "extra"])
    assert first.subscription() == ("orders", "extra")
    wait_stable(cluster, "g", [first, second], ORDERS + extra)
    assert set(extra) <= first.assignment()  # the only subscriber of "extra"

    first.subscribe(["extra"])  # gives up "orders": the other member takes it all
    wait_for(lambda: second.assignment() == set(ORDERS), what="orders to move to the other member")
    wait_stable(cluster, "g", [first, second], ORDERS + extra)
    assert first.assignment() == set(extra)

    with pytest.raises(ValueError, match="give at least one topic"):
        first.subscribe([])
    with pytest.raises(ValueError, match="'bad/name' is not a valid topic name"):
        first.subscribe(["orders", "bad/name"])
    first.close()
    with pytest.raises(ConsumerError, match="closed; it cannot subscribe"):
        first.subscribe(["orders"])


def test_periodic_refresh_catches_changes_when_watches_fail(
    group_cluster: Callable[..., Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[frozenset[str]] = []

    def unavailable(
        self: GroupCoordinator, topics: frozenset[str], on_change: object
    ) -> TopicMetadataWatch:
        attempts.append(frozenset(topics))
        raise StoreClosedError("watches unavailable in this test")

    monkeypatch.setattr(GroupCoordinator, "watch_topic_metadata", unavailable)
    cluster = group_cluster()
    consumers = [start(cluster, "g", ["orders"], metadata_max_age=0.2) for _ in range(2)]
    wait_stable(cluster, "g", consumers, ORDERS)

    cluster.add_partitions("orders", 8)
    wait_stable(cluster, "g", consumers, partitions_of("orders", 8))
    assert frozenset({"orders"}) in attempts  # the leader tried to watch, and fell back


def test_a_static_leader_back_without_rebalance_still_watches(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster()
    first = start(cluster, "g", ["orders"], group_instance_id="a", session_timeout=5.0)
    wait_stable(cluster, "g", [first], ORDERS)
    second = start(cluster, "g", ["orders"], group_instance_id="b", session_timeout=5.0)
    before = wait_stable(cluster, "g", [first, second], ORDERS)
    assert before.leader == first.member_id

    first.close()
    restarted = start(cluster, "g", ["orders"], group_instance_id="a", session_timeout=5.0)
    back = wait_stable(cluster, "g", [restarted, second], ORDERS)
    assert (back.generation, back.leader) == (before.generation, restarted.member_id)

    cluster.add_partitions("orders", 8)
    after = wait_stable(cluster, "g", [restarted, second], partitions_of("orders", 8))
    assert after.generation > back.generation


def test_snapshot_changes_name_each_topic() -> None:
    before = MetadataSnapshot(["a", "b", "c"], {"a": 3, "b": 2})
    now = MetadataSnapshot.of(["a", "b", "c"], {"a": 5, "c": 1, "other": 9})
    assert not before.matches(now)
    assert before.matches(MetadataSnapshot(["c", "b", "a"], {"b": 2, "a": 3}))
    assert before.changes(now) == [
        "a went from 3 to 5 partitions",
        "b was deleted",
        "c appeared with 1 partitions",
    ]
    with pytest.raises(ValueError, match="topic 'x' is not one of"):
        MetadataSnapshot(["a"], {"x": 1})
    with pytest.raises(ValueError, match="topic 'a' has count 0"):
        MetadataSnapshot(["a"], {"a": 0})
