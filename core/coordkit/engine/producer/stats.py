"""What a producer counts: records per partition and per broker, batches, failures; and the skew
figures the lab reports from them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import attrs

from coordkit.engine.states import TP


def skew(counts: Iterable[int]) -> float:
    """``max / mean`` of ``counts`` (1.0 is perfectly even; 0.0 when nothing was counted)."""
    values = list(counts)
    total = sum(values)
    if not values or total == 0:
        return 0.0
    return max(values) * len(values) / total


@attrs.frozen
class ProducerTotals:
    """A snapshot of :class:`ProducerStats`.

    :param records_sent: records acknowledged by a leader.
    :param records_failed: records whose send ended in an error.
    :param unavailable_sends: records the partitioner put on a partition that had no live,
        reachable leader at the time (they wait, and fail if no leader comes in time).
    :param batches: batches delivered.
    :param metadata_refreshes: metadata fetches (the first one included).
    :param retries: batch sends retried after a retriable error.
    :param per_partition: records acknowledged per partition.
    :param per_broker: records acknowledged per broker (the leader that appended them).
    :param placed: records the partitioner placed per partition (acknowledged or not).
    """

    records_sent: int
    records_failed: int
    unavailable_sends: int
    batches: int
    metadata_refreshes: int
    retries: int
    per_partition: tuple[tuple[TP, int], ...]
    per_broker: tuple[tuple[int, int], ...]
    placed: tuple[tuple[TP, int], ...]

    @property
    def records_per_batch(self) -> float:
        return self.records_sent / self.batches if self.batches else 0.0


class ProducerStats:
    def __init__(self) -> None:
        self.per_partition: Counter[TP] = Counter()
        self.per_broker: Counter[int] = Counter()
        self.placed: Counter[TP] = Counter()
        self.records_sent = 0
        self.records_failed = 0
        self.unavailable_sends = 0
        self.batches = 0
        self.metadata_refreshes = 0
        self.retries = 0

    def delivered(self, tp: TP, broker: int, records: int) -> None:
        self.per_partition[tp] += records
        self.per_broker[broker] += records
        self.records_sent += records
        self.batches += 1

    def totals(self) -> ProducerTotals:
        return ProducerTotals(
            records_sent=self.records_sent,
            records_failed=self.records_failed,
            unavailable_sends=self.unavailable_sends,
            batches=self.batches,
            metadata_refreshes=self.metadata_refreshes,
            retries=self.retries,
            per_partition=tuple(sorted(self.per_partition.items())),
            per_broker=tuple(sorted(self.per_broker.items())),
            placed=tuple(sorted(self.placed.items())),
        )
