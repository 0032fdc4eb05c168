"""coordkit's ``simple`` share-partition assignor against Kafka 4.4's own (``SimpleAssignor`` from
the fetched group-coordinator jar, run by tests/harness/kafka_server_assignors): the same random
share groups must give the same targets.

Each case is a seeded random group; a failure names its seed, and
``COORDKIT_SHARE_ASSIGNOR_SEED=<seed> pytest tests/share/test_share_groups_simple_vs_kafka.py``
replays that
one group. Shapes: identical and differing subscriptions; more members than partitions (shared
partitions) and fewer; fresh groups, the previous ``simple`` target after members left or joined,
subscriptions changed or partitions were added, an arbitrary current target with partitions held
by several members, listed in a shuffled order; subscriptions to unknown topics. Needs Java 17 and
the Kafka 4.4 jar cache: without them the test fails saying how to get them.
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.share_assignment import (
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    TopicDescriber,
    TopicDescription,
)
from harness.kafka_server_assignors import KafkaServerAssignors

SEED_VARIABLE = "COORDKIT_SHARE_ASSIGNOR_SEED"
GROUPS = 500
LARGE_GROUPS = 4
ID_CHARACTERS = "abcxyz0189-_.\u00fc"


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaServerAssignors]:
    with KafkaServerAssignors(jvm_options=("-Xmx512m", "-XX:+UseSerialGC")) as harness:
        yield harness


def _ident(rng: random.Random, prefix: str) -> str:
    return prefix + "".join(rng.choice(ID_CHARACTERS) for _ in range(rng.randint(1, 6)))


def random_case(seed: int, large: bool = False) -> tuple[GroupSpec, TopicDescriber, str]:
    """A share group, its topics and the shape's name, from ``seed`` alone."""
    rng = random.Random(seed)
    topic_count = rng.randint(5, 30) if large else rng.randint(1, 6)
    most = rng.choice([2, 5, 12, 40]) if not large else 100
    described = [
        TopicDescription(uuid.UUID(int=rng.getrandbits(128)), f"t{i}", rng.randint(0, most))
        for i in range(topic_count)
    ]
    ids = [d.topic_id for d in described]
    member_count = rng.randint(20, 300) if large else rng.randint(1, 30)
    names = list(dict.fromkeys(_ident(rng, "m") for _ in range(member_count)))
    identical = rng.random() < 0.5
    shared = rng.sample(ids, rng.randint(0, len(ids)))

    def subscription() -> list[uuid.UUID]:
        return shared if identical else rng.sample(ids, rng.randint(0, len(ids)))

    members = {m: MemberSpec(subscription()) for m in names}
    shape = "identical" if identical else "differing"
    group = GroupSpec(members)
    topics = TopicDescriber(described)
    history = rng.random()
    if history < 0.4:
        # The previous simple target, then the group changes.
        try:
            previous = get_plugin_manager().share_assignor("simple").assign(group, topics)
        except PartitionAssignorError:
            return group, topics, f"{shape}, fresh"
        group = group.with_assignment(previous)
        changed = dict(group.members)
        for m in rng.sample(names, rng.randint(0, len(names) // 2)):
            del changed[m]
        for _ in range(rng.randint(0, 6)):
            changed[_ident(rng, "n")] = MemberSpec(subscription())
        if not identical or rng.random() < 0.3:
            for m in rng.sample(list(changed), min(len(changed), rng.randint(0, 3))):
                spec = changed[m]
                changed[m] = MemberSpec(subscription(), spec.rack, None, spec.assignment)
        if rng.random() < 0.3:
            described = [
                TopicDescription(d.topic_id, d.name, d.partitions + rng.randint(0, 5))
                for d in described
            ]
            topics = TopicDescriber(described)
        order = list(changed)
        rng.shuffle(order)
        return GroupSpec({m: changed[m] for m in order}), topics, f"{shape}, after simple"
    if history < 0.75:
        # An arbitrary current target: a partition held by none, one or several members.
        held: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in names}
        for d in described:
            for p in range(d.partitions):
                for m in rng.sample(names, min(len(names), rng.choice([0, 1, 1, 2, 3]))):
                    held[m].setdefault(d.topic_id, []).append(p)
        for by_topic in held.values():
            for partitions in by_topic.values():
                rng.shuffle(partitions)
        group = GroupSpec({m: MemberSpec(s.subscribed_topic_ids, None, None, held[m])
                           for m, s in members.items()})  # fmt: skip
        return group, topics, f"{shape}, arbitrary current target"
    if history < 0.8 and names:
        first = names[0]
        unknown = uuid.UUID(int=rng.getrandbits(128))
        members[first] = MemberSpec([*members[first].subscribed_topic_ids, unknown])
        return GroupSpec(members), topics, f"{shape}, unknown topic"
    return group, topics, f"{shape}, fresh"


def _seeds() -> list[tuple[int, bool]]:
    replay = os.environ.get(SEED_VARIABLE)
    if replay:
        seed = int(replay)
        return [(seed, seed >= 10**6)]
    return [(seed, False) for seed in range(GROUPS)] + [
        (10**6 + seed, True) for seed in range(LARGE_GROUPS)
    ]


def test_simple_matches_kafkas_simple_assignor(kafka: KafkaServerAssignors) -> None:
    assignor = get_plugin_manager().share_assignor("simple")
    shapes: dict[str, int] = {}
    for seed, large in _seeds():
        group, topics, shape = random_case(seed, large)
        shapes[shape] = shapes.get(shape, 0) + 1
        replay = f"seed {seed} ({shape}); replay: {SEED_VARIABLE}={seed}"
        expected = kafka.assign("simple", group, topics)
        try:
            got = assignor.assign(group, topics)
        except PartitionAssignorError as error:
            refused: str | None = str(error)
        else:
            refused = None
        if refused is not None or isinstance(expected, str):
            assert refused is not None, f"Kafka refused ({expected}), coordkit did not; {replay}"
            assert isinstance(expected, str), f"coordkit refused ({refused}), Kafka not; {replay}"
            assert refused == expected, replay
            continue
        if got != expected:
            differ = sorted(m for m in group.members if got.members[m] != expected.members[m])
            pytest.fail(
                f"simple differs from Kafka's for {differ[:3]} on {replay}: coordkit "
                f"{[got.members[m].as_sets() for m in differ[:1]]}, Kafka "
                f"{[expected.members[m].as_sets() for m in differ[:1]]}",
                pytrace=False,
            )
    if not os.environ.get(SEED_VARIABLE):
        kinds = {s.split(", ", 1)[1] for s in shapes}
        assert kinds == {"fresh", "after simple", "arbitrary current target", "unknown topic"}
        assert {s.split(", ")[0] for s in shapes} == {"identical", "differing"}
