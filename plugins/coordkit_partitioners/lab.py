"""The lab's ``producer-skew`` workload and the producer metrics (kind ``producer``).

One producer (the engine's :class:`~coordkit.engine.producer.Producer`, with the partitioner under
test) sends ``phases × records`` records to ``topics`` topics of ``partitions`` partitions led by
``brokers`` brokers. Keys follow Zipf's law over ``keys`` distinct keys (exponent ``zipf``); a
share ``null_keys`` of the records has no key. No store is needed: the cluster is simulated in
process (leaders on the first live replica of Kafka-style round-robin replica lists), so the
workload runs anywhere, Spark executors included.

Events, one step per phase:

* broker ``0`` drains at most ``slow_capacity`` batches per tick (0: as fast as the others): the
  queues that build up there are what KIP-794's adaptive partitioning reacts to;
* at phase ``fail_at`` (0: never) the highest-numbered live broker fails: for the first half of
  that phase its partitions have no leader (election pending), then leadership moves to the next
  live replica (none with ``replication_factor`` 1). Records waiting for a leader are delivered
  once there is one.

Metrics (per phase): ``partition-skew`` (max / mean records placed per partition, over every
partition), ``broker-skew`` (max / mean records acknowledged per live broker),
``records-per-batch``, ``batches``, ``unavailable-sends`` (records placed on a partition without a
live leader) and ``failed-records``.

Strategies are the registered partitioners except ``explicit`` (these records name no partition).
Every strategy meets the same records and events: all are drawn from the seed.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from coordkit.engine.producer import (
    BrokerUnavailableError,
    FixedMetadata,
    LeaderNotAvailableError,
    NotLeaderError,
    Producer,
    ProducerConfig,
    UnknownTopicOrPartitionError,
    skew,
)
from coordkit.engine.states import TP
from coordkit.errors import CoordkitError
from coordkit.kafka.model import NO_LEADER
from coordkit.lab import FunctionMetric
from coordkit.strategies.partitioning import ProducerRecord
from coordkit.support.clock import ManualClock

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager

PRODUCER_KIND = "producer"
Param = int | float | bool | str

#: Simulated seconds per tick (the clock the producer's availability bookkeeping reads).
TICK_SECONDS = 0.005


class ProducerWorkloadError(CoordkitError, ValueError):
    """A producer-skew parameter is out of range."""


@attrs.frozen
class ProducerCase:
    """Everything a run draws from its seed: records as ``(topic index, key rank or -1)``."""

    brokers: int
    topics: int
    partitions: int
    replication_factor: int
    value_bytes: int
    batch_size: int
    tick_records: int
    slow_capacity: int
    fail_at: int
    phases: tuple[tuple[tuple[int, int], ...], ...]


@attrs.frozen
class ProducerStep:
    """One phase of records.

    :param per_partition: records placed per partition by the partitioner (every partition of
        every topic), whether delivered yet or not.
    :param per_broker: records acknowledged per live broker (a slow broker falls behind).
    """

    index: int
    event: str
    event_kind: str
    members: int  # live brokers
    partitions: int
    records: int
    per_partition: tuple[int, ...]
    per_broker: tuple[int, ...]
    batches: int
    unavailable_sends: int
    failed: int
    kind: str = PRODUCER_KIND


class SimulatedBrokers:
    """The brokers of the simulated cluster as a produce transport: logs as offsets only."""

    def __init__(self, leaders: dict[str, list[int]], alive: set[int]):
        self.leaders = leaders
        self.alive = alive
        self._offsets: dict[TP, int] = {}

    def reachable(self, broker_id: int) -> bool:
        return broker_id in self.alive

    def append(self, broker_id: int, tp: TP, records: int) -> int:
        if broker_id not in self.alive:
            raise BrokerUnavailableError(f"broker {broker_id} is down")
        leaders = self.leaders.get(tp[0])
        if leaders is None or not 0 <= tp[1] < len(leaders):
            raise UnknownTopicOrPartitionError(f"no partition {tp[0]}-{tp[1]}")
        leader = leaders[tp[1]]
        if leader == NO_LEADER:
            raise LeaderNotAvailableError(f"{tp[0]}-{tp[1]} has no leader")
        if leader != broker_id:
            raise NotLeaderError(f"broker {broker_id} does not lead {tp[0]}-{tp[1]}")
        offset = self._offsets.get(tp, 0)
        self._offsets[tp] = offset + records
        return offset


def _int(params: Mapping[str, Any], key: str, minimum: int) -> int:
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ProducerWorkloadError(
            f"workload 'producer-skew' parameter {key!r} must be an integer >= {minimum}, "
            f"got {value!r}"
        )
    return value


def _fraction(params: Mapping[str, Any], key: str) -> float:
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ProducerWorkloadError(
            f"workload 'producer-skew' parameter {key!r} must be a number in [0, 1], got {value!r}"
        )
    return float(value)


def topic_name(index: int) -> str:
    return f"produce-{index:03d}"


def key_of(rank: int) -> bytes:
    return f"key-{rank:06d}".encode()


class ProducerSkewWorkload:
    """Registered as workload ``producer-skew`` (kind ``producer``)."""

    name = "producer-skew"
    kind = PRODUCER_KIND
    strategy_kind = "partitioner"
    description = (
        "one producer, Zipf-keyed and null-key records over several topics, a slow broker and a "
        "broker failure part way; partition and broker skew per partitioner"
    )
    defaults: Mapping[str, Param] = {
        "brokers": 4,
        "topics": 2,
        "partitions": 12,
        "replication_factor": 2,
        "phases": 6,
        "records": 3000,
        "keys": 500,
        "zipf": 1.1,
        "null_keys": 0.5,
        "value_bytes": 100,
        "batch_size": 2048,
        "tick_records": 40,
        "slow_capacity": 1,
        "fail_at": 3,
    }
    presets: Mapping[str, Mapping[str, Any]] = {
        "groups": {"null_keys": (0.2, 0.8), "fail_at": (0, 3)},
    }

    def strategies(self, manager: PluginManager) -> list[str]:
        return [r.name for r in manager.partitioners if r.name != "explicit"]

    def feasible(self, params: Mapping[str, Any]) -> bool:
        return int(params["replication_factor"]) <= int(params["brokers"])

    def cost(self, params: Mapping[str, Any]) -> float:
        return float(params["phases"]) * float(params["records"]) / 5000

    def generate(self, params: Mapping[str, Any], seed: int) -> ProducerCase:
        brokers = _int(params, "brokers", 1)
        factor = _int(params, "replication_factor", 1)
        if factor > brokers:
            raise ProducerWorkloadError(
                f"workload 'producer-skew': replication_factor {factor} exceeds brokers {brokers}"
            )
        topics = _int(params, "topics", 1)
        phases = _int(params, "phases", 1)
        records = _int(params, "records", 1)
        keys = _int(params, "keys", 1)
        null_share = _fraction(params, "null_keys")
        exponent = params["zipf"]
        if isinstance(exponent, bool) or not isinstance(exponent, int | float) or exponent < 0:
            raise ProducerWorkloadError(
                f"workload 'producer-skew' parameter 'zipf' must be a number >= 0, got {exponent!r}"
            )
        rng = random.Random(seed)
        ranks = range(keys)
        cumulative = list(itertools.accumulate(1.0 / (k + 1) ** float(exponent) for k in ranks))
        drawn = []
        for _ in range(phases):
            topic_picks = [rng.randrange(topics) for _ in range(records)]
            key_picks = rng.choices(ranks, cum_weights=cumulative, k=records)
            nulls = [rng.random() < null_share for _ in range(records)]
            drawn.append(
                tuple(
                    (t, -1 if null else k)
                    for t, k, null in zip(topic_picks, key_picks, nulls, strict=True)
                )
            )
        return ProducerCase(
            brokers=brokers,
            topics=topics,
            partitions=_int(params, "partitions", 1),
            replication_factor=factor,
            value_bytes=_int(params, "value_bytes", 0),
            batch_size=_int(params, "batch_size", 1),
            tick_records=_int(params, "tick_records", 1),
            slow_capacity=_int(params, "slow_capacity", 0),
            fail_at=_int(params, "fail_at", 0),
            phases=tuple(drawn),
        )

    def simulate(
        self,
        params: Mapping[str, Any],
        seed: int,
        strategy: str,
        manager: PluginManager | None = None,
    ) -> Iterator[ProducerStep]:
        case = self.generate({**self.defaults, **params}, seed)
        return _simulate(case, strategy, seed, manager)


def _replicas(case: ProducerCase, topic: int, partition: int) -> list[int]:
    first = (topic + partition) % case.brokers
    return [(first + i) % case.brokers for i in range(case.replication_factor)]


def _elect(case: ProducerCase, alive: set[int]) -> dict[str, list[int]]:
    return {
        topic_name(t): [
            next((r for r in _replicas(case, t, p) if r in alive), NO_LEADER)
            for p in range(case.partitions)
        ]
        for t in range(case.topics)
    }


def _simulate(
    case: ProducerCase, strategy: str, seed: int, manager: PluginManager | None
) -> Iterator[ProducerStep]:
    alive = set(range(case.brokers))
    leaders = _elect(case, alive)
    brokers = SimulatedBrokers(leaders, alive)
    metadata = FixedMetadata(leaders)
    clock = ManualClock()
    config = ProducerConfig(
        partitioner=strategy,
        batch_size=case.batch_size,
        retries=1 << 30,  # records wait for a leader, as with Kafka's long delivery timeout
        retry_backoff=0.0,
        linger=TICK_SECONDS,
        drain_on_send=False,
        seed=seed,
    )
    # Without a manager, the producer takes the registered partitioner its config names.
    partitioner = manager.partitioner(strategy) if manager is not None else None
    producer = Producer(metadata, brokers, config, clock=clock, partitioner=partitioner)
    capacity = {0: case.slow_capacity} if case.slow_capacity else None
    value = b"v" * case.value_bytes
    topics = [topic_name(t) for t in range(case.topics)]
    all_tps = [(t, p) for t in topics for p in range(case.partitions)]

    def set_leaders(new: dict[str, list[int]]) -> None:
        leaders.clear()
        leaders.update(new)
        metadata.set(new)

    try:
        for index, records in enumerate(case.phases):
            before = producer.totals()
            event, kind = f"phase {index}", "steady"
            failed_broker: int | None = None
            if case.fail_at and index == case.fail_at and len(alive) > 1:
                failed_broker = max(alive)  # never the slow broker 0
                alive.discard(failed_broker)
                # The election is pending: its partitions have no leader for now.
                set_leaders(
                    {
                        t: [NO_LEADER if b == failed_broker else b for b in ls]
                        for t, ls in leaders.items()
                    }
                )
                event, kind = f"phase {index}: broker {failed_broker} fails", "broker-failure"
            for n, (topic, rank) in enumerate(records, start=1):
                key = None if rank < 0 else key_of(rank)
                producer.send(ProducerRecord(topics[topic], value, key=key))
                if failed_broker is not None and n == len(records) // 2:
                    set_leaders(_elect(case, alive))  # the controller has re-elected
                if n % case.tick_records == 0:
                    clock.advance(TICK_SECONDS)
                    producer.poll(capacity)
            if failed_broker is not None and len(records) < 2:
                set_leaders(_elect(case, alive))
            clock.advance(TICK_SECONDS)
            producer.poll(capacity)
            after = producer.totals()
            yield _step(index, event, kind, before, after, all_tps, sorted(alive), len(records))
    finally:
        producer.close(flush=False)


def _step(
    index: int,
    event: str,
    kind: str,
    before: Any,
    after: Any,
    all_tps: list[TP],
    alive: list[int],
    records: int,
) -> ProducerStep:
    was = dict(before.placed)
    now = dict(after.placed)
    was_broker = dict(before.per_broker)
    now_broker = dict(after.per_broker)
    return ProducerStep(
        index=index,
        event=event,
        event_kind=kind,
        members=len(alive),
        partitions=len(all_tps),
        records=records,
        per_partition=tuple(now.get(tp, 0) - was.get(tp, 0) for tp in all_tps),
        per_broker=tuple(now_broker.get(b, 0) - was_broker.get(b, 0) for b in alive),
        batches=after.batches - before.batches,
        unavailable_sends=after.unavailable_sends - before.unavailable_sends,
        failed=after.records_failed - before.records_failed,
    )


# -- metrics -------------------------------------------------------------------------------------


ProducerMetric = functools.partial(FunctionMetric, kinds=(PRODUCER_KIND,), step_type=ProducerStep)


def _partition_skew(step: ProducerStep) -> float | None:
    return skew(step.per_partition) if sum(step.per_partition) else None


def _broker_skew(step: ProducerStep) -> float | None:
    return skew(step.per_broker) if sum(step.per_broker) else None


def _per_batch(step: ProducerStep) -> float | None:
    return sum(step.per_broker) / step.batches if step.batches else None


PRODUCER_METRICS = (
    ProducerMetric(
        "partition-skew",
        "most records on one partition over the mean per partition, in the phase",
        "max/mean",
        "lower",
        _partition_skew,
        headline="Which partitioner spreads records most evenly over partitions?",
    ),
    ProducerMetric(
        "broker-skew",
        "most records on one live broker over the mean per live broker, in the phase",
        "max/mean",
        "lower",
        _broker_skew,
    ),
    ProducerMetric(
        "records-per-batch",
        "records per delivered batch in the phase (bigger batches: fewer requests)",
        "records",
        "higher",
        _per_batch,
        headline="Which partitioner batches best?",
    ),
    ProducerMetric(
        "batches",
        "batches delivered in the phase",
        "batches",
        "lower",
        lambda step: float(step.batches),
    ),
    ProducerMetric(
        "unavailable-sends",
        "records placed on a partition without a live leader",
        "records",
        "lower",
        lambda step: float(step.unavailable_sends),
        headline="Which partitioner avoids unavailable partitions?",
    ),
    ProducerMetric(
        "failed-records",
        "records whose send failed",
        "records",
        "lower",
        lambda step: float(step.failed),
    ),
)

PRODUCER_SKEW = ProducerSkewWorkload()
