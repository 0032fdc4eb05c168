"""The history recorder's leader-epoch check: a partition's leader epoch never goes down from
one version of its state node to the next.

Commits are fed in two ways: through a real memory store (so results carry the store's own
``Stat``), and forged, observed in an order of our choosing, to show the check orders writes by
the state node's version and not by the order in which observers happened to run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from coordkit.engine.history import HistoryRecorder
from coordkit.engine.instrument import CommitObserver, InstrumentedStore
from coordkit.engine.states import encode_state, state_path
from coordkit.plugins import get_plugin_manager
from coordkit.store import Create, Delete, MetadataStore, Op, SetData, Stat

STATE = state_path(("t", 0))
PARTITION = "/brokers/topics/t/partitions/0"


def stat(version: int, czxid: int) -> Stat:
    """A ``Stat`` as a store returns it for a ``SetData`` of a node created at ``czxid``."""
    return Stat(czxid, czxid + version, czxid, 0, 0, version, 0, 0, 0, 60, 0)


def state(leader: int, leader_epoch: int) -> bytes:
    return encode_state(leader, leader_epoch, (leader,), 1)


class ForgedCommits(InstrumentedStore):
    """A broker session whose commits the test invents and delivers in any order."""

    def __init__(self) -> None:
        self.observers: list[CommitObserver] = []

    def add_commit_observer(self, observer: CommitObserver) -> None:
        self.observers.append(observer)

    def deliver(self, ops: Sequence[Op], results: Sequence[Any]) -> None:
        for observer in self.observers:
            observer(ops, results)


@pytest.fixture
def recorded_store() -> Iterator[tuple[InstrumentedStore, HistoryRecorder]]:
    """A real memory store session, observed as broker 1's."""
    inner: MetadataStore = get_plugin_manager().store_for(f"memory://history-{uuid.uuid4().hex}")
    store = InstrumentedStore(inner, "broker-1")
    history = HistoryRecorder()
    history.observe(store, 1)
    store.ensure_path(PARTITION)
    yield store, history
    store.close()


def regressions(history: HistoryRecorder) -> list[str]:
    return [p for p in history.violations() if "leader epoch went back" in p]


def test_a_leader_epoch_going_back_on_a_real_store_is_caught(
    recorded_store: tuple[InstrumentedStore, HistoryRecorder],
) -> None:
    store, history = recorded_store
    store.commit([Create(STATE, state(1, 0))])
    store.commit([SetData(STATE, state(2, 3), 0)])
    store.commit([SetData(STATE, state(1, 2), 1)])  # the store accepts it; the check must not
    assert regressions(history) == [
        "partition t-0 (generation 0): leader epoch went back from 3 to 2 "
        "(state versions 1 -> 2, written by brokers 1 -> 1)"
    ]


def test_rising_epochs_and_isr_only_changes_on_a_real_store_pass(
    recorded_store: tuple[InstrumentedStore, HistoryRecorder],
) -> None:
    store, history = recorded_store
    store.commit([Create(STATE, state(1, 0))])
    store.commit([SetData(STATE, state(2, 1), 0)])
    store.commit([SetData(STATE, encode_state(2, 1, (2, 1), 1), 1)])  # ISR grows, same epoch
    store.commit([SetData(STATE, state(1, 2), 2)])
    assert history.violations() == []


def test_writes_are_ordered_by_version_not_by_observation() -> None:
    history = HistoryRecorder()
    one, two = ForgedCommits(), ForgedCommits()
    history.observe(one, 1)
    history.observe(two, 2)
    one.deliver([Create(STATE, state(1, 0))], [STATE])
    # Version 2 (epoch 5) is observed before version 1 (epoch 4): in store order they rise.
    two.deliver([SetData(STATE, state(2, 5))], [stat(2, czxid=100)])
    one.deliver([SetData(STATE, state(1, 4))], [stat(1, czxid=100)])
    assert history.violations() == []

    # Observed in rising order, but the versions say epoch 7 came before epoch 6.
    one.deliver([SetData(STATE, state(1, 6))], [stat(4, czxid=100)])
    two.deliver([SetData(STATE, state(2, 7))], [stat(3, czxid=100)])
    assert regressions(history) == [
        "partition t-0 (generation 0): leader epoch went back from 7 to 6 "
        "(state versions 3 -> 4, written by brokers 2 -> 1)"
    ]


def test_a_topic_created_again_starts_a_new_generation() -> None:
    history = HistoryRecorder()
    controller, leader = ForgedCommits(), ForgedCommits()
    history.observe(controller, 1)
    history.observe(leader, 2)
    controller.deliver([Create(STATE, state(1, 0))], [STATE])
    controller.deliver([SetData(STATE, state(2, 8))], [stat(1, czxid=100)])
    controller.deliver([Delete(STATE), Delete(PARTITION)], [None, None])
    # A leader's write to the old node, committed before the deletion but observed after it
    # (its thread ran its observers late): the node's creation zxid says which node it was.
    leader.deliver([SetData(STATE, encode_state(2, 8, (2, 1), 1))], [stat(2, czxid=100)])
    # The topic created again: epochs start over on a new node.
    controller.deliver([Create(STATE, state(1, 0))], [STATE])
    controller.deliver([SetData(STATE, state(3, 1))], [stat(1, czxid=300)])
    leader.deliver([SetData(STATE, encode_state(3, 1, (3, 1), 1))], [stat(2, czxid=300)])
    controller.deliver([SetData(STATE, state(1, 2))], [stat(3, czxid=300)])
    assert history.violations() == []
    assert len(history.writes) == 7


def test_one_version_committed_twice_is_caught() -> None:
    history = HistoryRecorder()
    one, two = ForgedCommits(), ForgedCommits()
    history.observe(one, 1)
    history.observe(two, 2)
    one.deliver([SetData(STATE, state(1, 1))], [stat(1, czxid=100)])
    two.deliver([SetData(STATE, state(2, 1))], [stat(1, czxid=100)])
    problems = history.violations()
    assert (
        "partition t-0 (generation 0): version 1 of its state node was committed twice "
        "(by brokers 1 and 2)"
    ) in problems
    # Two leaders with epoch 1 is the split-brain check's to report too.
    assert (
        "partition t-0 (generation 0) had leaders [1, 2] with the same leader epoch 1" in problems
    )
