"""The partitioner suite: what every producer partitioner promises, checked on random clusters and
record streams driven through Kafka's call sequence (``partition``, ``on_new_batch`` and a second
``partition`` when a batch opens, ``on_append``, ``update_load``).

* an explicit ``record.partition`` always wins; out of range it is an error naming the topic and
  the partition count; an unknown topic is an error naming the topic;
* every chosen partition is in range, and a record without key goes to an available partition
  when the topic has one;
* keyed records follow Kafka's rule ``toPositive(murmur2(key)) % partitions`` whatever came before
  (``keys_hash = False`` on the partitioner opts out: keys do not place its records);
* with ``ignore_keys`` the choice does not depend on the key;
* the same seed and the same calls give the same choices; the factory builds a fresh partitioner
  each call.

A partitioner that never chooses (``chooses_partitions = False``: records must name their
partition) must refuse records without one with a ``PartitioningError`` naming the topic.

::

    from coordkit.testing.partitioners import PartitionerTests

    class TestMyPartitioner(PartitionerTests):
        @pytest.fixture
        def partitioner_factory(self):
            return my_factory          # factory(options) -> a fresh partitioner
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordkit.kafka.model import NO_LEADER
from coordkit.strategies.partitioning import (
    ClusterMetadata,
    InvalidPartitionError,
    Partitioner,
    PartitionerOptions,
    PartitioningError,
    PartitionLoad,
    ProducerRecord,
    UnknownTopicMetadataError,
    partition_for_key,
)
from coordkit.testing.backends import NOT_APPLICABLE
from coordkit.testing.properties import kit_settings

__all__ = ["PartitionerTests", "Step", "clusters", "kit_settings", "steps"]

TOPIC = "t"


@st.composite
def clusters(draw: st.DrawFn) -> ClusterMetadata:
    """One topic of 1..40 partitions, some leaderless, with a set of reachable brokers."""
    count = draw(st.integers(1, 40))
    leaders = draw(st.lists(st.sampled_from([NO_LEADER, 0, 1, 2]), min_size=count, max_size=count))
    reachable = draw(st.none() | st.sets(st.integers(0, 2)))
    return ClusterMetadata({TOPIC: leaders}, reachable=reachable)


@attrs.frozen
class Step:
    """One record sent, and what the producer reports back."""

    record: ProducerRecord
    #: The record would open a new batch: the producer calls ``on_new_batch`` and asks again.
    new_batch: bool
    #: The partition's last batch is complete after the append.
    batch_full: bool
    #: Queue sizes reported before the record (``None``: no load information this step).
    load: tuple[int, ...] | None


def steps(*, keyed: bool | None = None, explicit: bool = False) -> st.SearchStrategy[list[Step]]:
    """Streams of records: ``keyed`` True/False forces keys on/off (``None``: mixed);
    ``explicit`` gives every record a partition in 0..39."""
    keys: st.SearchStrategy[bytes | None] = st.one_of(st.none(), st.binary(max_size=16))
    if keyed is not None:
        keys = st.binary(min_size=1, max_size=16) if keyed else st.none()
    partitions: st.SearchStrategy[int | None] = st.integers(0, 39) if explicit else st.none()
    records = st.builds(
        ProducerRecord,
        topic=st.just(TOPIC),
        value=st.none() | st.binary(max_size=300),
        key=keys,
        partition=partitions,
    )
    loads = st.none() | st.lists(st.integers(0, 9), min_size=1, max_size=40).map(tuple)
    return st.lists(
        st.builds(Step, records, st.booleans(), st.booleans(), loads), min_size=1, max_size=40
    )


def drive(partitioner: Partitioner, cluster: ClusterMetadata, stream: Sequence[Step]) -> list[int]:
    """Send ``stream`` through Kafka's call sequence; the partition chosen for each record."""
    count = cluster.partition_count(TOPIC)
    # A producer reports queues of partitions with a reachable leader only.
    available = cluster.available_partitions(TOPIC)
    chosen = []
    for step in stream:
        if step.load is not None:
            sizes = step.load[: len(available)]
            partitioner.update_load(TOPIC, PartitionLoad(available[: len(sizes)], sizes, count))
        partition = partitioner.partition(step.record, cluster)
        if step.new_batch:
            partitioner.on_new_batch(TOPIC, cluster, partition)
            partition = partitioner.partition(step.record, cluster)
        partitioner.on_append(step.record, partition, cluster, step.batch_full)
        chosen.append(partition)
    return chosen


@pytest.mark.coordkit_kit("partitioner")
class PartitionerTests:
    """Subclass and override ``coordkit_partitioner`` (or ``partitioner_factory`` here), or run
    ``pytest -p coordkit.testing --coordkit-partitioner NAME``."""

    @pytest.fixture
    def partitioner_factory(self, coordkit_partitioner: Any) -> Any:
        return coordkit_partitioner

    @pytest.fixture
    def make(self, partitioner_factory: Any) -> Callable[..., Partitioner]:
        def build(**options: Any) -> Partitioner:
            partitioner: Partitioner = partitioner_factory(PartitionerOptions(**options))
            return partitioner

        return build

    @staticmethod
    def _declares(partitioner: Partitioner, trait: str) -> bool:
        return bool(getattr(partitioner, trait, True))

    def _require(self, partitioner: Partitioner, trait: str) -> None:
        if not self._declares(partitioner, trait):
            pytest.skip(f"{NOT_APPLICABLE}: {partitioner.name} declares no {trait}")

    def test_factory_builds_a_fresh_named_partitioner_each_call(
        self, partitioner_factory: Any
    ) -> None:
        assert isinstance(partitioner_factory.name, str)
        assert partitioner_factory.name
        assert isinstance(partitioner_factory.description, str)
        assert partitioner_factory.description
        first, second = partitioner_factory(PartitionerOptions()), partitioner_factory()
        assert first is not second, "the factory must build a fresh partitioner each call"
        assert isinstance(first, Partitioner)

    def test_explicit_partition_wins_and_is_checked(
        self,
        make: Callable[..., Partitioner],
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        @coordkit_hypothesis_settings
        @given(cluster=clusters(), stream=steps(explicit=True), seed=st.integers(0, 2**32))
        def check(cluster: ClusterMetadata, stream: list[Step], seed: int) -> None:
            partitioner = make(seed=seed)
            count = cluster.partition_count(TOPIC)
            for step in stream:
                wanted = step.record.partition
                assert wanted is not None
                if wanted < count:
                    got = partitioner.partition(step.record, cluster)
                    assert got == wanted, f"an explicit partition wins: asked {wanted}, got {got}"
                    partitioner.on_append(step.record, got, cluster, step.batch_full)
                    continue
                with pytest.raises(InvalidPartitionError) as info:
                    partitioner.partition(step.record, cluster)
                message = str(info.value)
                assert repr(TOPIC) in message or TOPIC in message.split(), message
                assert str(count) in message, f"the error names the partition count: {message}"

        check()

    def test_unknown_topic_is_an_error_naming_it(self, make: Callable[..., Partitioner]) -> None:
        meta = ClusterMetadata({TOPIC: [0, 1]})
        for record in (ProducerRecord("elsewhere"), ProducerRecord("elsewhere", key=b"k")):
            with pytest.raises(UnknownTopicMetadataError, match="'elsewhere'"):
                make().partition(record, meta)

    def test_chosen_partitions_are_in_range_and_available(
        self,
        make: Callable[..., Partitioner],
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        self._require(make(), "chooses_partitions")

        @coordkit_hypothesis_settings
        @given(cluster=clusters(), stream=steps(), seed=st.integers(0, 2**32))
        def check(cluster: ClusterMetadata, stream: list[Step], seed: int) -> None:
            count = cluster.partition_count(TOPIC)
            available = set(cluster.available_partitions(TOPIC))
            partitioner = make(seed=seed, batch_size=256)
            for step, partition in zip(stream, drive(partitioner, cluster, stream), strict=True):
                assert 0 <= partition < count, f"in range: {partition} of {count} partitions"
                if step.record.key is None and available:
                    assert partition in available, (
                        f"a record without key goes to an available partition: {partition} has "
                        f"no reachable leader, {sorted(available)} do"
                    )

        check()

    def test_records_without_partition_are_refused_naming_the_topic(
        self, make: Callable[..., Partitioner]
    ) -> None:
        partitioner = make()
        if self._declares(partitioner, "chooses_partitions"):
            pytest.skip(f"{NOT_APPLICABLE}: {partitioner.name} chooses partitions")
        with pytest.raises(PartitioningError, match=repr(TOPIC)):
            partitioner.partition(ProducerRecord(TOPIC, key=b"k"), ClusterMetadata({TOPIC: [0]}))

    def test_keyed_records_follow_murmur2_whatever_came_before(
        self,
        make: Callable[..., Partitioner],
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        self._require(make(), "keys_hash")

        @coordkit_hypothesis_settings
        @given(cluster=clusters(), stream=steps(), seed=st.integers(0, 2**32))
        def check(cluster: ClusterMetadata, stream: list[Step], seed: int) -> None:
            count = cluster.partition_count(TOPIC)
            chosen = drive(make(seed=seed, batch_size=256), cluster, stream)
            for step, partition in zip(stream, chosen, strict=True):
                key = step.record.key
                if key is not None:
                    expected = partition_for_key(key, count)
                    assert partition == expected, (
                        f"key routing: key {key!r} went to {partition}, Kafka's murmur2 rule "
                        f"says {expected} of {count}"
                    )

        check()

    def test_with_ignore_keys_the_key_does_not_matter(
        self,
        make: Callable[..., Partitioner],
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        self._require(make(), "chooses_partitions")

        @coordkit_hypothesis_settings
        @given(cluster=clusters(), stream=steps(keyed=True), seed=st.integers(0, 2**32))
        def check(cluster: ClusterMetadata, stream: list[Step], seed: int) -> None:
            keyless = [attrs.evolve(s, record=attrs.evolve(s.record, key=None)) for s in stream]
            with_keys = drive(make(seed=seed, ignore_keys=True), cluster, stream)
            without = drive(make(seed=seed, ignore_keys=True), cluster, keyless)
            assert with_keys == without, (
                f"ignore_keys: keyed records went to {with_keys}, the same records without keys "
                f"to {without}"
            )

        check()

    def test_same_seed_same_choices(
        self,
        make: Callable[..., Partitioner],
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        self._require(make(), "chooses_partitions")

        @coordkit_hypothesis_settings
        @given(cluster=clusters(), stream=steps(), seed=st.integers(0, 2**32))
        def check(cluster: ClusterMetadata, stream: list[Step], seed: int) -> None:
            first = drive(make(seed=seed), cluster, stream)
            again = drive(make(seed=seed), cluster, stream)
            assert again == first, f"deterministic with a seed: {first} then {again}"

        check()
