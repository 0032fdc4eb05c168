"""The metadata a group's assignment was computed from, and watching it change.

Kafka's ``ConsumerCoordinator``: the group leader keeps the partition counts of every topic the
group subscribes to as they were when it computed the assignment (its *assignment snapshot*), and
compares them with its current metadata; when they differ (a topic gained partitions, a subscribed
topic was created or deleted) it rejoins so the group rebalances.

* :class:`MetadataSnapshot` — partition counts of a set of topics (missing topics left out);
* :class:`TopicMetadataWatch` — the current counts, kept by data watches on the topics'
  ``/brokers/topics/T`` nodes (level-triggered: the last state always arrives).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from attrs import field, frozen

from coordkit.engine import states
from coordkit.errors import LayoutError, StoreError
from coordkit.kafka import layout
from coordkit.store import DataEvent, MetadataStore, Watch

if TYPE_CHECKING:
    from coordkit.support.clock import Clock

log = logging.getLogger("coordkit.engine.groups")


class TopicMetadataSource(Protocol):
    """Where a group leader reads partition counts: its group coordinator (the engine's
    :class:`~coordkit.engine.groups.coordinator.GroupCoordinator`)."""

    #: The session its watches are on (a watch on another session is the old coordinator's).
    store: MetadataStore

    def topic_partitions(self, topics: Sequence[str]) -> dict[str, int]:
        """Partition counts of the ``topics`` that exist."""
        ...

    def watch_topic_metadata(
        self, topics: Iterable[str], on_change: Callable[[], object]
    ) -> TopicMetadataWatch:
        """The counts of ``topics`` kept current by watches; ``on_change`` runs when they move."""
        ...


def _topic_set(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


def _counts(value: Mapping[str, int]) -> dict[str, int]:
    return dict(value)


@frozen
class MetadataSnapshot:
    """Partition counts of ``topics`` at one moment; a topic missing from ``partitions`` does not
    exist."""

    topics: frozenset[str] = field(converter=_topic_set)
    partitions: Mapping[str, int] = field(converter=_counts)

    @partitions.validator
    def _check(self, _: object, value: dict[str, int]) -> None:
        for topic, count in value.items():
            if topic not in self.topics:
                raise ValueError(f"partitions: topic {topic!r} is not one of the snapshot's topics")
            if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
                raise ValueError(
                    f"partitions: topic {topic!r} has count {count!r}; need an int > 0"
                )

    @classmethod
    def of(cls, topics: Iterable[str], counts: Mapping[str, int]) -> MetadataSnapshot:
        """The snapshot of ``topics`` from ``counts`` (which may hold other topics too)."""
        wanted = frozenset(topics)
        return cls(wanted, {t: n for t, n in counts.items() if t in wanted})

    def matches(self, other: MetadataSnapshot) -> bool:
        return self.topics == other.topics and self.partitions == other.partitions

    def changes(self, current: MetadataSnapshot) -> list[str]:
        """What differs in ``current``, one phrase per topic (for logs and rebalance reasons)."""
        out = []
        for topic in sorted(self.topics | current.topics):
            before, after = self.partitions.get(topic), current.partitions.get(topic)
            if before == after:
                continue
            if before is None:
                out.append(f"{topic} appeared with {after} partitions")
            elif after is None:
                out.append(f"{topic} was deleted")
            else:
                out.append(f"{topic} went from {before} to {after} partitions")
        return out


class TopicMetadataWatch:
    """The current partition counts of ``topics``, kept by data watches on ``store``.

    :param on_change: called on the store's event thread (so it must not block) whenever a count
        differs from the one seen before, including each topic's first reading.
    :raises StoreError: the watches could not be set (e.g. the session is closed).
    """

    def __init__(
        self, store: MetadataStore, topics: Iterable[str], on_change: Callable[[], object]
    ):
        self.store = store
        self.topics = frozenset(topics)
        self._on_change = on_change
        self._lock = threading.Lock()
        self._counts: dict[str, int | None] = {}  # None: the topic does not exist
        self._watches: list[Watch] = []
        try:
            for topic in sorted(self.topics):
                callback = functools.partial(self._observed, topic)
                self._watches.append(store.watch_data(layout.topic_path(topic), callback))
        except StoreError:
            self.cancel()
            raise

    def current(self) -> MetadataSnapshot | None:
        """The counts last seen; ``None`` until every topic has been read once."""
        with self._lock:
            if len(self._counts) < len(self.topics):
                return None
            counts = {t: n for t, n in self._counts.items() if n is not None}
        return MetadataSnapshot(self.topics, counts)

    def cancel(self) -> None:
        watches, self._watches = self._watches, []
        for watch in watches:
            try:
                watch.cancel()
            except StoreError:
                pass  # the session is gone, and its watches with it

    def _observed(self, topic: str, event: DataEvent) -> None:
        count: int | None = None
        if event.exists and event.data is not None:
            try:
                count = len(states.decode_assignment(event.path, event.data))
            except LayoutError as exc:
                log.warning("ignoring topic metadata: %s", exc)
                return
        with self._lock:
            changed = topic not in self._counts or self._counts[topic] != count
            self._counts[topic] = count
        if changed:
            self._on_change()

    def __repr__(self) -> str:
        return f"<TopicMetadataWatch {sorted(self.topics)}>"


class LeaderMetadata:
    """What a group leader's assignment was computed from, and whether it still holds: the
    group's topics are watched through the current coordinator's session and re-read every
    ``metadata.max.age.ms`` in case a watch missed something (Kafka's leader rejoins when the
    partition count of a subscribed topic changes).

    :param owner: names the leader in log lines.
    :param wakeup: called (on the watching session's event thread) when a watched topic changes.
    """

    def __init__(self, owner: str, clock: Clock, max_age: float, wakeup: Callable[[], object]):
        self.owner = owner
        self.clock = clock
        self.max_age = max_age
        self._wakeup = wakeup
        self.snapshot: MetadataSnapshot | None = None
        self._watch: TopicMetadataWatch | None = None
        self._next_refresh = 0.0

    def remember(
        self, coordinator: TopicMetadataSource, topics: list[str], counts: dict[str, int] | None
    ) -> None:
        """The metadata an assignment is computed from (read now when ``counts`` is None)."""
        if counts is None:
            try:
                counts = coordinator.topic_partitions(topics)
            except StoreError as exc:
                log.debug("%s: metadata read failed: %s", self.owner, exc)
                counts = {}
        self.snapshot = MetadataSnapshot.of(topics, counts)
        self._next_refresh = self.clock.monotonic() + self.max_age

    def forget(self) -> None:
        """No longer the leader."""
        self.snapshot = None
        self.drop_watch()

    def watched_change(self) -> bool:
        """Whether the watch saw the metadata differ from the remembered snapshot."""
        snapshot, watch = self.snapshot, self._watch
        if snapshot is None or watch is None or watch.topics != snapshot.topics:
            return False
        current = watch.current()
        return current is not None and self._changed(snapshot, current)

    def track(self, coordinator: TopicMetadataSource | None) -> bool:
        """Keep watching through ``coordinator`` and re-read every ``max_age``; ``True`` when the
        re-read found the metadata changed (the leader must rejoin)."""
        snapshot = self.snapshot
        if snapshot is None or coordinator is None:
            self.drop_watch()
            return False
        watch = self._watch
        if watch is None or watch.store is not coordinator.store or watch.topics != snapshot.topics:
            # A new term as leader, new topics, or the coordinator moved (the old broker's session
            # and its watches may be gone).
            self.drop_watch()
            try:
                self._watch = coordinator.watch_topic_metadata(snapshot.topics, self._wakeup)
            except StoreError as exc:
                log.debug("%s: cannot watch topics: %s", self.owner, exc)
        now = self.clock.monotonic()
        if now < self._next_refresh:
            return False
        self._next_refresh = now + self.max_age
        try:
            counts = coordinator.topic_partitions(sorted(snapshot.topics))
        except StoreError as exc:
            log.debug("%s: metadata refresh failed: %s", self.owner, exc)
            return False
        return self._changed(snapshot, MetadataSnapshot.of(snapshot.topics, counts))

    def drop_watch(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()

    def _changed(self, snapshot: MetadataSnapshot, current: MetadataSnapshot) -> bool:
        if snapshot.matches(current):
            return False
        log.info("%s rejoins: %s", self.owner, "; ".join(snapshot.changes(current)))
        return True
