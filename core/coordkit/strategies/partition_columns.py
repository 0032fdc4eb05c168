"""A member's partitions by topic, held as numpy columns and read as ``{topic id: (partition, ...)}``.

At a million partitions an assignor's result as Python tuples costs more than computing it: a
million ints boxed and thousands of tuples and dicts built, most of which nobody reads in the same
call. :class:`TopicPartitions` keeps a member's partitions as runs over arrays that every member of
one result shares, and builds the tuples of a member only when that member's mapping is read.
:func:`split_runs` builds every member's :class:`TopicPartitions` from columns in a few array
operations, with no per-partition Python.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["TopicIndexer", "TopicPartitions", "split_runs"]

IntArray = npt.NDArray[np.int64]

_NO_RUNS: IntArray = np.zeros(0, dtype=np.int64)
_NO_BOUNDS: IntArray = np.zeros(1, dtype=np.int64)
for _constant in (_NO_RUNS, _NO_BOUNDS):
    _constant.flags.writeable = False


class TopicPartitions(Mapping[uuid.UUID, tuple[int, ...]]):
    """``{topic id: (partition, ...)}`` held as runs: run ``k`` is the topic
    ``topic_ids[topics[k]]`` with the partitions ``partitions[bounds[k]:bounds[k + 1]]``.

    Runs are non-empty and name distinct topics (a topic without partitions is not listed); the
    arrays are never written after construction, so members of one result can share them. Read as
    a mapping, it lists the runs in order, each partition tuple in its run's order; equal to any
    mapping with the same items.
    """

    __slots__ = ("_tuples", "bounds", "partitions", "topic_ids", "topics")

    def __init__(
        self,
        topic_ids: Sequence[uuid.UUID],
        topics: IntArray,
        bounds: IntArray,
        partitions: IntArray,
    ):
        self.topic_ids = topic_ids
        self.topics = topics
        self.bounds = bounds
        self.partitions = partitions
        self._tuples: dict[uuid.UUID, tuple[int, ...]] | None = None

    @classmethod
    def of(cls, value: Mapping[uuid.UUID, Iterable[int]]) -> TopicPartitions:
        """``value`` as columns (itself when it already is); topics without partitions dropped."""
        if type(value) is cls or isinstance(value, TopicPartitions):  # type(): no ABC check
            return value
        tuples: dict[uuid.UUID, tuple[int, ...]] = {}
        for topic_id, partitions in value.items():
            held = partitions if isinstance(partitions, tuple) else tuple(partitions)
            if held:
                tuples[topic_id] = held
        if not tuples:
            return cls.empty()
        bounds = np.zeros(len(tuples) + 1, dtype=np.int64)
        np.cumsum([len(ps) for ps in tuples.values()], out=bounds[1:])
        values = itertools.chain.from_iterable(tuples.values())
        partitions_column = np.fromiter(values, dtype=np.int64, count=int(bounds[-1]))
        out = cls(tuple(tuples), np.arange(len(tuples), dtype=np.int64), bounds, partitions_column)
        out._tuples = tuples  # what was handed in is already the mapping's view
        return out

    @classmethod
    def empty(cls) -> TopicPartitions:
        return cls((), _NO_RUNS, _NO_BOUNDS, _NO_RUNS)

    @classmethod
    def from_runs(
        cls, topic_ids: Sequence[uuid.UUID], runs: Sequence[tuple[int, IntArray]]
    ) -> TopicPartitions:
        """Runs given as ``(position in topic_ids, partitions)``, non-empty, distinct topics."""
        if not runs:
            return cls(topic_ids, _NO_RUNS, _NO_BOUNDS, _NO_RUNS)
        sizes = itertools.accumulate((partitions.size for _, partitions in runs), initial=0)
        bounds = np.fromiter(sizes, dtype=np.int64, count=len(runs) + 1)
        topics = np.fromiter((topic for topic, _ in runs), dtype=np.int64, count=len(runs))
        partitions = np.concatenate([partitions for _, partitions in runs])
        return cls(topic_ids, topics, bounds, partitions)

    @property
    def total(self) -> int:
        """How many partitions, over all topics."""
        return int(self.bounds[-1] - self.bounds[0])

    def runs(self) -> Iterator[tuple[uuid.UUID, IntArray]]:
        """``(topic id, partitions)`` per run, the partitions a read-only array (no tuples made)."""
        bounds = self.bounds.tolist()
        for k, topic in enumerate(self.topics.tolist()):
            yield self.topic_ids[topic], self.partitions[bounds[k] : bounds[k + 1]]

    def _mapping(self) -> dict[uuid.UUID, tuple[int, ...]]:
        if self._tuples is None:
            first = int(self.bounds[0])
            values = self.partitions[first : int(self.bounds[-1])].tolist()  # one boxing pass
            bounds = (self.bounds - first).tolist()
            self._tuples = {
                self.topic_ids[topic]: tuple(values[bounds[k] : bounds[k + 1]])
                for k, topic in enumerate(self.topics.tolist())
            }
        return self._tuples

    def __getitem__(self, topic_id: uuid.UUID) -> tuple[int, ...]:
        return self._mapping()[topic_id]

    def __iter__(self) -> Iterator[uuid.UUID]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self.topics)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TopicPartitions):
            return self._mapping() == other._mapping()
        if isinstance(other, Mapping):
            return self._mapping() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TopicPartitions({self._mapping()!r})"


class TopicIndexer:
    """Maps the topics of :class:`TopicPartitions` runs to positions in one list of topic ids
    (``-1``: not in it). Members of one result share their ``topic_ids``; each shared list is
    mapped once, not once per member."""

    def __init__(self, topic_ids: Iterable[uuid.UUID]):
        self._position = {t: i for i, t in enumerate(topic_ids)}
        self._mapped: dict[int, tuple[Sequence[uuid.UUID], IntArray, list[int]]] = {}

    def positions(self, topic_ids: Sequence[uuid.UUID]) -> IntArray:
        """Each of ``topic_ids``'s position (``-1``: absent)."""
        return self._lookup(topic_ids)[1]

    def _lookup(
        self, topic_ids: Sequence[uuid.UUID]
    ) -> tuple[Sequence[uuid.UUID], IntArray, list[int]]:
        cached = self._mapped.get(id(topic_ids))
        if cached is None or cached[0] is not topic_ids:
            listed = [self._position.get(t, -1) for t in topic_ids]
            # Holding topic_ids keeps its id from being reused while cached.
            cached = (topic_ids, np.array(listed, dtype=np.int64), listed)
            self._mapped[id(topic_ids)] = cached
        return cached

    def runs(self, held: TopicPartitions) -> IntArray:
        """The position of each run's topic."""
        return self.positions(held.topic_ids)[held.topics]

    def run_list(self, held: TopicPartitions) -> list[int]:
        """:meth:`runs` as a list (a member's few runs: cheaper than an array operation)."""
        listed = self._lookup(held.topic_ids)[2]
        return [listed[topic] for topic in held.topics.tolist()]


def _read_only(*arrays: IntArray) -> None:
    for array in arrays:
        array.flags.writeable = False


def split_runs(
    member_count: int,
    topic_ids: Sequence[uuid.UUID],
    run_members: IntArray,
    run_topics: IntArray,
    bounds: IntArray,
    partitions: IntArray,
) -> list[TopicPartitions]:
    """Every member's :class:`TopicPartitions` from runs listed member by member: run ``k`` gives
    member ``run_members[k]`` (non-decreasing) the topic ``topic_ids[run_topics[k]]`` and the
    partitions ``partitions[bounds[k]:bounds[k + 1]]`` (non-empty). The members share the arrays."""
    _read_only(run_topics, bounds, partitions)
    cuts = np.searchsorted(run_members, np.arange(member_count + 1)).tolist()
    return [
        TopicPartitions(topic_ids, run_topics[start:end], bounds[start : end + 1], partitions)
        for start, end in itertools.pairwise(cuts)
    ]
