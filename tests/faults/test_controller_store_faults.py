"""Issue 11, cases 1 and 2: the store server crashes while the controller is writing.

A ZooKeeper server, or a durable Redis server (``appendfsync always``), is killed with SIGKILL
while the controller is in the middle of writing partition states, and started again on the same
port and data directory. Sessions are long enough (10 s) to survive the restart, so no controller
election comes to the rescue: the controller that lost its connection mid-write must itself find
out what reached the store and finish the job.

1. A topic of 2,000 partitions (RF 3, 3 brokers) is created and the server killed 20–100 ms later
   (seeded choice); also 10 partitions killed at 5 ms. Every partition must end up with a state.
2. Broker 1 crashes and the server is killed 50 ms later, while the controller writes the
   failover (new leaders, then ISRs without broker 1). No partition may keep broker 1 in its ISR.

Either way the cluster must converge (:meth:`Cluster.wait_converged`) within :data:`BOUND`
seconds of the server serving again. Each test starts its own server, since it kills it. The
kill delay comes from ``COORDKIT_FAULT_SEED`` (printed on failure), so a failure replays with the
same timing choice.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator

import pytest

from coordkit.engine import Cluster, ClusterView, EngineConfig
from coordkit.engine.errors import EngineError
from coordkit.errors import StoreError
from coordkit.kafka.model import NO_LEADER
from coordkit.store import SessionState
from harness.faults import StoreFaults, open_faults
from harness.waiting import wait_for

#: Seconds from the server serving again within which the cluster must converge. Without a fault
#: the controller initialises 2,000 partitions in 0.2-0.4 s here (ZooKeeper and Redis); re-reading
#: and rewriting them after a restart is of the same order, and clients reconnecting to a server
#: that is still starting may wait up to 2/3 of the session timeout. The rest is headroom for a
#: loaded 2-core machine, as in the chaos suite.
BOUND = 30.0
#: Long enough that every session survives the server's restart (no re-election to the rescue).
SESSION_TIMEOUT = 10.0
SEED = os.environ.get("COORDKIT_FAULT_SEED", "")
#: Small write batches spread the controller's writes over a few hundred milliseconds (2,000
#: partitions: 20-40 multis), so a kill tens of milliseconds in lands between batches: some
#: written, some in flight, some not sent yet.
CONFIG = EngineConfig(write_batch_ops=100)


@pytest.fixture(params=["zookeeper", "redis"])
def store_server(request: pytest.FixtureRequest) -> Iterator[StoreFaults]:
    """A server of its own (this test kills it); Redis is durable (appendfsync always)."""
    server = open_faults(request.param, SESSION_TIMEOUT)
    yield server
    server.close()


@pytest.fixture
def clusters() -> Iterator[list[Cluster]]:
    started: list[Cluster] = []
    yield started
    for cluster in started:
        cluster.close()


def _crash_and_restart(server: StoreFaults, cluster: Cluster, after: float) -> None:
    """Kill the server ``after`` seconds from now, start it again, and wait for the test's own
    reading session to be back (the brokers' sessions reconnect by themselves)."""
    time.sleep(after)
    server.crash()
    server.recover()
    wait_for(
        lambda: cluster.admin_store.state is SessionState.CONNECTED,
        BOUND,
        "the admin session to reconnect after the restart",
    )


def _converged(cluster: Cluster, context: str) -> ClusterView:
    try:
        cluster.wait_converged(BOUND)
    except (EngineError, StoreError) as exc:
        lines = str(exc).splitlines()
        shown = "\n".join(lines[:12]) + (
            f"\n  ... {len(lines) - 12} more" if len(lines) > 12 else ""
        )
        raise AssertionError(f"{context}: {shown}") from None
    return cluster.view()


@pytest.mark.parametrize(
    ("partitions", "kill_after_ms"),
    [(2000, None), (10, 5)],
    ids=["2000-partitions-killed-20-100ms", "10-partitions-killed-5ms"],
)
def test_partitions_of_a_topic_created_during_a_server_crash_all_get_a_state(
    store_server: StoreFaults,
    clusters: list[Cluster],
    partitions: int,
    kill_after_ms: int | None,
) -> None:
    seed = f"{store_server.name}-{partitions}-{SEED}"
    delay_ms = kill_after_ms if kill_after_ms is not None else random.Random(seed).randint(20, 100)
    url = store_server.new_url()
    cluster = Cluster(lambda: store_server.open(url), 3, config=CONFIG, seed=11).start()
    clusters.append(cluster)
    cluster.wait_settled(BOUND)

    cluster.create_topic("big", partitions, 3)
    _crash_and_restart(store_server, cluster, delay_ms / 1000)

    context = (
        f"{partitions} partitions, {store_server.name} killed {delay_ms} ms after the topic was "
        f"created (seed {seed!r}; replay with COORDKIT_FAULT_SEED={SEED!r})"
    )
    view = _converged(cluster, context)
    assert sorted(p.partition for p in view.partitions if p.topic == "big") == list(
        range(partitions)
    ), context
    assert not view.uninitialised, context


def test_a_broker_failover_written_during_a_server_crash_completes(
    store_server: StoreFaults, clusters: list[Cluster]
) -> None:
    url = store_server.new_url()
    # Brokers 2 and 3 first, so that one of them is the controller when broker 1 crashes.
    cluster = Cluster(lambda: store_server.open(url), [2, 3], config=CONFIG, seed=11)
    clusters.append(cluster.start())
    cluster.wait_settled(BOUND)
    cluster.start_broker(1)
    cluster.wait_settled(BOUND)
    cluster.create_topic("big", 2000, 3)
    _converged(cluster, "before any fault")
    controller = cluster.controller_broker()
    assert controller is not None
    assert controller.broker_id != 1

    cluster.kill(1)
    _crash_and_restart(store_server, cluster, 0.05)

    context = (
        f"broker 1 killed, {store_server.name} killed 50 ms later while controller "
        f"{controller.broker_id} wrote the failover"
    )
    view = _converged(cluster, context)
    keeping = [
        f"{p.topic}-{p.partition} isr={list(p.isr)}"
        for p in view.partitions
        if 1 in p.isr and not (p.leader == NO_LEADER and p.isr == (1,))
    ]
    assert not keeping, f"{context}: partitions keep broker 1 in their ISR: {keeping[:10]}"
    assert 1 not in view.brokers
