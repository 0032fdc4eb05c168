"""The group (and transaction) coordinator strategies of coordkit_elections: ``kafka`` is Kafka's
formula, ``murmur2`` Kafka's key hash over the same modulo, ``rendezvous`` moves few ids when the
internal topic's partition count changes (the claims docs/serve.md and the lab make)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from coordkit.kafka.coordinators import coordinator_partition
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.partitioning import to_positive

VECTORS = json.loads((Path(__file__).parents[1] / "data" / "kafka-vectors.json").read_text())
IDS = [f"app-{n}" for n in range(3000)] + [f"orders-{n % 7}-txn-{n}" for n in range(3000)]


def _strategy(name: str):  # type: ignore[no-untyped-def]
    return get_plugin_manager().group_coordinator_selection(name)


def test_kafka_is_kafkas_partition_for() -> None:
    kafka = _strategy("kafka")
    for group_id in VECTORS["java_string_hashcode_and_coordinator_partition_50"]:
        assert kafka.partition_for(group_id, 50) == coordinator_partition(group_id, 50)


@pytest.mark.parametrize("count", [1, 6, 50, 61])
def test_murmur2_is_kafkas_key_hash_over_the_partitions(count: int) -> None:
    # Kafka's own Utils.murmur2 answers (UtilsTest), positive, modulo the count.
    murmur2 = _strategy("murmur2")
    for text, signed in VECTORS["murmur2_utf8_bytes"].items():
        assert murmur2.partition_for(text, count) == to_positive(signed) % count
    case = VECTORS["partition_for_key"][0]
    assert murmur2.partition_for(case["key"], case["num_partitions"]) == case["partition"]


def test_murmur2_hashes_utf8_not_utf16() -> None:
    # "é" is two UTF-8 bytes (0xc3 0xa9); the partitioner's rule on those bytes decides.
    from coordkit.strategies.partitioning import partition_for_key

    assert _strategy("murmur2").partition_for("café", 50) == partition_for_key("café".encode(), 50)


def test_rendezvous_growing_the_topic_moves_ids_only_onto_the_new_partitions() -> None:
    rendezvous = _strategy("rendezvous")
    before = {i: rendezvous.partition_for(i, 50) for i in IDS}
    after = {i: rendezvous.partition_for(i, 60) for i in IDS}
    moved = [i for i in IDS if before[i] != after[i]]
    assert all(after[i] >= 50 for i in moved), "an id moved between two old partitions"
    # Expected 10/60 of the ids; 6,000 ids keep the fraction within a few points of it.
    assert 0.13 < len(moved) / len(IDS) < 0.21


def test_rendezvous_shrinking_the_topic_moves_only_the_removed_partitions_ids() -> None:
    rendezvous = _strategy("rendezvous")
    for group_id in IDS[:2000]:
        before = rendezvous.partition_for(group_id, 60)
        after = rendezvous.partition_for(group_id, 50)
        assert before == after or before >= 50


@pytest.mark.parametrize("name", ["kafka", "murmur2"])
def test_modulo_rules_move_most_ids_when_the_topic_grows(name: str) -> None:
    strategy = _strategy(name)
    moved = sum(strategy.partition_for(i, 50) != strategy.partition_for(i, 60) for i in IDS)
    assert moved / len(IDS) > 0.7


@pytest.mark.parametrize("name", ["kafka", "murmur2", "rendezvous"])
def test_ids_spread_over_the_partitions(name: str) -> None:
    counts = Counter(_strategy(name).partition_for(i, 50) for i in IDS)
    assert len(counts) == 50
    assert max(counts.values()) / (len(IDS) / 50) < 1.5


def test_the_strategies_place_ids_differently() -> None:
    placements = {
        name: [_strategy(name).partition_for(i, 50) for i in IDS[:500]]
        for name in ("kafka", "murmur2", "rendezvous")
    }
    assert placements["kafka"] != placements["murmur2"] != placements["rendezvous"]
