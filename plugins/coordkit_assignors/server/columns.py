"""Building a :class:`TargetAssignment` from columns: at a million partitions, one sort and one
``tolist`` instead of a million Python operations."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from coordkit.strategies.target_assignment import MemberAssignment, TargetAssignment

IntArray = npt.NDArray[np.int64]


def assignment_from_columns(
    member_ids: Sequence[str],
    topic_ids: Sequence[uuid.UUID],
    kept: Mapping[str, Mapping[uuid.UUID, tuple[int, ...]]],
    members: IntArray,
    topics: IntArray,
    partitions: IntArray,
) -> TargetAssignment:
    """Every member's target: what it keeps (``kept``) plus the partitions ``partitions[k]`` of
    topic ``topic_ids[topics[k]]`` given to member ``member_ids[members[k]]``. A member's
    partitions of a topic come out ascending."""
    out: dict[str, dict[uuid.UUID, tuple[int, ...]]] = {
        m: dict(kept.get(m, {})) for m in member_ids
    }
    if partitions.size:
        key = members * len(topic_ids) + topics
        order = np.lexsort((partitions, key))
        key, values = key[order], partitions[order].tolist()
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        ends = np.r_[starts[1:], key.size].tolist()
        run_keys = key[starts].tolist()
        for start, end, run in zip(starts.tolist(), ends, run_keys, strict=True):
            member, topic = divmod(run, len(topic_ids))
            target = out[member_ids[member]]
            topic_id = topic_ids[topic]
            given = values[start:end]
            had = target.get(topic_id)
            target[topic_id] = tuple(sorted([*had, *given]) if had else given)
    return TargetAssignment({m: MemberAssignment(a) for m, a in out.items()})
