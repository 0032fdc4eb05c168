"""The legacy consumer's rebalance (Kafka's ``ZKRebalancerListener.syncedRebalance``, seed 004).

One attempt:

0. enter the store's current session (the consumer's ``prepare``: after a session loss, forget the
   old session's owner nodes and re-register before anything else, as Kafka's ``handleNewSession``
   did); the session may end during a rebalance, so every attempt does, and an attempt during
   which the session changed claims nothing and is retried;
1. read ``/brokers/ids``; with no broker alive there is nothing to fetch from: done, wait for one;
2. stop fetching and, with auto-commit, commit the consumed offsets;
3. release every owner node held (only while the session that created them lives: see
   :mod:`~coordkit.engine.legacy.ownership`);
4. read the group's registrations and the subscribed topics' partitions, and assign partitions to
   consumer threads with the configured assignor;
5. fetch the committed offsets of this consumer's share;
6. claim the share's owner nodes — if any is still held by another thread, delete what this attempt
   claimed and fail the attempt;
7. start fetching.

A failed attempt (a conflict, or a store error) is retried after ``rebalance.backoff.ms``, up to
``rebalance.max.retries`` attempts in all; then :class:`LegacyRebalanceFailedError`. Each rebalance
is recorded with its attempts, conflicts and the store operations it cost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

import attrs

from coordkit.engine.instrument import InstrumentedStore, OpCounts
from coordkit.engine.legacy.assignment import (
    AssignmentContext,
    PartitionCountCache,
    assign_share,
    read_partition_counts,
)
from coordkit.engine.legacy.config import LegacyConsumerConfig
from coordkit.engine.legacy.errors import LegacyRebalanceFailedError
from coordkit.engine.legacy.fetching import Fetcher, PartitionTopicInfo
from coordkit.engine.legacy.ownership import OwnershipClaims
from coordkit.engine.legacy.registration import ConsumerThreadId, read_registrations
from coordkit.errors import CoordkitError, NoNodeError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicPartition
from coordkit.strategies.assignment import Assignor
from coordkit.strategies.offsets import OffsetAndMetadata, OffsetStorage
from coordkit.support.clock import Clock

log = logging.getLogger("coordkit.engine.legacy")

#: Keys of what a rebalance read, compared with watch deliveries to decide whether to rebalance.
IDS = "ids"
BROKERS = "brokers"


def topic_key(topic: str) -> str:
    return f"topic:{topic}"


@attrs.frozen
class AttemptOutcome:
    done: bool
    conflicts: int = 0
    deferred: bool = False  # no broker alive: nothing assigned, waiting for /brokers/ids
    reason: str = ""


@attrs.frozen
class RebalanceRecord:
    """One rebalance (all its attempts).

    :param number: 1 for the consumer's first rebalance.
    :param reasons: what triggered it (coalesced triggers are all listed).
    :param started_at: clock seconds (monotonic) when it began; ``finished_at`` when it ended.
    :param attempts: attempts made; ``conflicts`` owner nodes found held, over all attempts.
    :param succeeded: whether an attempt completed; ``deferred`` if it found no live broker.
    :param partitions: partitions owned afterwards.
    :param ops: store operations of this consumer's session during the rebalance.
    :param error: why it failed, if it did.
    """

    number: int
    reasons: tuple[str, ...]
    started_at: float
    finished_at: float
    attempts: int
    conflicts: int
    succeeded: bool
    deferred: bool
    partitions: int
    ops: OpCounts
    error: str | None = None

    @property
    def duration_s(self) -> float:
        return self.finished_at - self.started_at


class RebalanceLog:
    """Every rebalance of one consumer, with totals; safe to read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[RebalanceRecord] = []

    def add(self, record: RebalanceRecord) -> None:
        with self._lock:
            self._records.append(record)

    @property
    def records(self) -> tuple[RebalanceRecord, ...]:
        with self._lock:
            return tuple(self._records)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._records)

    @property
    def attempts(self) -> int:
        return sum(r.attempts for r in self.records)

    @property
    def conflicts(self) -> int:
        return sum(r.conflicts for r in self.records)

    @property
    def failures(self) -> int:
        return sum(not r.succeeded for r in self.records)

    @property
    def ops(self) -> OpCounts:
        total = OpCounts()
        for record in self.records:
            total = total + record.ops
        return total

    @property
    def last(self) -> RebalanceRecord | None:
        with self._lock:
            return self._records[-1] if self._records else None

    def __repr__(self) -> str:
        return (
            f"<RebalanceLog rebalances={self.count} attempts={self.attempts} "
            f"conflicts={self.conflicts} failures={self.failures}>"
        )


class Rebalancer:
    """Runs one consumer's rebalances; called from the consumer's rebalance thread only."""

    def __init__(
        self,
        *,
        store: InstrumentedStore,
        group_id: str,
        consumer_id: str,
        topics: Iterable[str],
        assignor: Assignor,
        config: LegacyConsumerConfig,
        clock: Clock,
        claims: OwnershipClaims,
        fetcher: Fetcher,
        offsets: OffsetStorage,
        stopping: threading.Event,
        observe: Callable[[str, object], None],
        prepare: Callable[[], None] = lambda: None,
    ):
        self.store = store
        self.group_id = group_id
        self.consumer_id = consumer_id
        self.topics = sorted(topics)
        self.assignor = assignor
        self.config = config
        self.clock = clock
        self.claims = claims
        self.fetcher = fetcher
        self.offsets = offsets
        self.stopping = stopping
        self._observe = observe  # remembers what an attempt read, for the watch comparison
        self._prepare = prepare  # enters the current session (may raise CoordkitError: retried)
        self.log = RebalanceLog()
        self._partition_counts: PartitionCountCache = {}

    # -- offsets
    def commit(self, infos: Mapping[TopicPartition, PartitionTopicInfo] | None = None) -> int:
        """Commit the consumed offsets that moved (of ``infos``, default: those being fetched)."""
        moved = self.fetcher.uncommitted(infos)
        if moved:
            self.offsets.commit(
                self.group_id, {tp: OffsetAndMetadata(offset) for tp, offset in moved.items()}
            )
            self.fetcher.checkpointed(moved, infos)
        return len(moved)

    # -- one attempt
    def attempt(self) -> AttemptOutcome:
        session = self.store.session_id
        self._prepare()
        try:
            brokers = tuple(self.store.children(layout.BROKER_IDS))
        except NoNodeError:
            brokers = ()
        self._observe(BROKERS, brokers)
        if not brokers:
            return AttemptOutcome(done=True, deferred=True)

        stopped = self.fetcher.stop()
        if self.config.auto_commit_enable and stopped:
            self.commit(stopped)
        self.claims.release_all()

        consumers, registrations = read_registrations(self.store, self.group_id)
        self._observe(IDS, consumers)
        group_topics = sorted({t for r in registrations.values() for t in r.subscription})
        counts, raw = read_partition_counts(self.store, group_topics, self._partition_counts)
        for topic in self.topics:
            self._observe(topic_key(topic), raw.get(topic))
        context = AssignmentContext.from_registrations(self.consumer_id, registrations, counts)
        share = assign_share(context, self.assignor)

        committed = self.offsets.fetch(self.group_id, list(share)) if share else {}
        if self.stopping.is_set():
            return AttemptOutcome(done=False, reason="the consumer is shutting down")
        if self.store.session_id != session:
            # What was read may be a group this consumer is not registered in (yet): retried,
            # and the next attempt enters the new session first.
            return AttemptOutcome(done=False, reason="the store session ended during the attempt")

        outcome = self.claims.claim(share)
        if not outcome.succeeded:
            shown = ", ".join(str(tp) for tp in outcome.conflicts[:5])
            more = f" and {len(outcome.conflicts) - 5} more" if len(outcome.conflicts) > 5 else ""
            return AttemptOutcome(
                done=False,
                conflicts=len(outcome.conflicts),
                reason=f"owner nodes still held by other threads: {shown}{more}",
            )
        starts = {tp: committed[tp].offset if tp in committed else 0 for tp in share}
        self.fetcher.start(
            {
                tp: PartitionTopicInfo(tp, thread, starts[tp], starts[tp])
                for tp, thread in share.items()
            }
        )
        return AttemptOutcome(done=True)

    # -- the retry loop
    def synced_rebalance(self, reasons: Iterable[str]) -> RebalanceRecord:
        """Rebalance until an attempt succeeds or the attempts run out.

        :raises LegacyRebalanceFailedError: every attempt failed (the record is logged first).
        """
        started = self.clock.monotonic()
        before = self.store.counts
        attempts = conflicts = 0
        outcome = AttemptOutcome(done=False, reason="not attempted")
        for attempts in range(1, self.config.rebalance_max_retries + 1):
            if self.stopping.is_set():
                outcome = AttemptOutcome(done=False, reason="the consumer is shutting down")
                break
            try:
                outcome = self.attempt()
            except CoordkitError as exc:  # a store or layout failure: retry, as Kafka did
                log.info("rebalance attempt %d of %s failed: %s", attempts, self.consumer_id, exc)
                outcome = AttemptOutcome(done=False, reason=f"{type(exc).__name__}: {exc}")
            conflicts += outcome.conflicts
            if outcome.done:
                break
            self.fetcher.stop()
            if attempts < self.config.rebalance_max_retries:
                self.stopping.wait(self.config.rebalance_backoff_s)
        record = RebalanceRecord(
            number=self.log.count + 1,
            reasons=tuple(dict.fromkeys(reasons)),
            started_at=started,
            finished_at=self.clock.monotonic(),
            attempts=attempts,
            conflicts=conflicts,
            succeeded=outcome.done,
            deferred=outcome.deferred,
            partitions=len(self.fetcher.owners()),
            ops=self.store.counts - before,
            error=None if outcome.done else outcome.reason,
        )
        self.log.add(record)
        if not outcome.done and not self.stopping.is_set():
            raise LegacyRebalanceFailedError(
                self.group_id, self.consumer_id, attempts, outcome.reason
            )
        return record


def owners_as_text(owned: Mapping[TopicPartition, ConsumerThreadId]) -> dict[TopicPartition, str]:
    return {tp: str(thread) for tp, thread in owned.items()}
