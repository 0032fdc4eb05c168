"""Committed offsets survive a consumer restart, a coordinator move and a full cluster restart on
the same store; new members start from the committed offset, else 0."""

from __future__ import annotations

from collections.abc import Callable

from coordkit.engine import Cluster
from harness.waiting import wait_for

from .conftest import partitions_of, start, wait_stable

ALL = partitions_of("orders", 6)


def test_offsets_survive_restarts_and_coordinator_moves(
    group_cluster: Callable[..., Cluster], make_cluster: Callable[..., Cluster]
) -> None:
    cluster = group_cluster()
    consumer = start(cluster, "g", ["orders"])
    wait_stable(cluster, "g", [consumer], ALL)
    assert consumer.positions() == dict.fromkeys(ALL, 0)  # nothing committed yet

    cluster.produce(7)
    cluster.replicate()
    assert consumer.lag() == dict.fromkeys(ALL, 7)
    assert consumer.poll() == 7 * len(ALL)
    assert consumer.lag() == dict.fromkeys(ALL, 0)
    consumer.close()  # commits on close

    restarted = start(cluster, "g", ["orders"])
    wait_stable(cluster, "g", [restarted], ALL)
    assert restarted.positions() == dict.fromkeys(ALL, 7)

    cluster.produce(3)
    cluster.replicate()
    restarted.poll()
    restarted.commit()
    coordinator = cluster.group_coordinator("g")
    assert coordinator is not None
    cluster.kill(coordinator)
    wait_for(
        lambda: cluster.group_coordinator("g") not in (None, coordinator),
        what="the coordinator to move",
    )
    wait_stable(cluster, "g", [restarted], ALL)
    restarted.crash()  # no commit: the last commit (10) stands
    again = start(cluster, "g", ["orders"])
    wait_stable(cluster, "g", [again], ALL)
    assert again.positions() == dict.fromkeys(ALL, 10)
    again.close()
    cluster.close()

    # A whole new cluster on the same store resumes the group and its offsets.
    reborn = make_cluster(3, config=cluster.config)
    wait_for(reborn.settled, what="the restarted cluster to settle")
    last = start(reborn, "g", ["orders"])
    described = wait_stable(reborn, "g", [last], ALL)
    assert last.positions() == dict.fromkeys(ALL, 10)
    assert described.generation > 1  # the generation carried on from the persisted metadata
