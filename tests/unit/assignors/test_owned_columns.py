"""Assignments as columns: an assignor's result held as views of one array reads as Python ints,
and the owned partitions a result hands to the next rebalance (GroupAssignment.owned) give every
assignor the same answer as the same partitions written as a mapping."""

from __future__ import annotations

import json
import random

import pytest

from coordkit.kafka.model import TopicPartition
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import GroupAssignment, GroupSubscription, MemberSubscription

ASSIGNORS = ["range", "roundrobin", "sticky", "cooperative-sticky", "uniform"]


def random_group(seed: int) -> GroupSubscription:
    rng = random.Random(seed)
    topics = {f"t{i}": rng.choice([0, 1, 3, 8]) for i in range(rng.randint(1, 6))}
    names = list(topics)
    members = {
        f"m{i}": MemberSubscription(rng.sample(names, rng.randint(1, len(names))))
        for i in range(rng.randint(1, 7))
    }
    return GroupSubscription(topics, members)


def next_round(group: GroupSubscription, result: GroupAssignment, *, columns: bool, seed: int):
    rng = random.Random(seed)
    leaving = rng.choice(sorted(group.members)) if len(group.members) > 1 else None
    members = {
        m: MemberSubscription(
            sub.topics,
            owned=result.owned(m) if columns else result.by_topic(m),
            generation=1,
        )
        for m, sub in group.members.items()
        if m != leaving
    }
    members["newcomer"] = MemberSubscription(sorted(group.topics))
    return GroupSubscription(group.topics, members)


@pytest.mark.parametrize("assignor", ASSIGNORS)
@pytest.mark.parametrize("seed", range(40))
def test_owned_as_columns_and_as_a_mapping_give_the_same_assignment(
    assignor: str, seed: int
) -> None:
    impl = get_plugin_manager().assignors.get(assignor)
    group = random_group(seed)
    first = impl.assign(group)
    for member in first:
        assert dict(first.owned(member)) == {
            t: tuple(ps) for t, ps in first.by_topic(member).items()
        }
    as_columns = impl.assign(next_round(group, first, columns=True, seed=seed))
    as_mapping = impl.assign(next_round(group, first, columns=False, seed=seed))
    assert as_columns == as_mapping


def test_a_result_held_as_array_views_reads_as_python_ints() -> None:
    group = GroupSubscription({"a": 5, "b": 0, "c": 4}, {"x": MemberSubscription(["a", "c"])})
    result = get_plugin_manager().assignors.get("uniform").assign(group)
    partitions = result.partitions("x")
    assert partitions == [TopicPartition("a", p) for p in range(5)] + [
        TopicPartition("c", p) for p in range(4)
    ]
    assert all(type(tp.partition) is int for tp in partitions)
    assert all(type(p) is int for ps in result.by_topic("x").values() for p in ps)
    json.dumps(result.as_strings())  # no numpy scalar reaches output
    assert dict(result.owned("x")) == {"a": (0, 1, 2, 3, 4), "c": (0, 1, 2, 3)}
