"""Building a :class:`TargetAssignment` from runs of partitions: at a million partitions, a few
array operations over runs, every member's partitions held as numpy columns
(:class:`~coordkit.strategies.partition_columns.TopicPartitions`) that share one array, instead of
a million Python ints in tuples."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from coordkit.strategies.partition_columns import TopicPartitions
from coordkit.strategies.target_assignment import MemberAssignment, TargetAssignment

IntArray = npt.NDArray[np.int64]
#: ``(topic, partitions)``: a topic as its position in the topic list, its partitions in order.
Run = tuple[int, IntArray]


class _Pieces:
    """The pending runs laid end to end (``laid``) and cut where one receiver's share ends and
    the next one's begins: piece ``k`` goes to member ``members[k]``, is of topic ``topics[k]``,
    holds ``laid[starts[k]:starts[k + 1]]`` and is ascending when ``ascending[k]``. Pieces run
    receiver after receiver."""

    def __init__(self, pending: Sequence[tuple[Run, bool]], receivers: Sequence[tuple[int, int]]):
        blocks = [(run, ascending) for run, ascending in pending if run[1].size]
        if not blocks:
            self.laid = np.zeros(0, dtype=np.int64)
            self.members: list[int] = []
            self.topics: list[int] = []
            self.starts = [0]
            self.ascending: list[bool] = []
            return
        self.laid = np.concatenate([p for (_, p), _ in blocks]).astype(np.int64, copy=False)
        block_starts = np.zeros(len(blocks), dtype=np.int64)
        np.cumsum([p.size for (_, p), _ in blocks[:-1]], out=block_starts[1:])
        quotas = np.asarray([quota for _, quota in receivers], dtype=np.int64)
        shares = np.cumsum(quotas) - quotas  # where each receiver's share begins
        receiving = shares < self.laid.size
        share_starts = shares[receiving]
        cuts = np.union1d(block_starts, share_starts)
        block_of_piece = np.searchsorted(block_starts, cuts, side="right") - 1
        receiver_of_piece = np.searchsorted(share_starts, cuts, side="right") - 1
        positions = np.asarray([position for position, _ in receivers], dtype=np.int64)
        self.members = positions[receiving][receiver_of_piece].tolist()
        self.topics = [blocks[b][0][0] for b in block_of_piece.tolist()]
        self.ascending = [blocks[b][1] for b in block_of_piece.tolist()]
        self.starts = [*cuts.tolist(), self.laid.size]


def _is_ascending(partitions: IntArray) -> bool:
    return bool((partitions[1:] > partitions[:-1]).all())


def assignment_from_runs(
    member_ids: Sequence[str],
    topic_ids: Sequence[uuid.UUID],
    unchanged: Mapping[int, TopicPartitions],
    kept: Mapping[int, list[Run]],
    pending: Sequence[Run],
    receivers: Sequence[tuple[int, int]],
    ascending: int = 0,
) -> TargetAssignment:
    """Every member's target. The members at the positions ``unchanged`` lists keep their current
    target as it is (the same object). The ``pending`` runs (the first ``ascending`` of them known
    ascending), laid end to end, are dealt in order to the ``receivers`` (member position,
    quota), each taking its quota in turn. Every other member gets what it keeps (``kept``), then
    what it is given in ``topic_ids`` order, ascending; a topic in both, merged ascending."""
    pieces = _Pieces(
        [(run, k < ascending or _is_ascending(run[1])) for k, run in enumerate(pending)],
        receivers,
    )
    bounds = np.asarray(pieces.starts, dtype=np.int64)
    piece_topics = np.asarray(pieces.topics, dtype=np.int64)
    for column in (bounds, piece_topics, pieces.laid):
        column.flags.writeable = False
    shares: dict[int, tuple[int, int]] = {}  # member position -> its pieces' range
    for piece, receiver in enumerate(pieces.members):
        first, _ = shares.get(receiver, (piece, piece))
        shares[receiver] = (first, piece + 1)
    out: dict[str, MemberAssignment] = {}
    for position, member in enumerate(member_ids):
        if position in unchanged:
            out[member] = MemberAssignment(unchanged[position])
            continue
        first, end = shares.get(position, (0, 0))
        runs = kept.get(position, [])
        topics = pieces.topics[first:end]
        if not runs and all(pieces.ascending[first:end]) and _increasing(topics):
            # Only given partitions, ascending, one run per topic: a view of the laid column.
            held = TopicPartitions(topic_ids, piece_topics[first:end], bounds[first : end + 1],
                                   pieces.laid)  # fmt: skip
        else:
            starts = pieces.starts
            given = [(t, np.sort(pieces.laid[starts[k] : starts[k + 1]]))
                     for k, t in zip(range(first, end), topics, strict=True)]  # fmt: skip
            given.sort(key=lambda run: run[0])
            held = TopicPartitions.from_runs(topic_ids, _merged([*runs, *given]))
        out[member] = MemberAssignment(held)
    return TargetAssignment(out)


def _increasing(values: list[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


def _merged(runs: list[Run]) -> list[Run]:
    """One run per topic (first appearance order); a topic in several runs merged ascending."""
    by_topic: dict[int, list[IntArray]] = {}
    for topic, partitions in runs:
        by_topic.setdefault(topic, []).append(partitions)
    return [
        (topic, parts[0] if len(parts) == 1 else np.sort(np.concatenate(parts)))
        for topic, parts in by_topic.items()
    ]
