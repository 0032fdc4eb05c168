"""Seeded chaos on ``coordkit serve --broker-id`` processes (issue #34, item 5): three processes on
a ZooKeeper server and on a durable Redis server, a topic on all three with
``min.insync.replicas=2``, an idempotent acks=all producer and a committing consumer group running
throughout, while processes are killed with -9 (and started again on their log directories),
stopped with SIGSTOP past the store's session timeout, and cut off from the store by their proxies.

After the heal (:data:`chaos.process_runner.HEAL_BOUND`): every partition led with its full ISR on
every process, the group read to the end; every acknowledged record read exactly once at its
offset by a fresh consumer; the high watermark never went back; no two writers in one leader
epoch (see :mod:`chaos.workload` for how each is observed).

``COORDKIT_CHAOS_SEED=N`` replays a schedule (a failure prints the command);
``COORDKIT_CHAOS_PROCESS_SCHEDULES=N`` runs ``N`` per store (default 1; ``tox -e soak-processes``
runs many).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chaos.process_runner import PROCESS_SESSION_TIMEOUT, run_process_schedule
from chaos.process_schedule import generate_process_schedule
from harness.faults import StoreFaults, open_faults

#: The stores whose servers are shared across processes (memory:// is private to one).
STORES = ("zookeeper", "redis")


@pytest.fixture(scope="module", params=STORES)
def process_store(request: pytest.FixtureRequest) -> Iterator[StoreFaults]:
    faults = open_faults(request.param, PROCESS_SESSION_TIMEOUT)
    yield faults
    faults.close()


def test_processes_converge_and_lose_nothing_acknowledged_after_chaos(
    process_store: StoreFaults, process_chaos_seed: int
) -> None:
    schedule = generate_process_schedule(
        process_chaos_seed, process_store.name, session_timeout=PROCESS_SESSION_TIMEOUT
    )
    outcome = run_process_schedule(process_store, schedule)
    assert not outcome.problems, outcome.report()
