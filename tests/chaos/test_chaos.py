"""Seeded chaos: store faults interleaved with cluster events, then heal; the cluster must
converge and its history must be sound (see :mod:`chaos.runner` for the checks and the bound,
:mod:`chaos.schedule` for what a schedule holds).

Backends: memory (session expiry, disconnects), a standalone ZooKeeper server, a 3-member
ZooKeeper ensemble (its leader crashes or hangs) and a durable Redis server (kill -9, SIGSTOP,
proxy cuts, expiry). Each failing schedule prints its seed, the schedule and what happened, and
replays with ``COORDKIT_CHAOS_SEED``.
"""

from __future__ import annotations

from chaos.runner import SESSION_TIMEOUT, run_schedule
from chaos.schedule import generate
from harness.faults import StoreFaults


def test_cluster_converges_and_history_holds_after_chaos(
    chaos_faults: StoreFaults, chaos_seed: int
) -> None:
    schedule = generate(
        chaos_seed, chaos_faults.name, chaos_faults.kinds, session_timeout=SESSION_TIMEOUT
    )
    outcome = run_schedule(chaos_faults, schedule)
    assert not outcome.problems, outcome.report()
