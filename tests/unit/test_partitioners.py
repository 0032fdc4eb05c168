"""Producer partitioners: Kafka's vectors, round-robin, sticky (KIP-480) and uniform-sticky (KIP-794)
behaviour. The properties every partitioner has (range, explicit partitions, keyed records, seeds)
are the conformance kit's: tests/unit/test_kit_partitioners.py."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordkit.errors import UnknownNameError
from coordkit.kafka.model import NO_LEADER
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.partitioning import (
    ClusterMetadata,
    InvalidPartitionError,
    Partitioner,
    PartitionerOptions,
    PartitioningError,
    PartitionLoad,
    ProducerRecord,
    murmur2,
    partition_for_key,
    record_size,
    to_positive,
)
from coordkit_partitioners.uniform_sticky import load_stats
from harness.vectors import kafka_vectors

ALL = ("explicit", "murmur2", "round-robin", "sticky", "uniform-sticky")
KEYED = ("murmur2", "sticky", "uniform-sticky")  # keyed records follow murmur2

INT32 = (-(2**31), 2**31 - 1)


def make(name: str, **options: Any) -> Partitioner:
    partitioner: Partitioner = get_plugin_manager().partitioner(name)(PartitionerOptions(**options))
    return partitioner


def cluster(partitions: int = 6, down: tuple[int, ...] = (), topic: str = "t") -> ClusterMetadata:
    leaders = [NO_LEADER if p in down else p % 3 for p in range(partitions)]
    return ClusterMetadata({topic: leaders})


def null(topic: str = "t", size: int = 0) -> ProducerRecord:
    return ProducerRecord(topic, b"x" * size)


# -- Kafka's hash ------------------------------------------------------------------------------


def test_murmur2_matches_every_vector() -> None:
    vectors = kafka_vectors()["murmur2_utf8_bytes"]
    assert vectors
    for text, expected in vectors.items():
        assert murmur2(text.encode()) == expected, text


def test_partition_for_key_matches_every_vector() -> None:
    cases = kafka_vectors()["partition_for_key"]
    assert cases
    for case in cases:
        key, count = case["key"].encode(), case["num_partitions"]
        assert partition_for_key(key, count) == case["partition"]
        for name in KEYED:
            got = make(name, seed=1).partition(ProducerRecord("t", key=key), cluster(count))
            assert got == case["partition"], name


@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_int32(data: bytes) -> None:
    value = murmur2(data)
    assert INT32[0] <= value <= INT32[1]
    assert 0 <= to_positive(value) <= INT32[1]


def test_to_positive_clears_the_sign_bit_rather_than_negating() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_record_size_follows_kafka_varints() -> None:
    # attributes, ts delta, offset delta, key length -1, value length 1 + 1 byte, headers: 7
    # bytes of body, plus one byte of length.
    assert record_size(None, b"v") == 8
    assert record_size(b"k" * 64, None) == record_size(b"k" * 63, None) + 2  # varint grows


# -- the explicit rule and the registry --------------------------------------------------------


def test_every_partitioner_is_registered_and_fresh_per_call() -> None:
    manager = get_plugin_manager()
    assert set(ALL) <= set(manager.partitioners.names())
    factory = manager.partitioner("sticky")
    assert factory.description
    assert factory() is not factory()
    with pytest.raises(UnknownNameError, match="no-such"):
        manager.partitioner("no-such")


def test_explicit_partitioner_needs_a_partition() -> None:
    with pytest.raises(PartitioningError, match=r"'explicit'.*'t'.*0\.\.5"):
        make("explicit").partition(ProducerRecord("t", key=b"k"), cluster(6))


def test_bad_records_and_loads_are_clear_errors() -> None:
    with pytest.raises(InvalidPartitionError, match="-1"):
        ProducerRecord("t", partition=-1)
    with pytest.raises(PartitioningError, match="topic"):
        ProducerRecord("bad/topic")
    with pytest.raises(PartitioningError, match="2 queue sizes for 1 partitions"):
        PartitionLoad([0], [1, 2], 2)
    assert ProducerRecord("t", key="ключ").key == "ключ".encode()


# -- round-robin and murmur2 (range, explicit partitions and keyed records: the kit, test_kit_partitioners.py)


def test_round_robin_cycles_available_partitions_and_ignores_keys() -> None:
    partitioner = make("round-robin")
    meta = cluster(6, down=(1, 4))
    got = [partitioner.partition(ProducerRecord("t", key=b"same"), meta) for _ in range(8)]
    assert got == [0, 2, 3, 5, 0, 2, 3, 5]
    # no partition available: all partitions, the same counter
    assert [partitioner.partition(null(), cluster(3, down=(0, 1, 2))) for _ in range(3)] == [
        2,
        0,
        1,
    ]
    # a second topic has its own counter from 0
    assert partitioner.partition(null("u"), cluster(6, topic="u")) == 0


def test_round_robin_asked_again_for_a_new_batch_keeps_its_answer() -> None:
    partitioner = make("round-robin")
    meta = cluster(4)
    first = partitioner.partition(null(), meta)
    partitioner.on_new_batch("t", meta, first)
    assert partitioner.partition(null(), meta) == first
    assert partitioner.partition(null(), meta) == first + 1


def test_murmur2_null_keys_rotate_over_available_partitions() -> None:
    partitioner = make("murmur2", seed=9)
    meta = cluster(5, down=(3,))
    got = [partitioner.partition(null(), meta) for _ in range(8)]
    assert set(got) == {0, 1, 2, 4}
    assert got[:4] == got[4:]


# -- sticky (KIP-480) --------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    partitions=st.integers(1, 12),
    down=st.sets(st.integers(0, 11)),
    ops=st.lists(st.one_of(st.just(-1), st.integers(0, 11)), max_size=60),
    seed=st.integers(0, 2**32),
)
def test_sticky_switches_only_on_a_new_batch_of_the_sticky_partition(
    partitions: int, down: set[int], ops: list[int], seed: int
) -> None:
    """``-1``: a null-key record; ``n``: a new batch was needed on partition ``n``."""
    partitioner = make("sticky", seed=seed)
    meta = cluster(partitions, down=tuple(down))
    available = meta.available_partitions("t")
    current = partitioner.partition(null(), meta)
    if available:
        assert current in available
    for op in ops:
        if op < 0:
            assert partitioner.partition(null(), meta) == current
            continue
        partitioner.on_new_batch("t", meta, op)
        chosen = partitioner.partition(null(), meta)
        if op != current:
            assert chosen == current
        elif len(available) > 1:
            assert chosen != current
            assert chosen in available
        elif len(available) == 1:
            assert chosen == available[0]
        current = chosen


def test_sticky_choices_repeat_with_the_seed() -> None:
    def run(seed: int) -> list[int]:
        partitioner = make("sticky", seed=seed)
        meta = cluster(12)
        out = []
        for _ in range(30):
            p = partitioner.partition(null(), meta)
            out.append(p)
            partitioner.on_new_batch("t", meta, p)
        return out

    assert run(5) == run(5)
    assert run(5) != run(6)


# -- uniform sticky (KIP-794) ------------------------------------------------------------------


def _fill(partitioner: Partitioner, meta: ClusterMetadata, size: int, full: bool) -> list[int]:
    """Send null-key records of ``size`` bytes; returns the partition of each."""
    record = null(size=size)
    out = []
    for _ in range(40):
        p = partitioner.partition(record, meta)
        out.append(p)
        partitioner.on_append(record, p, meta, full)
    return out


def test_uniform_sticky_switches_after_batch_size_bytes() -> None:
    record_bytes = null(size=91).size
    assert record_bytes == 100
    partitioner = make("uniform-sticky", seed=1, batch_size=1000)
    runs = [len(run) for run in _runs(_fill(partitioner, cluster(100), 91, full=True))]
    # 10 x 100 bytes reach batch.size; a new draw may land on the same partition again.
    assert len(runs) > 1
    assert all(n % 10 == 0 for n in runs[:-1])


def test_uniform_sticky_waits_for_a_batch_boundary_up_to_twice_the_size() -> None:
    partitioner = make("uniform-sticky", seed=1, batch_size=1000)
    runs = [len(run) for run in _runs(_fill(partitioner, cluster(100), 91, full=False))]
    assert len(runs) > 1
    assert all(n % 20 == 0 for n in runs[:-1])


def test_uniform_sticky_keyed_and_explicit_records_do_not_count() -> None:
    partitioner = make("uniform-sticky", seed=1, batch_size=100)
    meta = cluster(8)
    sticky = partitioner.partition(null(), meta)
    for record in (ProducerRecord("t", b"x" * 500, key=b"k"), ProducerRecord("t", partition=1)):
        partitioner.on_append(record, sticky, meta, True)
    assert partitioner.partition(null(), meta) == sticky


@settings(max_examples=25, deadline=None)
@given(partitions=st.integers(2, 16), seed=st.integers(0, 2**32))
def test_uniform_sticky_is_even_over_many_batches(partitions: int, seed: int) -> None:
    partitioner = make("uniform-sticky", seed=seed, batch_size=500)
    meta = cluster(partitions)
    record = null(size=91)
    counts: Counter[int] = Counter()
    batches = 400 * partitions
    for _ in range(batches * 5):
        p = partitioner.partition(record, meta)
        counts[p] += 1
        partitioner.on_append(record, p, meta, True)
    mean = batches * 5 / partitions
    assert set(counts) == set(range(partitions))
    # Binomial spread of 400 batches per partition: far inside +-35%.
    assert max(counts.values()) < 1.35 * mean
    assert min(counts.values()) > 0.65 * mean


def test_adaptive_weights_favour_short_queues_and_skip_left_out_partitions() -> None:
    partitioner = make("uniform-sticky", seed=4, batch_size=100)
    meta = cluster(4)
    # Partition 3 left out (its leader did not drain in time); 0 has a long queue.
    partitioner.update_load("t", PartitionLoad([0, 1, 2], [9, 0, 0], 4))
    chosen: Counter[int] = Counter()
    for _ in range(300):
        chosen.update(_fill(partitioner, meta, 91, full=True))
    assert 3 not in chosen
    # weights: 0 -> 1, 1 -> 10, 2 -> 10
    assert chosen[0] * 3 < chosen[1]
    assert chosen[0] * 3 < chosen[2]


def test_load_stats_rules() -> None:
    assert load_stats(PartitionLoad([0], [5], 1)) is None  # fewer than two partitions
    assert load_stats(PartitionLoad([0, 1, 2], [2, 2, 2], 3)) is None  # no information
    stats = load_stats(PartitionLoad([0, 1, 2], [2, 2, 2], 4))  # one left out
    assert stats is not None
    assert stats.cumulative == [1, 2, 3]
    stats = load_stats(PartitionLoad([0, 1, 2], [0, 3, 1], 3))
    assert stats is not None
    assert stats.cumulative == [4, 5, 8]


def test_adaptive_off_ignores_loads() -> None:
    partitioner = make("uniform-sticky", seed=4, batch_size=100, adaptive=False)
    partitioner.update_load("t", PartitionLoad([0], [0], 4))
    chosen: set[int] = set()
    for _ in range(50):
        chosen.update(_fill(partitioner, cluster(4), 91, full=True))
    assert chosen == {0, 1, 2, 3}


def test_ignore_keys_spreads_keyed_records() -> None:
    partitioner = make("uniform-sticky", seed=2, batch_size=100, ignore_keys=True)
    meta = cluster(6)
    got = set()
    for _ in range(60):
        record = ProducerRecord("t", b"x" * 91, key=b"one")
        p = partitioner.partition(record, meta)
        got.add(p)
        partitioner.on_append(record, p, meta, True)
    assert len(got) > 1


def _runs(values: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1].append(v)
        else:
            out.append([v])
    return out
