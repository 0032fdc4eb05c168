"""Kafka's ``simple`` share assignor as coordkit reproduces it: what it promises on its own (the
comparison with Kafka 4.4's class is tests/share/test_share_groups_simple_vs_kafka.py, in
py311-share), and the Java hash orders it replays."""

from __future__ import annotations

import uuid

import pytest
from click.testing import CliRunner

from coordkit.cli import cli
from coordkit.plugins import get_plugin_manager
from coordkit.serve.broker_config import parse_broker_configs
from coordkit.strategies.share_assignment import (
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    TopicDescriber,
)
from coordkit_share_assignors.java_hash import JavaHashSet, integer_hash, sized_for


def test_members_outnumbering_partitions_share_them() -> None:
    """Five members, two partitions: each partition goes to ceil(5 / 2) = 3 members; member counts
    2, 1, 1, 1, 1 (Kafka's desired counts for sharing 3 over 5 members)."""
    topics = TopicDescriber.from_counts({"t": 2})
    tid = next(iter(topics.topics))
    group = GroupSpec({f"m{i}": MemberSpec([tid]) for i in range(5)})
    target = get_plugin_manager().share_assignor("simple").assign(group, topics)
    owners = target.owners()
    assert sorted(len(owners[(tid, p)]) for p in (0, 1)) == [3, 3]
    assert [target.counts()[f"m{i}"] for i in range(5)] == [2, 1, 1, 1, 1]


def test_a_stayer_keeps_its_partitions_when_a_member_joins() -> None:
    topics = TopicDescriber.from_counts({"t": 6})
    tid = next(iter(topics.topics))
    simple = get_plugin_manager().share_assignor("simple")
    first = simple.assign(GroupSpec({"a": MemberSpec([tid]), "b": MemberSpec([tid])}), topics)
    grown = GroupSpec(
        {
            "a": MemberSpec([tid], assignment=first.members["a"].partitions),
            "b": MemberSpec([tid], assignment=first.members["b"].partitions),
            "c": MemberSpec([tid]),
        }
    )
    second = simple.assign(grown, topics)
    for member in ("a", "b"):
        kept = second.members[member].as_sets()[tid]
        assert kept <= first.members[member].as_sets()[tid]
        assert len(kept) == 2
    assert sorted(p for m in "abc" for p in second.members[m].as_sets()[tid]) == list(range(6))


def test_unknown_topics_are_refused_with_kafkas_message() -> None:
    unknown = uuid.UUID(int=7)
    group = GroupSpec({"a": MemberSpec([unknown])})
    with pytest.raises(PartitionAssignorError, match="which doesn't exist in the topic metadata"):
        get_plugin_manager().share_assignor("simple").assign(group, TopicDescriber([]))


def test_java_hash_set_order_puts_compute_if_absent_at_the_bucket_head() -> None:
    """16 and 0 share bucket 0 of a 16-slot table: ``put`` appends, ``computeIfAbsent`` prepends."""
    put: JavaHashSet[int] = JavaHashSet(integer_hash)
    put.add(16)
    put.add(0)
    assert put.order() == [16, 0]
    computed: JavaHashSet[int] = JavaHashSet(integer_hash)
    computed.compute_if_absent(16)
    computed.compute_if_absent(0)
    assert computed.order() == [0, 16]
    # Kafka's AssignorHelpers.newHashMap(n): (int) ((n + 1) / 0.75f + 1.0f).
    assert [sized_for(n) for n in (0, 11, 23)] == [2, 17, 33]


def test_group_share_assignors_takes_names_or_kafkas_class_and_refuses_unknown_ones() -> None:
    configs = parse_broker_configs(
        ["group.share.assignors=org.apache.kafka.coordinator.group.assignor.SimpleAssignor"]
    )
    assert configs.engine_config().share_group_assignors == ("simple",)
    result = CliRunner().invoke(
        cli, ["serve", "--port", "0", "--config", "group.share.assignors=nope"]
    )
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: --config group.share.assignors: unknown share assignor 'nope'")
