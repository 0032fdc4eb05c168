"""Chaos suite fixtures: one long-lived server (or ensemble) per backend, schedule seeds from the
environment, and the summary line (schedules run, faults injected, violations).

* ``COORDKIT_CHAOS_SEED=N[,M...]`` replays exactly those schedules;
* ``COORDKIT_CHAOS_SCHEDULES=N`` runs ``N`` schedules per backend (default 5), with seeds
  ``COORDKIT_CHAOS_FIRST_SEED`` (default 1) onwards;
* ``COORDKIT_CHAOS_PROCESS_SCHEDULES=N`` the same for the schedules on ``coordkit serve``
  processes (default 1 per store: each takes half a minute).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from chaos.runner import SESSION_TIMEOUT, TOTALS
from harness.faults import BACKENDS, StoreFaults, open_faults


def chaos_seeds(count_variable: str = "COORDKIT_CHAOS_SCHEDULES", default: int = 5) -> list[int]:
    replay = os.environ.get("COORDKIT_CHAOS_SEED", "").strip()
    if replay:
        return [int(seed) for seed in replay.split(",") if seed.strip()]
    count = int(os.environ.get(count_variable, str(default)))
    first = int(os.environ.get("COORDKIT_CHAOS_FIRST_SEED", "1"))
    return list(range(first, first + count))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "chaos_seed" in metafunc.fixturenames:
        metafunc.parametrize("chaos_seed", chaos_seeds(), ids=lambda seed: f"seed{seed}")
    if "process_chaos_seed" in metafunc.fixturenames:
        seeds = chaos_seeds("COORDKIT_CHAOS_PROCESS_SCHEDULES", 1)
        metafunc.parametrize("process_chaos_seed", seeds, ids=lambda seed: f"seed{seed}")


@pytest.fixture(scope="module", params=BACKENDS)
def chaos_faults(request: pytest.FixtureRequest) -> Iterator[StoreFaults]:
    """The backend's server(s), shared by every schedule on it (each gets a fresh namespace);
    torn down before the next backend's start, so only one backend's servers run at a time."""
    faults = open_faults(request.param, SESSION_TIMEOUT)
    yield faults
    faults.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TOTALS.schedules:
        terminalreporter.write_line(TOTALS.summary())
