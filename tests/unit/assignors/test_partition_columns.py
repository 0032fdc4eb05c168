"""A member's partitions held as columns (coordkit.strategies.partition_columns) read as the
``{topic id: (partition, ...)}`` mapping the server-side assignor contract promises, and a
malformed current target still named in one line when the owners are worked out in columns."""

from __future__ import annotations

import numpy as np
import pytest

from coordkit.strategies.partition_columns import TopicPartitions, split_runs
from coordkit.strategies.target_assignment import (
    GroupSpec,
    MalformedGroupError,
    MemberAssignment,
    MemberSpec,
    TargetAssignment,
    TopicDescriber,
    current_owners,
    topic_id_of,
)

A, B, C = topic_id_of("a"), topic_id_of("b"), topic_id_of("c")


def test_a_mapping_read_as_columns_is_the_same_mapping() -> None:
    held = TopicPartitions.of({A: [3, 1], B: (), C: range(2)})
    assert held == {A: (3, 1), C: (0, 1)}
    assert list(held) == [A, C]
    assert len(held) == 2
    assert held[A] == (3, 1)
    assert held.total == 4
    assert [(t, p.tolist()) for t, p in held.runs()] == [(A, [3, 1]), (C, [0, 1])]
    assert TopicPartitions.of(held) is held
    assert held != {A: (1, 3), C: (0, 1)}  # order within a topic counts, as for tuples
    with pytest.raises(TypeError):
        hash(held)


def test_members_split_from_shared_runs_read_their_own() -> None:
    # Runs member by member: member 0 has a:[5, 6] and c:[0]; member 1 nothing; member 2 b:[9].
    columns = np.array([5, 6, 0, 9])
    members = split_runs(
        3, (A, B, C), np.array([0, 0, 2]), np.array([0, 2, 1]), np.array([0, 2, 3, 4]), columns
    )
    assert [dict(m) for m in members] == [{A: (5, 6), C: (0,)}, {}, {B: (9,)}]
    assert [m.total for m in members] == [3, 0, 1]
    assert members[0].partitions is members[2].partitions  # one column shared, not copied
    assert not columns.flags.writeable
    from_runs = TopicPartitions.from_runs((A, B, C), [(1, np.array([9]))])
    assert from_runs == members[2]


def test_a_target_made_of_columns_equals_one_made_of_tuples() -> None:
    held = split_runs(1, (A, B), np.array([0]), np.array([1]), np.array([0, 2]), np.arange(2))[0]
    columns = TargetAssignment({"m": MemberAssignment(held)})
    assert columns == TargetAssignment({"m": {B: (1, 0)}})
    assert columns.members["m"] == MemberAssignment({B: [0, 1]})
    assert columns.counts() == {"m": 2}
    assert columns.as_sets() == {"m": {B: frozenset({0, 1})}}


def _group(**held: dict) -> GroupSpec:  # type: ignore[type-arg]
    return GroupSpec({m: MemberSpec([A, B], assignment=a) for m, a in held.items()})


TOPICS = TopicDescriber.from_counts({"a": 3, "b": 2})


def test_current_owners_in_columns() -> None:
    group = _group(x={A: [2], C: [7]}, y={B: (1, 0), A: [0]})
    owners = current_owners(group, TOPICS)
    assert {t: o.tolist() for t, o in owners.items()} == {A: [1, -1, 0], B: [1, 1]}
    assert current_owners(group, TOPICS) is owners  # kept on the group for the same topics


@pytest.mark.parametrize(
    ("held", "message"),
    [
        ({"x": {A: [0]}, "y": {B: [1], A: [3]}}, "member 'y' holds partition 3 of topic 'a'"),
        ({"x": {A: [0]}, "y": {B: [-1]}}, "member 'y' holds partition -1 of topic 'b'"),
        ({"x": {A: [0, 1]}, "y": {A: [1]}}, "partition a-1 is in the current target of two"),
        ({"x": {B: [1, 1]}}, "partition b-1 is in the current target of two"),
    ],
)
def test_a_malformed_current_target_is_named(held: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(MalformedGroupError, match=message):
        current_owners(_group(**held), TOPICS)
