"""A cluster runs with the strategies it is handed (``Cluster(strategies=...)``), resolved once:
a test or an application can give it strategy objects of its own, and a name no plugin
registered is refused when the strategies are resolved, before any broker starts."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import pytest

from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.strategies import Strategies
from coordkit.errors import UnknownNameError
from coordkit.strategies.placement import BrokerMetadata, ClusterLayout
from harness.waiting import wait_for


class LastBrokersFirst:
    """Every replica list starts at the highest broker id: nothing Kafka's placements do."""

    name = "last-brokers-first"
    description = "replicas from the highest broker id down"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def place(
        self,
        brokers: Sequence[BrokerMetadata],
        partitions: int,
        replication_factor: int,
        *,
        existing: Mapping[int, Sequence[int]] | None = None,
        rng: random.Random | None = None,
        topic: str = "",
    ) -> dict[int, list[int]]:
        self.calls.append((topic, partitions, replication_factor))
        ids = sorted((b.id for b in brokers), reverse=True)
        first = len(existing or {})
        return {
            first + p: [ids[(p + r) % len(ids)] for r in range(replication_factor)]
            for p in range(partitions)
        }

    def rebalance(self, layout: ClusterLayout) -> dict[tuple[str, int], tuple[int, ...]]:
        return {}


class RecordingEvents:
    """Plugin events, kept."""

    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.controllers: list[int | None] = []
        self.leaders: list[tuple[str, int, int]] = []

    def wants_leader_elections(self) -> bool:
        return True

    def notify_broker_registered(self, broker_id: int, host: str, port: int) -> None:
        self.brokers.append(broker_id)

    def notify_controller_changed(self, broker_id: int | None, epoch: int) -> None:
        self.controllers.append(broker_id)

    def notify_leader_elected(self, topic: str, partition: int, leader: int, *rest: Any) -> None:
        self.leaders.append((topic, partition, leader))

    def notify_rebalance_completed(self, *args: Any) -> None:
        pass


def test_a_cluster_places_topics_with_the_placement_it_is_handed(
    make_cluster: Callable[..., Cluster],
) -> None:
    config = EngineConfig(auto_leader_rebalance=False)
    placement = LastBrokersFirst()
    strategies = attrs.evolve(Strategies.from_plugins(config), placement=placement)
    cluster = make_cluster(3, config=config, strategies=strategies)
    cluster.create_topic("handed", 3, 2)
    assert ("handed", 3, 2) in placement.calls
    assignment = cluster.admin.assignment("handed")
    assert {p: list(r) for p, r in assignment.partitions.items()} == {
        0: [2, 1], 1: [1, 0], 2: [0, 2]
    }  # fmt: skip


def test_a_cluster_tells_the_events_of_its_strategies(
    make_cluster: Callable[..., Cluster],
) -> None:
    config = EngineConfig(auto_leader_rebalance=False)
    events = RecordingEvents()
    strategies = attrs.evolve(Strategies.from_plugins(config), events=events)
    cluster = make_cluster(2, config=config, strategies=strategies)
    cluster.create_topic("told", 2, 2)
    wait_for(lambda: {(t, p) for t, p, _ in events.leaders} >= {("told", 0), ("told", 1)},
             what="both partitions' leader elections told")  # fmt: skip
    assert sorted(set(events.brokers)) == [0, 1]
    assert any(b is not None for b in events.controllers)


@pytest.mark.parametrize(
    ("setting", "kind"),
    [
        ({"preferred_election": "nope"}, "partition-leader election strategy"),
        ({"controller_election": "nope"}, "controller election strategy"),
        ({"group_leader": "nope"}, "group-leader election strategy"),
        ({"placement": "nope"}, "placement strategy"),
        ({"offset_storage": "nope"}, "offset storage"),
    ],
)
def test_an_unknown_strategy_name_is_refused_when_resolved(
    setting: dict[str, str], kind: str
) -> None:
    with pytest.raises(UnknownNameError, match=rf"unknown {kind} 'nope'; available: \w"):
        Strategies.from_plugins(EngineConfig(**setting))


def test_a_consumer_with_an_assignor_nobody_registered_is_refused_at_start(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(1)
    with pytest.raises(UnknownNameError, match=r"unknown assignor 'nope'; available: .*range"):
        cluster.start_consumer("g", ["t"], assignors=["nope"])
    assert cluster.consumers == []
