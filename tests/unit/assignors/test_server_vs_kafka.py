"""coordkit's server-side ``uniform`` and ``range`` against Kafka 4.4's own (the group coordinator's
``UniformAssignor`` and ``RangeAssignor`` from the fetched jars, run by
tests/harness/kafka_server_assignors): the same random groups must give the same targets.

Each case is a seeded random group; a failure names its seed, and
``COORDKIT_SERVER_ASSIGNOR_SEED=<seed> pytest tests/unit/assignors/test_server_vs_kafka.py``
replays that one group. Shapes: identical and differing subscriptions, without and with a current
target (the assignor's previous target after members left or joined, subscriptions changed or
partitions were added; or an arbitrary one listed in a shuffled order), static members with
instance ids, member ids and instance ids outside ASCII, and subscriptions to unknown topics.
Needs Java 17 and the Kafka 4.4 jar cache: without them the test fails saying how to get them.
"""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.target_assignment import (
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    TopicDescriber,
    TopicDescription,
)
from harness.kafka_server_assignors import KafkaServerAssignors

SEED_VARIABLE = "COORDKIT_SERVER_ASSIGNOR_SEED"
#: Random groups per assignor (and a few large ones).
GROUPS = 400
LARGE_GROUPS = 6
ID_CHARACTERS = "abcxyz0189-_.\u00fc\uff5e\U00010000"


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaServerAssignors]:
    with KafkaServerAssignors(jvm_options=("-Xmx1g", "-XX:+UseSerialGC")) as harness:
        yield harness


def _ident(rng: random.Random, prefix: str) -> str:
    return prefix + "".join(rng.choice(ID_CHARACTERS) for _ in range(rng.randint(1, 5)))


def random_case(seed: int, large: bool = False) -> tuple[GroupSpec, TopicDescriber, str]:
    """A group, its topics and the shape's name, from ``seed`` alone."""
    rng = random.Random(seed)
    topic_count = rng.randint(20, 60) if large else rng.randint(1, 8)
    most = 200 if large else 30
    described = [
        TopicDescription(uuid.UUID(int=rng.getrandbits(128)), f"t{i}", rng.randint(0, most))
        for i in range(topic_count)
    ]
    ids = [d.topic_id for d in described]
    member_count = rng.randint(50, 400) if large else rng.randint(1, 25)
    names = list(dict.fromkeys(_ident(rng, "m") for _ in range(member_count)))
    identical = rng.random() < 0.5
    shared = rng.sample(ids, rng.randint(0, len(ids)))

    def subscription() -> list[uuid.UUID]:
        return shared if identical else rng.sample(ids, rng.randint(0, len(ids)))

    statics = rng.random() < 0.4
    members = {
        m: MemberSpec(
            subscription(),
            instance_id=_ident(rng, "i") if statics and rng.random() < 0.7 else None,
        )
        for m in names
    }
    shape = "identical" if identical else "differing"
    group = GroupSpec(members)
    topics = TopicDescriber(described)
    history = rng.random()
    if history < 0.35:
        # The previous target of the same assignor, then the group changes.
        name = rng.choice(["uniform", "range"])
        try:
            previous = get_plugin_manager().server_assignor(name).assign(group, topics)
        except PartitionAssignorError:
            return group, topics, shape
        group = group.with_assignment(previous)
        changed = dict(group.members)
        for m in rng.sample(names, rng.randint(0, len(names) // 3)):
            del changed[m]
        for _ in range(rng.randint(0, 3)):
            changed[_ident(rng, "n")] = MemberSpec(subscription())
        if not identical:
            for m in rng.sample(list(changed), min(len(changed), rng.randint(0, 3))):
                spec = changed[m]
                changed[m] = MemberSpec(
                    subscription(), spec.rack, spec.instance_id, spec.assignment
                )
        if rng.random() < 0.3:
            described = [
                TopicDescription(d.topic_id, d.name, d.partitions + rng.randint(0, 5))
                for d in described
            ]
            topics = TopicDescriber(described)
        order = list(changed)
        rng.shuffle(order)
        return GroupSpec({m: changed[m] for m in order}), topics, f"{shape}, after {name}"
    if history < 0.6:
        # An arbitrary current target, listed in a shuffled order.
        held: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in names}
        for d in described:
            for p in range(d.partitions):
                if rng.random() < 0.7:
                    held[rng.choice(names)].setdefault(d.topic_id, []).append(p)
        for by_topic in held.values():
            for partitions in by_topic.values():
                rng.shuffle(partitions)
        group = GroupSpec(
            {m: MemberSpec(s.subscribed_topic_ids, None, s.instance_id, held[m])
             for m, s in members.items()}
        )  # fmt: skip
        return group, topics, f"{shape}, arbitrary current target"
    if history < 0.63 and names:
        unknown = uuid.UUID(int=rng.getrandbits(128))
        first = names[0]
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


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_matches_kafkas_server_assignor(name: str, kafka: KafkaServerAssignors) -> None:
    assignor = get_plugin_manager().server_assignor(name)
    shapes: dict[str, int] = {}
    for seed, large in _seeds():
        group, topics, shape = random_case(seed, large)
        shapes[shape] = shapes.get(shape, 0) + 1
        replay = f"seed {seed} ({shape}); replay: {SEED_VARIABLE}={seed}"
        expected = kafka.assign(name, group, topics)
        try:
            got = assignor.assign(group, topics)
        except PartitionAssignorError as error:
            refused: str | None = str(error)
        else:
            refused = None
        if refused is not None or isinstance(expected, str):
            assert refused is not None, (
                f"{name}: Kafka refused ({expected}), coordkit did not; {replay}"
            )
            assert isinstance(expected, str), (
                f"{name}: coordkit refused ({refused}), Kafka did not; {replay}"
            )
            continue
        if got != expected:
            differ = sorted(m for m in group.members if got.members[m] != expected.members[m])
            pytest.fail(
                f"{name} differs from Kafka's for {differ[:3]} on {replay}: coordkit "
                f"{[got.members[m].as_sets() for m in differ[:1]]}, Kafka "
                f"{[expected.members[m].as_sets() for m in differ[:1]]}",
                pytrace=False,
            )
    # Every shape was drawn (a generator change must not quietly drop one).
    if not os.environ.get(SEED_VARIABLE):
        drawn = {s.split(", ", 1)[-1].split(" after")[0] for s in shapes}
        assert {"fresh", "arbitrary current target", "unknown topic"} <= drawn | {
            s.split(", ")[1] for s in shapes
        }
        assert any("after" in s for s in shapes)
        assert any(s.startswith("differing") for s in shapes)
