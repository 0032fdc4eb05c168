"""The built-in assignment workloads. Each draws every random choice from its seed.

``kafka-grid``
    Kafka's JMH assignor benchmark (``ClientSideAssignorBenchmark``): ``members`` consumers,
    ``members * partitions_per_member`` partitions spread evenly over ``topics`` topics, 3 racks
    with two replicas per partition on racks ``p % 3`` and ``(p + 1) % 3``, consumer ``i`` on rack
    ``i % 3`` when ``racks`` is set. Homogeneous: everyone subscribes to every topic.
    Heterogeneous: consumer ``i`` subscribes to topics ``i`` and ``i + 1`` (mod topics), and when
    there are fewer consumers than topics everyone also takes the topics nobody else has (what
    Kafka's benchmark intends; its code ends up passing the full list). Step 0 is the benchmark's
    full assignment; with ``rebalance`` a new member subscribing to everything joins (the
    benchmark's ``simulateRebalanceTrigger``).
``single-partition-topics``
    Ten one-partition topics over three consumers: the case where ``range`` piles everything onto
    the first consumer. A fourth consumer then joins.
``random-cluster``
    Random topic sizes, random subscriptions (each topic with probability ``density``), random
    racks and replica placement, then ``events`` random changes of every kind.
``zipf-load``
    Identical subscriptions, per-partition loads following Zipf's law with exponent ``exponent``
    (ranks shuffled over the partitions, scaled to a mean of 1); then a member joins and one leaves.
``churn``
    A group living through ``steps`` events: with ``mix=members`` members join, leave and crash;
    with ``mix=all`` partitions are also added, topics created (picked up by every member) and
    deleted, and subscriptions change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from coordkit.lab import LabError, Param, Params, resolve_params
from coordkit.strategies.assignment import TopicMetadata
from coordkit_assignors.lab.events import (
    GroupEvent,
    MemberCrashed,
    MemberJoined,
    MemberLeft,
    PartitionsAdded,
    SubscriptionChanged,
    TopicCreated,
    TopicDeleted,
)
from coordkit_assignors.lab.simulation import AssignmentCase, AssignmentWorkload, Member

JMH_RACKS = 3


def member_name(index: int) -> str:
    """Member ids sort in creation order (Kafka orders dynamic members by id)."""
    return f"consumer-{index:05d}"


def topic_name(index: int) -> str:
    return f"topic-{index:04d}"


def _int(params: Params, key: str) -> int:
    value = params[key]
    assert isinstance(value, int)
    return value


def _float(params: Params, key: str) -> float:
    value = params[key]
    assert isinstance(value, int | float)
    return float(value)


def _positive(workload: str, params: Params, *keys: str) -> None:
    for key in keys:
        value = params[key]
        if not isinstance(value, int | float) or value < 1:
            raise LabError(
                f"workload {workload!r} parameter {key!r} must be at least 1, got {value!r}"
            )


class KafkaGridWorkload(AssignmentWorkload):
    name: ClassVar[str] = "kafka-grid"
    description: ClassVar[str] = (
        "Kafka's JMH assignor benchmark grid: members x partitions per member x topics, "
        "homogeneous or heterogeneous subscriptions, optional racks; then one member joins"
    )
    defaults: ClassVar[Mapping[str, Param]] = {
        "members": 100,
        "partitions_per_member": 10,
        "topics": 10,
        "subscription": "homogeneous",
        "racks": False,
        "rebalance": True,
    }

    def generate(self, params: Params, seed: int) -> AssignmentCase:
        _positive(self.name, params, "members", "partitions_per_member", "topics")
        members = _int(params, "members")
        topics = _int(params, "topics")
        per_topic = members * _int(params, "partitions_per_member") // topics
        if per_topic < 1:
            raise LabError(
                f"workload {self.name!r}: {members} members x {params['partitions_per_member']} "
                f"partitions per member cannot fill {topics} topics"
            )
        subscription = params["subscription"]
        if subscription not in {"homogeneous", "heterogeneous"}:
            raise LabError(
                f"workload {self.name!r} parameter 'subscription' must be homogeneous or "
                f"heterogeneous, got {subscription!r}"
            )
        racked = bool(params["racks"])
        replica_racks = None
        if racked:
            replica_racks = tuple(
                (f"rack{p % JMH_RACKS}", f"rack{(p + 1) % JMH_RACKS}") for p in range(per_topic)
            )
        names = tuple(topic_name(t) for t in range(topics))
        metadata = {name: TopicMetadata(per_topic, replica_racks) for name in names}

        def rack(index: int) -> str | None:
            return f"rack{index % JMH_RACKS}" if racked else None

        group: list[Member] = []
        if subscription == "homogeneous":
            group = [Member(member_name(i), names, rack(i)) for i in range(members)]
        else:
            covered = min(members, topics - 1)  # highest topic index consumers i, i+1 reach
            rest = names[covered + 1 :]
            group = [
                Member(member_name(i), (names[i % topics], names[(i + 1) % topics], *rest), rack(i))
                for i in range(members)
            ]
        events: list[GroupEvent] = []
        if params["rebalance"]:
            events.append(MemberJoined(member_name(members), names, rack(members)))
        return AssignmentCase(metadata, group, events)

    def feasible(self, params: Params) -> bool:
        """At least one partition per topic."""
        resolved = resolve_params(self, params)
        partitions = _int(resolved, "members") * _int(resolved, "partitions_per_member")
        return partitions >= _int(resolved, "topics") >= 1

    def cost(self, params: Params) -> float:
        resolved = resolve_params(self, params)
        members = _int(resolved, "members")
        partitions = members * _int(resolved, "partitions_per_member")
        return float(partitions) * (2.0 if resolved["rebalance"] else 1.0)


class SinglePartitionTopicsWorkload(AssignmentWorkload):
    name: ClassVar[str] = "single-partition-topics"
    description: ClassVar[str] = (
        "many one-partition topics over a few consumers (range piles them onto the first); "
        "then a consumer joins"
    )
    defaults: ClassVar[Mapping[str, Param]] = {"members": 3, "topics": 10}

    def generate(self, params: Params, seed: int) -> AssignmentCase:
        _positive(self.name, params, "members", "topics")
        members, topics = _int(params, "members"), _int(params, "topics")
        names = [topic_name(t) for t in range(topics)]
        group = [Member(member_name(i), names) for i in range(members)]
        return AssignmentCase(
            dict.fromkeys(names, 1), group, [MemberJoined(member_name(members), names)]
        )


class ZipfLoadWorkload(AssignmentWorkload):
    name: ClassVar[str] = "zipf-load"
    description: ClassVar[str] = (
        "identical subscriptions, per-partition load following Zipf's law; then a member joins "
        "and one leaves"
    )
    defaults: ClassVar[Mapping[str, Param]] = {
        "members": 10,
        "topics": 8,
        "partitions_per_topic": 32,
        "exponent": 0.9,
    }

    def generate(self, params: Params, seed: int) -> AssignmentCase:
        _positive(self.name, params, "members", "topics", "partitions_per_topic")
        rng = np.random.default_rng(seed)
        members, topics = _int(params, "members"), _int(params, "topics")
        per_topic = _int(params, "partitions_per_topic")
        total = topics * per_topic
        ranks = rng.permutation(total) + 1
        loads = 1.0 / np.power(ranks.astype(np.float64), _float(params, "exponent"))
        loads *= total / loads.sum()
        names = [topic_name(t) for t in range(topics)]
        metadata = {
            name: TopicMetadata(
                per_topic, loads=loads[i * per_topic : (i + 1) * per_topic].tolist()
            )
            for i, name in enumerate(names)
        }
        group = [Member(member_name(i), names) for i in range(members)]
        leaver = member_name(int(rng.integers(members)))
        events: list[GroupEvent] = [MemberJoined(member_name(members), names), MemberLeft(leaver)]
        return AssignmentCase(metadata, group, events)

    def cost(self, params: Params) -> float:
        resolved = resolve_params(self, params)
        return float(_int(resolved, "topics") * _int(resolved, "partitions_per_topic") * 3)


# -- random groups and random event sequences -----------------------------------------------------

#: Relative weights of event kinds for ``mix=members`` and ``mix=all``.
EVENT_MIXES: dict[str, dict[str, float]] = {
    "members": {"join": 0.4, "leave": 0.35, "crash": 0.25},
    "all": {
        "join": 0.25,
        "leave": 0.2,
        "crash": 0.15,
        "add-partitions": 0.12,
        "create-topic": 0.1,
        "delete-topic": 0.08,
        "resubscribe": 0.1,
    },
}


class _GroupState:
    """The generator's running view of the group, so every event it draws is valid."""

    def __init__(
        self,
        rng: np.random.Generator,
        members: dict[str, tuple[str, ...]],
        topics: dict[str, int],
        racks: int,
        partitions_per_topic: int,
        join_density: float | None = None,
    ):
        self.rng = rng
        self.join_density = join_density
        self.members = members
        self.topics = topics
        self.racks = racks
        self.partitions_per_topic = partitions_per_topic
        self.next_member = len(members)
        self.next_topic = len(topics)

    def _rack(self) -> str | None:
        return f"rack{int(self.rng.integers(self.racks))}" if self.racks else None

    def _pick(self, names: list[str]) -> str:
        return names[int(self.rng.integers(len(names)))]

    def _replica_racks(self, partitions: int) -> list[tuple[str, ...]] | None:
        if not self.racks:
            return None
        return random_replica_racks(self.rng, partitions, self.racks)

    def draw(self, mix: Mapping[str, float]) -> GroupEvent:
        kinds = list(mix)
        weights = np.asarray([mix[k] for k in kinds], dtype=np.float64)
        kind = kinds[int(self.rng.choice(len(kinds), p=weights / weights.sum()))]
        if kind in {"leave", "crash"} and len(self.members) < 2:
            kind = "join"
        if kind == "delete-topic" and len(self.topics) < 2:
            kind = "create-topic"
        if kind == "resubscribe" and not self.members:
            kind = "join"
        return self._make(kind)

    def _make(self, kind: str) -> GroupEvent:
        topic_names = list(self.topics)
        if kind == "join":
            name = member_name(self.next_member)
            self.next_member += 1
            if self.join_density is None:
                subscribed = tuple(topic_names)
            else:
                subscribed = random_subscription(self.rng, topic_names, self.join_density)
            self.members[name] = subscribed
            return MemberJoined(name, subscribed, self._rack())
        if kind in {"leave", "crash"}:
            name = self._pick(list(self.members))
            del self.members[name]
            return MemberLeft(name) if kind == "leave" else MemberCrashed(name)
        if kind == "add-partitions":
            topic = self._pick(topic_names)
            count = int(self.rng.integers(1, max(1, self.partitions_per_topic // 2) + 1))
            old = self.topics[topic]
            self.topics[topic] = old + count
            return PartitionsAdded(topic, count, replica_racks=self._replica_racks(count))
        if kind == "create-topic":
            topic = topic_name(self.next_topic)
            self.next_topic += 1
            count = self.partitions_per_topic
            self.topics[topic] = count
            subscribers = tuple(self.members)
            for member in subscribers:
                self.members[member] = (*self.members[member], topic)
            return TopicCreated(topic, count, subscribers, replica_racks=self._replica_racks(count))
        if kind == "delete-topic":
            topic = self._pick(topic_names)
            del self.topics[topic]
            return TopicDeleted(topic)
        if kind == "resubscribe":
            member = self._pick(list(self.members))
            subscribed = random_subscription(self.rng, topic_names, 0.5)
            self.members[member] = subscribed
            return SubscriptionChanged(member, subscribed)
        raise LabError(f"unknown event kind {kind!r}; known: {', '.join(EVENT_MIXES['all'])}")


def random_subscription(
    rng: np.random.Generator, topics: list[str], density: float
) -> tuple[str, ...]:
    """Each topic with probability ``density``, and at least one."""
    chosen = rng.random(len(topics)) < density
    if not chosen.any():
        chosen[int(rng.integers(len(topics)))] = True
    return tuple(t for t, keep in zip(topics, chosen.tolist(), strict=True) if keep)


def random_replica_racks(
    rng: np.random.Generator, partitions: int, racks: int, replication: int = 2
) -> list[tuple[str, ...]]:
    """For each partition, ``replication`` distinct racks chosen uniformly."""
    width = min(replication, racks)
    picks = np.argsort(rng.random((partitions, racks)), axis=1)[:, :width]
    return [tuple(f"rack{r}" for r in row) for row in picks.tolist()]


def _mix(workload: str, params: Params) -> dict[str, float]:
    mix = params["mix"]
    if mix not in EVENT_MIXES:
        raise LabError(
            f"workload {workload!r} parameter 'mix' must be one of {', '.join(EVENT_MIXES)}, "
            f"got {mix!r}"
        )
    return EVENT_MIXES[str(mix)]


class RandomClusterWorkload(AssignmentWorkload):
    name: ClassVar[str] = "random-cluster"
    description: ClassVar[str] = (
        "random topic sizes, subscriptions, racks and replica placement; then random events "
        "of every kind"
    )
    defaults: ClassVar[Mapping[str, Param]] = {
        "members": 20,
        "topics": 10,
        "max_partitions": 32,
        "density": 0.5,
        "racks": 3,
        "events": 5,
    }

    def generate(self, params: Params, seed: int) -> AssignmentCase:
        _positive(self.name, params, "members", "topics", "max_partitions")
        rng = np.random.default_rng(seed)
        members, topics = _int(params, "members"), _int(params, "topics")
        racks = _int(params, "racks")
        density = _float(params, "density")
        sizes = rng.integers(1, _int(params, "max_partitions") + 1, size=topics).tolist()
        names = [topic_name(t) for t in range(topics)]
        metadata = {
            name: TopicMetadata(size, random_replica_racks(rng, size, racks) if racks else None)
            for name, size in zip(names, sizes, strict=True)
        }
        group = []
        for i in range(members):
            rack = f"rack{int(rng.integers(racks))}" if racks else None
            group.append(Member(member_name(i), random_subscription(rng, names, density), rack))
        state = _GroupState(
            rng,
            {m.name: m.topics for m in group},
            dict(zip(names, sizes, strict=True)),
            racks,
            max(1, _int(params, "max_partitions") // 2),
            join_density=density,
        )
        events = [state.draw(EVENT_MIXES["all"]) for _ in range(_int(params, "events"))]
        return AssignmentCase(metadata, group, events)

    def cost(self, params: Params) -> float:
        resolved = resolve_params(self, params)
        partitions = _int(resolved, "topics") * _int(resolved, "max_partitions") / 2
        return partitions * (_int(resolved, "events") + 1)


class ChurnWorkload(AssignmentWorkload):
    name: ClassVar[str] = "churn"
    description: ClassVar[str] = (
        "a sequence of members joining, leaving and crashing (mix=all: also partitions added, "
        "topics created and deleted, subscriptions changed)"
    )
    defaults: ClassVar[Mapping[str, Param]] = {
        "members": 20,
        "topics": 8,
        "partitions_per_topic": 12,
        "steps": 30,
        "mix": "members",
        "racks": 0,
    }

    def generate(self, params: Params, seed: int) -> AssignmentCase:
        _positive(self.name, params, "members", "topics", "partitions_per_topic")
        mix = _mix(self.name, params)
        rng = np.random.default_rng(seed)
        members, topics = _int(params, "members"), _int(params, "topics")
        per_topic = _int(params, "partitions_per_topic")
        racks = _int(params, "racks")
        names = [topic_name(t) for t in range(topics)]
        metadata = {
            name: TopicMetadata(
                per_topic, random_replica_racks(rng, per_topic, racks) if racks else None
            )
            for name in names
        }
        group = [
            Member(member_name(i), names, f"rack{i % racks}" if racks else None)
            for i in range(members)
        ]
        state = _GroupState(
            rng,
            {m.name: m.topics for m in group},
            dict.fromkeys(names, per_topic),
            racks,
            per_topic,
        )
        events = [state.draw(mix) for _ in range(_int(params, "steps"))]
        return AssignmentCase(metadata, group, events)

    def cost(self, params: Params) -> float:
        resolved = resolve_params(self, params)
        partitions = _int(resolved, "topics") * _int(resolved, "partitions_per_topic")
        return (
            float(partitions)
            * (_int(resolved, "steps") + 1)
            * math.log2(_int(resolved, "members") + 1)
        )


BUILTIN_WORKLOADS: tuple[AssignmentWorkload, ...] = (
    KafkaGridWorkload(),
    SinglePartitionTopicsWorkload(),
    RandomClusterWorkload(),
    ZipfLoadWorkload(),
    ChurnWorkload(),
)
