"""Partition leadership: controlled shutdown, unclean election and its losses, preferred-leader
rebalancing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from coordkit.engine import EngineConfig
from coordkit.engine.config import UNCLEAN_LEADER_ELECTION_ENABLE
from coordkit.kafka.model import NO_LEADER
from coordkit.support.clock import ManualClock
from harness.waiting import wait_for

NO_REBALANCE = EngineConfig(auto_leader_rebalance=False)


def test_controlled_shutdown_moves_leadership_before_the_broker_leaves(
    make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    cluster = make_cluster(3, config=NO_REBALANCE)
    cluster.create_topic("t", 9, 3)
    cluster.create_topic("single", 3, 1)
    before = until(cluster, lambda v: len(v.partitions) == 12, "topics to get leaders")
    leaving = next(b for b in before.brokers if b != before.controller)
    led = [p for p in before.partitions if p.leader == leaving]
    assert any(len(p.replicas) > 1 for p in led)

    # Record the states written while the broker was still registered.
    remaining = cluster.broker(leaving).controlled_shutdown()
    during = cluster.view()
    assert leaving in during.brokers  # still registered: leadership moved before it left
    # Only single-replica partitions remain on it.
    assert sorted(remaining) == sorted(p.tp for p in led if len(p.replicas) == 1)
    for p in during.partitions:
        old = before.partition(*p.tp)
        if len(p.replicas) == 1:
            assert (p.leader, p.leader_epoch) == (old.leader, old.leader_epoch)
            continue
        assert p.leader != leaving
        assert leaving not in p.isr
        assert p.leader_epoch == old.leader_epoch + 1
        if old.leader == leaving:
            # first replica live, in the ISR and not shutting down
            assert p.leader == next(r for r in p.replicas if r != leaving)
        else:
            assert p.leader == old.leader

    cluster.stop(leaving, controlled=False)  # already done; just leave
    after = until(cluster, lambda v: leaving not in v.brokers, f"broker {leaving} to leave")
    # Leaving changed nothing more for the replicated partitions.
    for p in after.partitions:
        if len(p.replicas) > 1:
            assert p == during.partition(*p.tp)
        elif p.replicas == (leaving,):
            assert p.leader == NO_LEADER
    assert cluster.history is not None
    assert cluster.history.violations() == []


def test_stop_runs_a_controlled_shutdown(
    make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    cluster = make_cluster(3, config=NO_REBALANCE)
    cluster.create_topic("t", 6, 2)
    before = until(cluster, lambda v: len(v.partitions) == 6, "t to get leaders")
    # Stop the controller broker itself: it moves its own leaders first, then a new one takes over.
    remaining = cluster.stop(before.controller)
    assert remaining == []
    after = until(
        cluster,
        lambda v: v.controller not in (None, before.controller) and not v.offline(),
        "a new controller",
    )
    assert all(before.controller not in p.isr for p in after.partitions)
    # Controlled shutdown re-elected exactly once per partition it led.
    for p in after.partitions:
        old = before.partition(*p.tp)
        if old.leader == before.controller:
            assert p.leader_epoch == old.leader_epoch + 1


@pytest.mark.parametrize("unclean", [False, True])
def test_unclean_election_loses_acknowledged_records(
    make_cluster: Callable[..., Any], until: Callable[..., Any], unclean: bool
) -> None:
    cluster = make_cluster([1, 2, 3], config=NO_REBALANCE)
    config = {UNCLEAN_LEADER_ELECTION_ENABLE: "true" if unclean else "false"}
    cluster.create_topic("t", 1, 2, config=config, assignment={0: [1, 2]})
    until(cluster, lambda v: len(v.partitions) == 1, "t to get a leader")
    tp = ("t", 0)
    assert cluster.produce(100) == 100
    cluster.replicate()
    assert cluster.replication.totals().acked == 100
    # The follower dies: the ISR shrinks to the leader, which keeps acknowledging alone.
    cluster.kill(2)
    until(cluster, lambda v: v.partition(*tp).isr == (1,), "the ISR to shrink to [1]")
    assert cluster.produce(50) == 50
    assert cluster.replication.totals().acked == 150
    # The leader dies too; then the stale follower comes back.
    cluster.kill(1)
    until(cluster, lambda v: v.partition(*tp).leader == NO_LEADER, "the partition to go offline")
    assert cluster.produce(10) == 0  # no leader: refused
    cluster.restart(2)
    if unclean:
        view = until(cluster, lambda v: v.partition(*tp).leader == 2, "an unclean election")
        assert view.partition(*tp).isr == (2,)
        totals = cluster.replication.totals()
        assert (totals.acked_lost, totals.unclean_elections) == (50, 1)
    else:
        view = until(cluster, lambda v: 2 in v.brokers, "broker 2 to register")
        # Clean: it waits for the last in-sync replica (1); nothing acknowledged is lost.
        assert view.partition(*tp).leader == NO_LEADER
        assert view.partition(*tp).isr == (1,)
        cluster.restart(1)
        view = until(cluster, lambda v: v.partition(*tp).leader == 1, "broker 1 to lead again")
        assert cluster.replication.totals().acked_lost == 0
    assert cluster.history is not None
    assert cluster.history.violations() == []


def test_cluster_wide_unclean_strategy(
    make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    config = EngineConfig(offline_election="offline-unclean", auto_leader_rebalance=False)
    cluster = make_cluster([1, 2], config=config)
    cluster.create_topic("t", 1, 2, assignment={0: [1, 2]})
    until(cluster, lambda v: len(v.partitions) == 1, "t to get a leader")
    cluster.kill(2)
    until(cluster, lambda v: v.partition("t", 0).isr == (1,), "the ISR to shrink")
    cluster.kill(1)
    wait_for(lambda: not cluster.view().brokers, what="no broker left")
    cluster.restart(2)
    view = until(cluster, lambda v: v.partition("t", 0).leader == 2, "an unclean election")
    assert view.partition("t", 0).isr == (2,)


def test_automatic_preferred_leader_rebalance(
    make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    clock = ManualClock()
    # Replication by hand: on a clock that jumps minutes, every follower would look lagging.
    config = EngineConfig(leader_imbalance_check_interval=300.0, replication=False)
    cluster = make_cluster(3, config=config, clock=clock)
    cluster.create_topic("t", 6, 3)
    before = until(cluster, lambda v: len(v.partitions) == 6, "t to get leaders")
    bounced = next(b for b in before.brokers if b != before.controller)
    cluster.kill(bounced)
    until(cluster, lambda v: all(p.leader != bounced for p in v.partitions), "leaders to move")
    cluster.restart(bounced)
    until(cluster, lambda v: bounced in v.brokers, "the broker to return")
    cluster.replicate()
    moved = until(
        cluster,
        lambda v: all(bounced in p.isr for p in v.partitions),
        "the returning broker to rejoin the ISRs",
    )
    preferred_elsewhere = [p for p in moved.partitions if p.replicas[0] == bounced]
    assert preferred_elsewhere
    assert all(p.leader != bounced for p in preferred_elsewhere)
    # Not before the check interval...
    clock.advance(299)
    assert until(cluster, lambda v: True, "idle") == cluster.view()
    assert all(p.leader != bounced for p in cluster.view().partitions)
    # ...then its imbalance (100% > 10%) triggers preferred elections.
    clock.advance(2)
    after = until(
        cluster,
        lambda v: all(p.leader == p.replicas[0] for p in v.partitions),
        "preferred leaders to be restored",
    )
    for p in after.partitions:
        if p.replicas[0] == bounced:
            assert p.leader_epoch == moved.partition(*p.tp).leader_epoch + 1
            assert p.isr == moved.partition(*p.tp).isr  # preferred election keeps the ISR


def test_imbalance_below_threshold_is_left_alone(
    make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    clock = ManualClock()
    # Replication by hand: on a clock that jumps minutes, every follower would look lagging.
    config = EngineConfig(leader_imbalance_per_broker_percentage=60.0, replication=False)
    cluster = make_cluster(3, config=config, clock=clock)
    # Broker 0 prefers 2 partitions; one of them will lead elsewhere: 50% <= 60%.
    cluster.create_topic("t", 2, 2, assignment={0: [0, 1], 1: [0, 1]})
    until(cluster, lambda v: len(v.partitions) == 2, "t to get leaders")
    cluster.kill(0)
    until(cluster, lambda v: all(p.leader == 1 for p in v.partitions), "leaders on 1")
    cluster.restart(0)
    cluster.replicate()
    until(cluster, lambda v: all(0 in p.isr for p in v.partitions), "ISR expansion")
    ctrl = cluster.controller_broker()
    assert ctrl is not None
    assert ctrl.controller is not None
    moved = ctrl.controller.elect_preferred_leaders([("t", 0)]).result(timeout=20)
    assert moved == [("t", 0)]
    clock.advance(400)
    wait_for(lambda: ctrl.controller is not None and ctrl.controller.idle(), what="idle")
    assert ctrl.controller.imbalance() == {0: 0.5}
    assert cluster.view().partition("t", 1).leader == 1


def test_an_unclean_election_asked_for_elects_a_replica_outside_the_isr(
    make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    """Kafka's ElectLeaders UNCLEAN: a partition whose only live replica is outside its ISR
    stays leaderless (the topic does not allow unclean elections) until an admin asks the
    controller, which then elects that replica; a partition with a live leader is left alone."""
    cluster = make_cluster([1, 2, 3], config=NO_REBALANCE)
    cluster.create_topic("t", 1, 2, assignment={0: [1, 2]})
    cluster.create_topic("led", 1, 1, assignment={0: [3]})
    until(cluster, lambda v: len(v.partitions) == 2, "the topics to get leaders")
    tp = ("t", 0)
    cluster.kill(2)
    until(cluster, lambda v: v.partition(*tp).isr == (1,), "the ISR to shrink to [1]")
    cluster.kill(1)
    until(cluster, lambda v: v.partition(*tp).leader == NO_LEADER, "the partition to go offline")
    cluster.restart(2)
    view = until(cluster, lambda v: 2 in v.brokers, "broker 2 to register")
    assert view.partition(*tp).leader == NO_LEADER
    controller = cluster.controller_broker()
    assert controller is not None
    assert controller.controller is not None
    led_before = view.partition("led", 0)
    moved = controller.controller.elect_unclean_leaders([tp, ("led", 0)]).result(30)
    assert moved == [tp]
    after = cluster.view()
    assert (after.partition(*tp).leader, after.partition(*tp).isr) == (2, (2,))
    assert after.partition("led", 0) == led_before
