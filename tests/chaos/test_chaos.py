"""Seeded chaos: store faults interleaved with cluster events, then heal; the cluster must
converge and its history must be sound.

Backends: memory (session expiry, disconnects), a standalone ZooKeeper server, a 3-member
ZooKeeper ensemble (its leader crashes or hangs) and a durable Redis server (kill -9, SIGSTOP,
proxy cuts, expiry); stores use 2 s sessions, so a pause past the timeout stays short.

After healing, the cluster must converge, fill its ISRs and have every running broker registered
within 30 s of the store serving again (``CONVERGENCE_BOUND`` in :mod:`chaos.runner`; the slowest
heal measured here was under 4 s). Across the run: one controller per epoch, one leader per leader
epoch, leader epochs never going back, and no acknowledged record lost to clean elections.

A failing schedule prints its seed, the schedule and what happened; ``COORDKIT_CHAOS_SEED=N``
replays exactly that schedule (the thread timing around it is the machine's), and
``COORDKIT_CHAOS_SCHEDULES=N`` sets how many run per backend (default 5).
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
