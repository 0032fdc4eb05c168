"""The controller's topics as mappings a standby's image can back (a hand-over builds nothing per
topic; see :mod:`.partition_map` for the partitions' side):

* :class:`AssignmentMap` — ``topic → {partition: replicas}``, each topic's dict built on first
  access from the image's list of replica tuples;
* :class:`AssignmentVersions` — ``topic → mzxid`` of its assignment node, lent likewise;
* :class:`TopicSet` — the topics known, the lent names included.
"""

from __future__ import annotations

from collections.abc import (
    Collection,
    Iterable,
    Iterator,
    MutableMapping,
    MutableSet,
    Sequence,
)

from coordkit.engine.controller.partition_map import LentNames, LentTopics, Replicas


class AssignmentMap(MutableMapping[str, dict[int, Replicas]]):
    """``topic → {partition: replicas}``; a topic handed over as a list of replica tuples (its
    partitions ``0..n-1``), or lent by an image, becomes a dict on first access."""

    def __init__(self) -> None:
        self._topics: dict[str, dict[int, Replicas] | Sequence[Replicas]] = {}
        self._lent: LentTopics | None = None
        self._lent_names = LentNames()

    def add_list(self, topic: str, replicas: Sequence[Replicas]) -> None:
        self._lent_names.take(topic)
        self._topics[topic] = replicas

    def add_lent(self, lent: LentTopics) -> None:
        """Back the topics ``lent`` names by it (one lender per map; topics held win)."""
        self._lent_names.lend(lent.names())
        self._lent = lent
        for topic in [t for t in self._topics if t in self._lent_names]:
            self._lent_names.take(topic)

    def _held(self, topic: str) -> dict[int, Replicas] | Sequence[Replicas] | None:
        held = self._topics.get(topic)
        if held is None and self._lent_names.take(topic):
            assert self._lent is not None
            held = self._topics[topic] = self._lent.replicas(topic)
        return held

    def __getitem__(self, topic: str) -> dict[int, Replicas]:
        held = self._held(topic)
        if held is None:
            raise KeyError(topic)
        if isinstance(held, dict):
            return held
        built = self._topics[topic] = dict(enumerate(held))
        return built

    def __contains__(self, topic: object) -> bool:
        return topic in self._topics or topic in self._lent_names

    def __setitem__(self, topic: str, assignment: dict[int, Replicas]) -> None:
        self._lent_names.take(topic)
        self._topics[topic] = assignment

    def __delitem__(self, topic: str) -> None:
        if not self._lent_names.take(topic):
            del self._topics[topic]

    def __len__(self) -> int:
        return len(self._topics) + len(self._lent_names)

    def __iter__(self) -> Iterator[str]:
        return iter([*self._topics, *self._lent_names])

    def partitions(self, topic: str) -> Sequence[int]:
        """Partition numbers of ``topic`` (without building its dict)."""
        held = self._held(topic)
        if held is None:
            return []
        return list(held) if isinstance(held, dict) else range(len(held))


class AssignmentVersions(MutableMapping[str, int]):
    """``topic → mzxid`` of its assignment node as last read; lent topics read theirs from the
    lender until set or removed."""

    def __init__(self) -> None:
        self._own: dict[str, int] = {}
        self._lent: LentTopics | None = None
        self._lent_names = LentNames()

    def add_lent(self, lent: LentTopics) -> None:
        """Read the topics ``lent`` names from it (one lender; versions held win)."""
        self._lent_names.lend(lent.names())
        self._lent = lent
        for topic in [t for t in self._own if t in self._lent_names]:
            self._lent_names.take(topic)

    def __getitem__(self, topic: str) -> int:
        found = self._own.get(topic)
        if found is not None:
            return found
        if topic in self._lent_names:
            assert self._lent is not None
            return self._lent.mzxid(topic)
        raise KeyError(topic)

    def __setitem__(self, topic: str, mzxid: int) -> None:
        self._lent_names.take(topic)
        self._own[topic] = mzxid

    def __delitem__(self, topic: str) -> None:
        if not self._lent_names.take(topic):
            del self._own[topic]

    def __contains__(self, topic: object) -> bool:
        return topic in self._own or topic in self._lent_names

    def __len__(self) -> int:
        return len(self._own) + len(self._lent_names)

    def __iter__(self) -> Iterator[str]:
        return iter([*self._own, *self._lent_names])


class TopicSet(MutableSet[str]):
    """A set of topic names that may include a lender's names (without copying them)."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._own: set[str] = set(names)
        self._lent_names = LentNames()

    def add_lent(self, names: Collection[str]) -> None:
        self._lent_names.lend(names)

    def __contains__(self, topic: object) -> bool:
        return topic in self._own or topic in self._lent_names

    def add(self, topic: str) -> None:
        self._own.add(topic)

    def discard(self, topic: str) -> None:
        self._own.discard(topic)
        self._lent_names.take(topic)

    def __iter__(self) -> Iterator[str]:
        own = self._own
        return iter([*own, *(topic for topic in self._lent_names if topic not in own)])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"TopicSet({sorted(self)!r})"
