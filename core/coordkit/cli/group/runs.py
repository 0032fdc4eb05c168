"""The consumers ``coordkit group run`` drives, behind one interface (:class:`GroupRun`): the
classic group protocol (:mod:`~coordkit.cli.group.classic`) or the legacy ZooKeeper consumer
(:mod:`~coordkit.cli.group.legacy`).

Consumers are numbered from 0 in the order they start (``leave:I`` names consumer ``I``); a
restarted consumer keeps its number. :meth:`GroupRun.observe` reads the group as it is and says
what, if anything, keeps it from being stable, so the command can wait for stability with a bounded
wait that names what did not happen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Generic, Protocol, TypeVar

from attrs import field, frozen, validators

from coordkit.cli.group.view import GroupSnapshot
from coordkit.engine import Cluster
from coordkit.engine.errors import EngineError
from coordkit.kafka.model import TopicPartition


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _partition_counts(value: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    counts = tuple(dict(value).items())
    for topic, count in counts:
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"topic {topic!r}: partition count must be >= 1, got {count!r}")
    return counts


@frozen
class GroupSettings:
    """How the consumers of a run are configured (times in seconds).

    :param partition_counts: topic name → partition count (the group subscribes to all of them).
    :param assignors: ``partition.assignment.strategy``, most preferred first (legacy: the first).
    :param static: classic: each consumer gets ``group.instance.id`` ``<group>-i<I>``; legacy: a
        fixed ``consumer.id`` ``i<I>``, so a restarted consumer comes back under the same id.
    """

    group_id: str = field(validator=validators.min_len(1))
    partition_counts: tuple[tuple[str, int], ...] = field(
        converter=_partition_counts, validator=validators.min_len(1)
    )
    assignors: tuple[str, ...] = field(converter=_names, validator=validators.min_len(1))
    static: bool = False
    session_timeout: float = field(default=2.0, validator=validators.gt(0.0))
    heartbeat_interval: float = field(default=0.2, validator=validators.gt(0.0))
    rebalance_timeout: float = field(default=5.0, validator=validators.gt(0.0))

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(topic for topic, _ in self.partition_counts)

    def partitions(self) -> frozenset[TopicPartition]:
        return frozenset(
            TopicPartition(topic, p) for topic, count in self.partition_counts for p in range(count)
        )


@frozen
class Observation:
    """The group now, and why it is not stable (``None`` when it is)."""

    snapshot: GroupSnapshot
    waiting_for: str | None

    @property
    def stable(self) -> bool:
        return self.waiting_for is None


class GroupRun(Protocol):
    """Consumers of one group on a running cluster."""

    settings: GroupSettings

    def start_consumers(self, count: int) -> list[int]:
        """Start ``count`` more consumers; returns their numbers."""

    def leave(self, consumer: int) -> None:
        """Consumer ``consumer`` closes: commits and leaves the group."""

    def crash(self, consumer: int) -> None:
        """Consumer ``consumer`` stops without committing or leaving."""

    def restart(self, consumer: int) -> None:
        """Consumer ``consumer`` (stopped) starts again under the same number."""

    def kill_coordinator(self) -> int:
        """Crash the broker coordinating the group; returns its id."""

    def poll(self) -> int:
        """Every running consumer consumes up to the high watermarks; returns records consumed."""

    def commit(self) -> int:
        """Every running consumer commits its positions; returns partitions committed."""

    def observe(self, label: str, since: float) -> Observation:
        """The group now, with the rebalances completed since ``since`` (engine clock)."""

    def failures(self) -> list[str]:
        """Consumers that stopped on an error they cannot recover from."""

    def violations(self) -> list[str]:
        """Broken invariants recorded so far (two owners of a partition, ...)."""

    def close(self) -> None:
        """Stop every consumer without committing (the cluster is closed next)."""


class StoppableConsumer(Protocol):
    def close(self) -> None: ...

    def crash(self) -> None: ...


C = TypeVar("C", bound=StoppableConsumer)


class NumberedConsumers(Generic[C]):
    """The numbering both kinds of run share: consumer ``I`` is the ``I``-th started (a restart
    keeps its number); subclasses start one in :meth:`_start` and say whether one is running."""

    consumers: dict[int, C]

    def _start(self, number: int) -> None:
        raise NotImplementedError

    def _is_running(self, consumer: C) -> bool:
        raise NotImplementedError

    def _running(self) -> dict[int, C]:
        return {n: c for n, c in self.consumers.items() if self._is_running(c)}

    def _consumer(self, number: int) -> C:
        try:
            return self.consumers[number]
        except KeyError:
            raise EngineError(f"there is no consumer {number}") from None

    def start_consumers(self, count: int) -> list[int]:
        numbers = list(range(len(self.consumers), len(self.consumers) + count))
        for number in numbers:
            self._start(number)
        return numbers

    def leave(self, consumer: int) -> None:
        self._consumer(consumer).close()

    def crash(self, consumer: int) -> None:
        self._consumer(consumer).crash()

    def restart(self, consumer: int) -> None:
        if self._is_running(self._consumer(consumer)):
            raise EngineError(f"consumer {consumer} is running; leave or crash it first")
        self._start(consumer)


def high_watermark(cluster: Cluster, tp: TopicPartition) -> int:
    log = cluster.replication.log((tp.topic, tp.partition))
    return 0 if log is None else log.hw


def labels(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none"
