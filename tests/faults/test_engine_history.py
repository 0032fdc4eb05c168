"""History checks across many forced controller failovers.

Brokers' sessions are expired, brokers crash and come back, controllers are stopped with a
controlled shutdown, sometimes several at once without waiting for the cluster to settle, while
records are produced and replicated. Everything the brokers' sessions commit is recorded
(:class:`~coordkit.engine.history.HistoryRecorder`); afterwards no controller epoch may have been
won twice, no two brokers may have written states in the same epoch, and no partition may have
had two leaders with the same leader epoch.

Runs on the backends given with ``--backend`` (tox's faults env: zookeeper and redis).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.config import UNCLEAN_LEADER_ELECTION_ENABLE
from coordkit.engine.history import HistoryRecorder
from coordkit.engine.instrument import InstrumentedStore
from coordkit.engine.states import encode_state
from coordkit.store import Check, SetData
from harness.backends import Backend
from harness.waiting import wait_for

ROUNDS = int(os.environ.get("COORDKIT_FAULT_ROUNDS", "30"))
SEED = os.environ.get("COORDKIT_FAULT_SEED", "")


@pytest.fixture
def make_cluster(backend: Backend) -> Iterator[Callable[..., Cluster]]:
    clusters: list[Cluster] = []
    url = backend.new_url()

    def factory(brokers: Any, **options: Any) -> Cluster:
        cluster = Cluster(lambda: backend.open(url), brokers, seed=11, **options)
        clusters.append(cluster)
        return cluster.start()

    yield factory
    for cluster in clusters:
        cluster.close()


def _settled_without_offline(cluster: Cluster) -> bool:
    if not cluster.settled():
        return False
    view = cluster.view()
    return not view.uninitialised and not view.offline()


@pytest.mark.parametrize("strategy", ["kafka", "latch"])
def test_no_split_brain_across_forced_failovers(
    make_cluster: Callable[..., Cluster], backend: Backend, strategy: str
) -> None:
    config = EngineConfig(
        controller_election=strategy,
        leader_imbalance_check_interval=0.2,  # rebalances race with the failovers too
    )
    cluster = make_cluster(4, config=config)
    cluster.create_topic("a", 12, 3)
    cluster.create_topic("b", 6, 2, config={UNCLEAN_LEADER_ELECTION_ENABLE: "true"})
    wait_for(lambda: _settled_without_offline(cluster), what="the topics to get leaders")
    rng = random.Random(f"{strategy}-{backend.name}-{SEED}")
    forced = 0

    def controller() -> int:
        found: list[int] = []

        def named() -> bool:
            current = cluster.view().controller
            if current is not None and current in cluster.live_brokers():
                found.append(current)
            return bool(found)

        wait_for(named, what="a controller")
        return found[-1]

    for round_ in range(ROUNDS):
        cluster.produce(rng.randint(1, 20))
        cluster.replicate()
        action = rng.choice(["expire", "crash", "controlled", "double", "follower"])
        if action == "expire":
            backend.expire(cluster.raw_store(controller()))
        elif action == "crash":
            victim = controller()
            cluster.kill(victim)
            cluster.restart(victim)
        elif action == "controlled":
            victim = controller()
            cluster.stop(victim)
            cluster.restart(victim)
        elif action == "double":
            # Two failovers back to back: the second controller may not even have loaded.
            backend.expire(cluster.raw_store(controller()))
            wait_for(lambda: cluster.controller_broker() is not None, what="a controller term")
            holder = cluster.controller_broker()
            if holder is not None and holder.alive:
                backend.expire(cluster.raw_store(holder.broker_id))
        else:
            victim = rng.choice([b for b in cluster.live_brokers() if b != controller()])
            cluster.kill(victim)
            cluster.produce(5)
            cluster.restart(victim)
        forced += action != "follower"
        if round_ % 3 == 2:
            wait_for(cluster.settled, what=f"the cluster to settle after round {round_}")

    for broker_id in cluster.broker_ids:
        if broker_id not in cluster.live_brokers():
            cluster.restart(broker_id)
    for _ in range(3):
        cluster.replicate()
    wait_for(lambda: _settled_without_offline(cluster), what="every partition to be led")

    history = cluster.history
    assert history is not None
    assert history.violations() == []
    epochs = history.epochs()
    assert len(epochs) == len(set(epochs)) >= forced  # every forced failover took an epoch
    assert cluster.view().epoch == max(epochs)
    assert history.leader_changes() > 0


def test_the_checks_catch_split_brain() -> None:
    """The recorder flags what the store must never accept (fed forged commits)."""
    history = HistoryRecorder()

    class _Fake(InstrumentedStore):
        def __init__(self) -> None:
            self._observers = []

    one, two = _Fake(), _Fake()
    history.observe(one, 1)
    history.observe(two, 2)
    fence = Check("/controller_epoch", 3)
    state = "/brokers/topics/t/partitions/0/state"
    for store, broker in ((one, 1), (two, 2)):
        for observer in store._observers:
            observer([SetData("/controller_epoch", b"4")], [None])
            observer([fence, SetData(state, encode_state(broker, 9, (broker,), 4))], [None, None])
    problems = history.violations()
    assert "controller epoch 4 was won 2 times (brokers [1, 2])" in problems
    assert "controllers [1, 2] all wrote partition states in epoch 4" in problems
    assert (
        "partition t-0 (generation 0) had leaders [1, 2] with the same leader epoch 9" in problems
    )
