"""Properties every registered replica placement holds (issue 14), checked with hypothesis:
replication factor honoured, distinct brokers, distinct racks when racks allow (for strategies
that use racks), deterministic for a seed, and rebalance plans that only use listed brokers.
Strategy-specific bounds: ``balanced`` ends within one replica and one preferred leadership of
the mean; ``rendezvous`` moves about RF/N of the replicas when a broker joins."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.placement import BrokerMetadata, ClusterLayout, moved_replicas

NAMES = sorted(get_plugin_manager().placements.names())
#: Strategies that keep replicas on distinct racks while racks allow.
RACK_AWARE = {"kafka-rack-aware", "balanced", "rendezvous"}


def test_the_built_ins_are_registered() -> None:
    assert {"kafka", "kafka-rack-aware", "balanced", "rendezvous"} <= set(NAMES)
    for name in NAMES:
        strategy = get_plugin_manager().placement(name)
        assert strategy.name == name
        assert strategy.description


@st.composite
def clusters(draw: st.DrawFn, racked: bool | None = None) -> tuple[list[BrokerMetadata], int, int]:
    n = draw(st.integers(1, 9))
    ids = sorted(draw(st.sets(st.integers(0, 50), min_size=n, max_size=n)))
    with_racks = draw(st.booleans()) if racked is None else racked
    n_racks = draw(st.integers(1, 4))
    brokers = [
        BrokerMetadata(b, f"r{draw(st.integers(0, n_racks - 1))}" if with_racks else None)
        for b in ids
    ]
    factor = draw(st.integers(1, n))
    partitions = draw(st.integers(1, 40))
    return brokers, partitions, factor


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None)
@given(cluster=clusters(), seed=st.integers(0, 2**16), existing=st.integers(0, 5))
def test_place_honours_factor_brokers_racks_and_seed(
    name: str, cluster: tuple[list[BrokerMetadata], int, int], seed: int, existing: int
) -> None:
    brokers, partitions, factor = cluster
    strategy = get_plugin_manager().placement(name)
    ids = {b.id for b in brokers}
    rack = {b.id: b.rack for b in brokers}
    before = {p: [b.id for b in brokers[:factor]] for p in range(existing)}
    placed = strategy.place(
        brokers, partitions, factor, existing=before, rng=random.Random(seed), topic="t"
    )
    assert sorted(placed) == list(range(existing, existing + partitions))
    n_racks = len({r for r in rack.values() if r is not None})
    for replicas in placed.values():
        assert len(replicas) == factor
        assert len(set(replicas)) == factor
        assert set(replicas) <= ids
        if name in RACK_AWARE and n_racks:
            assert len({rack[r] for r in replicas}) == min(factor, n_racks)
    again = strategy.place(
        brokers, partitions, factor, existing=before, rng=random.Random(seed), topic="t"
    )
    assert again == placed


@pytest.mark.parametrize("name", ["kafka", "kafka-rack-aware", "balanced"])
@settings(max_examples=40, deadline=None)
@given(cluster=clusters(racked=False), seed=st.integers(0, 2**16))
def test_round_robin_placements_spread_leaders_within_one(
    name: str, cluster: tuple[list[BrokerMetadata], int, int], seed: int
) -> None:
    brokers, partitions, factor = cluster
    placed = (
        get_plugin_manager()
        .placement(name)
        .place(brokers, partitions, factor, rng=random.Random(seed))
    )
    leaders = Counter(r[0] for r in placed.values())
    counts = [leaders.get(b.id, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1


@st.composite
def layouts(draw: st.DrawFn) -> tuple[ClusterLayout, list[BrokerMetadata]]:
    """A cluster placed by Kafka, and the broker list after some joined and some left."""
    brokers, _, _ = draw(clusters())
    rng = random.Random(draw(st.integers(0, 1000)))
    kafka = get_plugin_manager().placement("kafka")
    assignment = {}
    for t in range(draw(st.integers(1, 4))):
        factor = draw(st.integers(1, len(brokers)))
        placed = kafka.place(brokers, draw(st.integers(1, 20)), factor, rng=rng)
        assignment[f"t{t}"] = {p: tuple(r) for p, r in placed.items()}
    joined = [
        BrokerMetadata(100 + i, brokers[i % len(brokers)].rack)
        for i in range(draw(st.integers(0, 3)))
    ]
    keep = max(1, len(brokers) - draw(st.integers(0, 2)))
    target = brokers[:keep] + joined
    factors = {len(r) for parts in assignment.values() for r in parts.values()}
    if max(factors) > len(target):
        target = brokers + joined
    sizes = {(t, p): float(draw(st.integers(1, 100))) for t in assignment for p in assignment[t]}
    return ClusterLayout(tuple(brokers), assignment, sizes), target


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None)
@given(case=layouts())
def test_rebalance_plans_use_only_listed_brokers_and_keep_the_factor(
    name: str, case: tuple[ClusterLayout, list[BrokerMetadata]]
) -> None:
    layout, target = case
    moved = ClusterLayout(tuple(target), layout.assignment, layout.sizes)
    plan = get_plugin_manager().placement(name).rebalance(moved)
    ids = {b.id for b in target}
    for (topic, partition), replicas in plan.items():
        assert len(replicas) == len(layout.assignment[topic][partition])
        assert len(set(replicas)) == len(replicas)
        assert set(replicas) <= ids
    # After the plan no replica is left on a broker that is gone.
    for topic, parts in layout.assignment.items():
        for partition, replicas in parts.items():
            final = plan.get((topic, partition), replicas)
            assert set(final) <= ids
    assert get_plugin_manager().placement(name).rebalance(moved) == plan  # deterministic


@settings(max_examples=60, deadline=None)
@given(case=layouts())
def test_balanced_ends_within_one_replica_and_one_leader_of_the_mean(
    case: tuple[ClusterLayout, list[BrokerMetadata]],
) -> None:
    layout, target = case
    if any(b.rack is not None for b in target):
        return  # rack constraints may make the bound unreachable; covered by the plan test
    moved = ClusterLayout(tuple(target), layout.assignment, layout.sizes)
    plan = get_plugin_manager().placement("balanced").rebalance(moved)
    final = {
        (t, p): plan.get((t, p), r)
        for t, parts in layout.assignment.items()
        for p, r in parts.items()
    }
    replicas = Counter(b for r in final.values() for b in r)
    counts = [replicas.get(b.id, 0) for b in target]
    assert max(counts) - min(counts) <= 1
    leaders = Counter(r[0] for r in final.values())
    lead = [leaders.get(b.id, 0) for b in target]
    assert max(lead) - min(lead) <= 1


def test_balanced_moves_fewer_replicas_than_kafka_when_a_broker_joins() -> None:
    brokers = [BrokerMetadata(b) for b in range(6)]
    kafka = get_plugin_manager().placement("kafka")
    rng = random.Random(5)
    assignment = {
        f"t{t}": {p: tuple(r) for p, r in kafka.place(brokers, 24, 3, rng=rng).items()}
        for t in range(5)
    }
    grown = ClusterLayout((*brokers, BrokerMetadata(6)), assignment)
    moved = {
        name: moved_replicas(grown, get_plugin_manager().placement(name).rebalance(grown))
        for name in ("kafka", "balanced", "rendezvous")
    }
    total = 5 * 24 * 3
    # The new broker's fair share is total / 7 replicas: balanced moves about that, Kafka's
    # --generate re-places everything.
    assert moved["balanced"] <= total // 7 + 1
    assert moved["kafka"] > 2 * moved["balanced"]


def test_rendezvous_moves_about_one_nth_when_a_broker_joins() -> None:
    brokers = [BrokerMetadata(b) for b in range(9)]
    rendezvous = get_plugin_manager().placement("rendezvous")
    assignment = {
        f"t{t}": {p: tuple(r) for p, r in rendezvous.place(brokers, 100, 3, topic=f"t{t}").items()}
        for t in range(10)
    }
    layout = ClusterLayout(tuple(brokers), assignment)
    assert rendezvous.rebalance(layout) == {}  # already where it hashes
    grown = ClusterLayout((*brokers, BrokerMetadata(9)), assignment)
    plan = rendezvous.rebalance(grown)
    moved = moved_replicas(grown, plan)
    total = 10 * 100 * 3
    # Every moved replica lands on the new broker; about total / 10 of them.
    assert all(set(r) - set(assignment[t][p]) <= {9} for (t, p), r in plan.items())
    assert total / 10 * 0.7 <= moved <= total / 10 * 1.3
