"""The controller's maps over a lender's topics (a warm hand-over lends the image's topics without
copying them): under random reads, writes, deletions and scans, each map behaves exactly as a
plain dict or set filled with the lent contents would."""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, MutableMapping, Sequence
from typing import Any, TypeVar

import numpy as np
import pytest

from coordkit.engine.controller.assignment_map import AssignmentMap, AssignmentVersions, TopicSet
from coordkit.engine.controller.partition_map import (
    READABLE,
    STATE_DTYPE,
    PartitionInfo,
    PartitionMap,
    TopicColumns,
)
from coordkit.engine.states import LeaderIsr

Replicas = tuple[int, ...]
K = TypeVar("K")
TABLE: list[Replicas] = [(), (0, 1), (1, 2), (2, 0), (1,)]


class Lender:
    """A lender as an image is one: whole regular topics, read-only."""

    def __init__(self, rng: random.Random, topics: int):
        self.assignments: dict[str, list[Replicas]] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self.versions: dict[str, int] = {}
        for index in range(topics):
            name = f"t{index}"
            count = rng.randint(1, 4)
            isr = np.array([rng.randrange(1, len(TABLE)) for _ in range(count)], dtype="i4")
            rows = np.zeros(count, dtype=STATE_DTYPE)
            rows["isr"] = isr
            rows["leader"] = [TABLE[i][0] for i in isr.tolist()]
            rows["leader_epoch"] = rng.randrange(5)
            rows["status"] = READABLE
            self.assignments[name] = [TABLE[i] for i in isr.tolist()]
            self.arrays[name] = rows
            self.versions[name] = rng.randrange(1_000)
        self._naming: dict[int, set[str]] = {}
        for name, rows in self.arrays.items():
            for leader, isr in zip(rows["leader"].tolist(), rows["isr"].tolist(), strict=True):
                for broker in (leader, *TABLE[isr]):
                    self._naming.setdefault(broker, set()).add(name)
        self.built: list[str] = []

    def names(self) -> Collection[str]:
        return self.assignments.keys()

    def replicas(self, topic: str) -> Sequence[Replicas]:
        return self.assignments[topic]

    def mzxid(self, topic: str) -> int:
        return self.versions[topic]

    def naming(self) -> Mapping[int, Collection[str]]:
        return self._naming

    def rows(self, topic: str) -> int:
        return len(self.arrays[topic])

    def columns(self, topic: str) -> TopicColumns:
        self.built.append(topic)
        census = frozenset(b for b, names in self._naming.items() if topic in names)
        return TopicColumns(self.assignments[topic], self.arrays[topic], TABLE, census)

    def states(self) -> dict[tuple[str, int], PartitionInfo]:
        out = {}
        for name, rows in self.arrays.items():
            for partition, row in enumerate(rows.tolist()):
                leader, epoch, c_epoch, version, _mzxid, isr, _status = row
                state = LeaderIsr(leader, epoch, TABLE[isr], c_epoch, version)
                out[(name, partition)] = PartitionInfo(self.assignments[name][partition], state)
        return out


def _delete_from_both(mapping: MutableMapping[K, Any], model: dict[K, Any], key: K) -> None:
    """``del`` on the map under test and on its model: both remove the key or both refuse."""
    if key in model:
        del mapping[key]
        del model[key]
    else:
        with pytest.raises(KeyError):
            del mapping[key]


def _view(info: PartitionInfo) -> tuple[Replicas, LeaderIsr | None]:
    return info.replicas, info.state


@pytest.mark.parametrize("seed", range(6))
def test_a_partition_map_over_lent_topics_behaves_as_a_dict(seed: int) -> None:
    rng = random.Random(seed)
    lender = Lender(rng, 8)
    parts = PartitionMap()
    parts.add_lent(lender)
    model = lender.states()
    assert len(parts) == len(model)
    assert parts.lent_topics == 8
    assert lender.built == []
    for _ in range(80):
        tp = (f"t{rng.randrange(10)}", rng.randrange(5))
        roll = rng.random()
        if roll < 0.3:
            assert (tp in parts) == (tp in model)
            if tp in model:
                assert _view(parts[tp]) == _view(model[tp])
        elif roll < 0.5:
            info = PartitionInfo((9,), LeaderIsr(9, rng.randrange(9), (9,), 1, 0))
            parts[tp] = info
            model[tp] = info
        elif roll < 0.6:
            _delete_from_both(parts, model, tp)
        elif roll < 0.7:
            live = frozenset(rng.sample(range(4), rng.randint(0, 4)))
            expected = sorted(
                tp
                for tp, info in model.items()
                if info.state is None
                or info.state.leader not in live
                or not live.issuperset(info.state.isr)
            )
            assert sorted(parts.needing_attention(live)) == expected
        elif roll < 0.8:
            broker = rng.randrange(-1, 4)
            expected = sorted(
                tp
                for tp, info in model.items()
                if info.state is not None
                and (info.state.leader == broker or broker in info.state.isr)
            )
            assert sorted(parts.naming(broker)) == expected
        elif roll < 0.85:
            topic = f"t{rng.randrange(10)}"
            held = [p for t, p in model if t == topic]
            parts.forget_topic(topic, held)
            for partition in held:
                del model[(topic, partition)]
        assert len(parts) == len(model)
    # Each topic was built at most once, and a whole scan sees exactly the model.
    assert len(lender.built) == len(set(lender.built))
    assert {tp: (r, s) for tp, r, s in parts.states()} == {
        tp: _view(info) for tp, info in model.items()
    }
    assert parts.lent_topics == 0


def test_a_scan_that_concerns_no_lent_topic_builds_none() -> None:
    lender = Lender(random.Random(1), 30)
    parts = PartitionMap()
    parts.add_lent(lender)
    assert parts.needing_attention(frozenset({0, 1, 2})) == []
    assert parts.naming(7) == []
    assert lender.built == []
    dead = sorted(parts.needing_attention(frozenset({0, 1})))
    assert dead == sorted(
        tp for tp, info in lender.states().items() if info.state and 2 in info.state.isr
    )
    # Built for the scan: exactly the topics naming broker 2.
    assert set(lender.built) == set(lender.naming()[2])


@pytest.mark.parametrize("seed", range(6))
def test_assignments_versions_and_topic_sets_over_a_lender_behave_as_plain_ones(
    seed: int,
) -> None:
    rng = random.Random(seed)
    lender = Lender(rng, 6)
    assignments = AssignmentMap()
    assignments.add_list("own", [(1,), (2,)])
    assignments.add_lent(lender)
    versions = AssignmentVersions()
    versions["own"] = 5
    versions.add_lent(lender)
    nodes = TopicSet({"own"})
    nodes.add_lent(lender.names())
    model_assignments = {"own": {0: (1,), 1: (2,)}} | {
        name: dict(enumerate(replicas)) for name, replicas in lender.assignments.items()
    }
    model_versions = {"own": 5} | dict(lender.versions)
    model_nodes = {"own", *lender.names()}
    for _ in range(120):
        topic = rng.choice(["own", "new", *(f"t{i}" for i in range(8))])
        roll = rng.random()
        if roll < 0.25:
            assert (topic in assignments) == (topic in model_assignments)
            assert assignments.get(topic) == model_assignments.get(topic)
            assert list(assignments.partitions(topic)) == sorted(model_assignments.get(topic, {}))
            assert versions.get(topic) == model_versions.get(topic)
            assert (topic in nodes) == (topic in model_nodes)
        elif roll < 0.45:
            assignment: dict[int, Replicas] = {0: (rng.randrange(4),)}
            assignments[topic] = assignment
            model_assignments[topic] = assignment
            versions[topic] = rng.randrange(1_000, 2_000)
            model_versions[topic] = versions[topic]
            nodes.add(topic)
            model_nodes.add(topic)
        elif roll < 0.65:
            _delete_from_both(assignments, model_assignments, topic)
            assert versions.pop(topic, None) == model_versions.pop(topic, None)
            nodes.discard(topic)
            model_nodes.discard(topic)
        elif roll < 0.7:
            assignments.add_list(topic, [(3,)])
            model_assignments[topic] = {0: (3,)}
        assert len(assignments) == len(model_assignments)
        assert sorted(assignments) == sorted(model_assignments)
        assert len(versions) == len(model_versions)
        assert dict(versions) == model_versions
        assert set(nodes) == model_nodes
        assert len(nodes) == len(model_nodes)
    assert {name: assignments[name] for name in assignments} == model_assignments
