"""Controller election, failover and fencing, with both controller election strategies."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from coordkit.engine import (
    Controller,
    ControllerFencedError,
    EngineConfig,
    Observers,
    states,
)
from coordkit.engine.fencing import FencedWriter
from coordkit.engine.instrument import InstrumentedStore
from coordkit.errors import NoNodeError
from coordkit.kafka import layout
from coordkit.store import MetadataStore, SetData
from coordkit.strategies.elections import ControllerTerm
from harness.backends import Backend
from harness.waiting import wait_for

STRATEGIES = ["kafka", "latch", "warm-standby"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_first_controller_gets_epoch_one(
    make_cluster: Callable[..., Any], settled: Callable[..., Any], strategy: str
) -> None:
    cluster = make_cluster(3, config=EngineConfig(controller_election=strategy))
    view = settled(cluster)
    assert view.epoch == 1
    assert view.controller in (0, 1, 2)
    holders = [b for b in cluster.brokers.values() if b.is_controller]
    assert [b.broker_id for b in holders] == [view.controller]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_failover_when_the_controller_session_ends(
    make_cluster: Callable[..., Any],
    until: Callable[..., Any],
    backend: Backend,
    strategy: str,
) -> None:
    config = EngineConfig(controller_election=strategy, auto_leader_rebalance=False)
    cluster = make_cluster(3, config=config)
    cluster.create_topic("a", 6, 2)
    cluster.create_topic("b", 3, 1)
    before = until(cluster, lambda v: len(v.partitions) == 9, "topics to get leaders")
    old = before.controller
    old_session = cluster.raw_store(old).session_id

    backend.expire(cluster.raw_store(old))

    after = until(
        cluster,
        lambda v: v.epoch == before.epoch + 1 and old in v.brokers and not v.offline(),
        "a new controller, the old broker back on a new session, every partition led",
    )
    assert cluster.raw_store(old).session_id != old_session
    # Exactly one broker holds a controller term: the one /controller names, at the new epoch.
    holders = [b for b in cluster.brokers.values() if b.is_controller]
    assert [b.broker_id for b in holders] == [after.controller]
    assert holders[0].controller is not None
    assert holders[0].controller.epoch == after.epoch
    for p in after.partitions:
        old_state = before.partition(*p.tp)
        if p.leader_epoch > old_state.leader_epoch:
            # Re-elected (the new controller saw the broker gone): by the new controller.
            assert p.controller_epoch == after.epoch
        else:
            # Untouched: the broker it names came back before anyone saw it gone.
            assert (p.leader, p.isr) == (old_state.leader, old_state.isr)
    assert cluster.history is not None
    assert cluster.history.violations() == []
    assert cluster.history.epochs() == [before.epoch, after.epoch]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_controller_stops_with_its_session_before_its_candidate_hears(
    make_cluster: Callable[..., Any],
    until: Callable[..., Any],
    backend: Backend,
    strategy: str,
) -> None:
    """The race CI once lost: the old controller's election candidate had not yet handled LOST
    when its broker was back on a new session, so two brokers said they were controller. The
    term ends with the session, whatever the candidate's thread is doing (Kafka's processExpire
    resigns before the broker registers again)."""
    cluster = make_cluster(3, config=EngineConfig(controller_election=strategy))
    cluster.create_topic("a", 3, 2)
    before = until(cluster, lambda v: len(v.partitions) == 3, "a to get leaders")
    old = cluster.brokers[before.controller]
    gate = threading.Event()
    # Hold the old controller's candidate thread (a slow machine does this by itself).
    old._candidate._worker.post(gate.wait, 30)
    try:
        backend.expire(cluster.raw_store(old.broker_id))
        until(
            cluster,
            lambda v: v.epoch == before.epoch + 1 and old.broker_id in v.brokers and old.registered,
            "a new controller and the old broker registered on a new session",
        )
        assert not old.is_controller
        holders = [b.broker_id for b in cluster.brokers.values() if b.is_controller]
        assert len(holders) == 1
        assert holders[0] != old.broker_id
    finally:
        gate.set()
    after = until(cluster, lambda v: not v.offline(), "every partition led")
    assert [b.broker_id for b in cluster.brokers.values() if b.is_controller] == [after.controller]
    assert cluster.history is not None
    assert cluster.history.violations() == []


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_failover_when_the_controller_broker_crashes(
    make_cluster: Callable[..., Any], until: Callable[..., Any], strategy: str
) -> None:
    cluster = make_cluster(4, config=EngineConfig(controller_election=strategy))
    cluster.create_topic("t", 8, 3)
    before = until(cluster, lambda v: len(v.partitions) == 8, "t to get leaders")
    cluster.kill(before.controller)
    after = until(
        cluster,
        lambda v: v.controller not in (None, before.controller) and not v.offline(),
        "failover to a live broker",
    )
    assert after.epoch == before.epoch + 1
    for p in after.partitions:
        old_state = before.partition(*p.tp)
        assert before.controller not in p.isr
        if old_state.leader == before.controller:
            # Offline election by the new controller: first live in-sync replica.
            assert p.leader == next(r for r in old_state.isr if r != before.controller)
            assert (p.leader_epoch, p.controller_epoch) == (old_state.leader_epoch + 1, after.epoch)
    assert cluster.history is not None
    assert cluster.history.violations() == []


def test_latch_wakes_only_the_next_candidate(
    make_cluster: Callable[..., Any], settled: Callable[..., Any]
) -> None:
    cluster = make_cluster(5, config=EngineConfig(controller_election="latch"))
    first = settled(cluster)
    candidates = {b: broker._candidate for b, broker in cluster.brokers.items()}
    wait_for(
        lambda: all(c.quiet() for c in candidates.values()),  # type: ignore[union-attr]
        what="every candidate to watch",
    )
    wakeups = {b: c.wakeups for b, c in candidates.items()}  # type: ignore[union-attr]
    cluster.kill(first.controller)
    second = settled(cluster, "the next candidate to take over")
    assert second.epoch == first.epoch + 1
    woken = [
        b
        for b, c in candidates.items()
        if b != first.controller and c.wakeups > wakeups[b]  # type: ignore[union-attr]
    ]
    assert woken == [second.controller]


def test_kafka_strategy_wakes_every_broker(
    make_cluster: Callable[..., Any], settled: Callable[..., Any]
) -> None:
    cluster = make_cluster(5, config=EngineConfig(controller_election="kafka"))
    first = settled(cluster)
    candidates = {b: broker._candidate for b, broker in cluster.brokers.items()}
    wait_for(
        lambda: all(c.quiet() for c in candidates.values()),  # type: ignore[union-attr]
        what="every candidate to watch",
    )
    wakeups = {b: c.wakeups for b, c in candidates.items()}  # type: ignore[union-attr]
    cluster.kill(first.controller)
    settled(cluster, "a new controller")
    others = sorted(b for b in cluster.brokers if b != first.controller)

    def woken() -> list[int]:
        return sorted(
            b
            for b, c in candidates.items()
            if b != first.controller and c.wakeups > wakeups[b]  # type: ignore[union-attr]
        )

    # A candidate's watch delivery can trail the new controller settling: wait for all of them.
    wait_for(lambda: woken() == others, what=f"every other broker woken (woken: {woken()})")
    assert woken() == others


def test_deposed_controller_writes_are_rejected(
    make_cluster: Callable[..., Any],
    until: Callable[..., Any],
    open_session: Callable[[], MetadataStore],
) -> None:
    cluster = make_cluster(3, config=EngineConfig(auto_leader_rebalance=False))
    stale_term, after = _deposed(cluster, until, 3)

    # A zombie of the old term, on a live session, tries to write: the store refuses.
    session = open_session()
    path = states.state_path(("t", 0))
    data, stat = session.get(path)
    forged = states.encode_state(2, 99, (2,), stale_term.epoch)
    with pytest.raises(ControllerFencedError, match=f"epoch {stale_term.epoch} is fenced"):
        FencedWriter(session, stale_term).commit([SetData(path, forged, stat.version)])
    assert session.get(path)[0] == data

    # A whole zombie controller: its first election write is fenced, it stops and reports it.
    fenced: list[ControllerTerm] = []
    config = EngineConfig(auto_leader_rebalance=False)
    zombie = _zombie(session, stale_term, cluster, config, on_fenced=fenced.append)
    leader = next(b for b in after.brokers if any(p.leader == b for p in after.partitions))
    future = zombie.controlled_shutdown(leader)  # must move leaders: writes
    with pytest.raises(ControllerFencedError):
        future.result(timeout=20)
    assert fenced == [stale_term]
    assert not zombie.active
    assert cluster.view().partitions == after.partitions
    assert cluster.history is not None
    assert cluster.history.violations() == []


def test_a_fenced_controller_stops_sending_its_batches(
    make_cluster: Callable[..., Any],
    until: Callable[..., Any],
    open_session: Callable[[], MetadataStore],
) -> None:
    """Batches go out as they are planned; once one is fenced, only those already in flight are
    sent: a deposed controller does not send the rest of a large shutdown's writes."""
    cluster = make_cluster(3, config=EngineConfig(auto_leader_rebalance=False))
    stale_term, after = _deposed(cluster, until, 60)

    config = EngineConfig(auto_leader_rebalance=False, write_batch_ops=4, write_concurrency=2)
    session = InstrumentedStore(open_session())
    zombie = _zombie(session, stale_term, cluster, config)
    # Every partition names the broker (RF 3 of 3 brokers): 60 writes, 15 batches of 4.
    target = next(b for b in after.brokers if any(p.leader == b for p in after.partitions))
    sent = session.counts.multis
    with pytest.raises(ControllerFencedError):
        zombie.controlled_shutdown(target).result(timeout=20)
    attempted = session.counts.multis - sent
    assert 1 <= attempted <= config.write_concurrency, (
        f"{attempted} batches sent by a fenced controller (at most the in-flight window)"
    )
    assert cluster.view().partitions == after.partitions


def _deposed(
    cluster: Any, until: Callable[..., Any], partitions: int
) -> tuple[ControllerTerm, Any]:
    """Topic ``t`` of ``partitions`` (RF 3) led, then its controller killed: the dead
    controller's term and the view once a new controller is elected."""
    cluster.create_topic("t", partitions, 3)
    before = until(cluster, lambda v: len(v.partitions) == partitions, "t to get leaders")
    holder = cluster.broker(before.controller)
    assert holder.controller is not None
    stale_term = holder.controller.term
    cluster.kill(before.controller)
    return stale_term, until(cluster, lambda v: v.epoch == before.epoch + 1, "a new controller")


def _zombie(
    session: MetadataStore,
    term: ControllerTerm,
    cluster: Any,
    config: EngineConfig,
    on_fenced: Callable[[ControllerTerm], None] = lambda term: None,
) -> Controller:
    """A controller of a stale ``term`` on a live session, started and loaded."""
    zombie = Controller(
        session,
        term,
        config=config,
        clock=cluster.clock,
        observers=Observers(),
        on_fenced=on_fenced,
        strategies=cluster.strategies,
    )
    zombie.start()
    wait_for(zombie.ready.is_set, what="the zombie to load")
    return zombie


def test_controller_resigns_when_fenced(
    make_cluster: Callable[..., Any],
    settled: Callable[..., Any],
    open_session: Callable[[], MetadataStore],
) -> None:
    cluster = make_cluster(2)
    first = settled(cluster)
    # Someone moves the epoch on behind the controller's back (as a rival's election would).
    session = open_session()
    data, stat = session.get(layout.CONTROLLER_EPOCH)
    session.set(layout.CONTROLLER_EPOCH, str(int(data) + 1).encode(), stat.version)
    cluster.create_topic("t", 2, 2)  # the next controller write is fenced
    holder = cluster.broker(first.controller)
    wait_for(
        lambda: holder.controller is None or holder.controller.epoch > first.epoch,
        what="the fenced controller to resign",
    )
    again = settled(cluster, "a controller to be elected again")
    assert again.epoch > first.epoch + 1
    wait_for(
        lambda: len(cluster.view().partitions) == 2 and not cluster.view().offline(),
        what="the new controller to initialise t",
    )


def test_controller_epoch_starts_at_zero_when_missing(
    open_session: Callable[[], MetadataStore],
    make_cluster: Callable[..., Any],
    settled: Callable[..., Any],
) -> None:
    session = open_session()
    with pytest.raises(NoNodeError):
        session.get(layout.CONTROLLER_EPOCH)
    cluster = make_cluster(1)
    assert settled(cluster).epoch == 1
