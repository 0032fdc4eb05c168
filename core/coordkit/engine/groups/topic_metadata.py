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
from collections.abc import Callable, Iterable, Mapping

from attrs import field, frozen

from coordkit import layout
from coordkit.engine import states
from coordkit.errors import LayoutError, StoreError
from coordkit.store import DataEvent, MetadataStore, Watch

log = logging.getLogger("coordkit.engine.groups")


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
