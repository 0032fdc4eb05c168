"""How the lab times strategies (coordkit.support.cputime): repeated calls, the fastest counting, thread CPU
time only, the calls of several strategies interleaved."""

from __future__ import annotations

import time
from collections.abc import Callable

from coordkit.support import cputime


def spinner(log: list[str], name: str, *spins: float) -> Callable[[], object]:
    """A call that burns the given thread CPU seconds (in order, the last repeating) and logs
    its name."""

    def call() -> object:
        spin = spins[min(sum(1 for n in log if n == name), len(spins) - 1)]
        log.append(name)
        until = time.thread_time() + spin
        while time.thread_time() < until:
            pass
        return None

    return call


def test_the_fastest_of_repeated_calls_counts() -> None:
    log: list[str] = []
    seconds = cputime.measure([spinner(log, "a", 0.02, 0.001)])
    assert len(log) >= cputime.MIN_TIMED_CALLS
    # The slow first call does not count: the fastest (about 1 ms of CPU) does.
    assert 0.001 <= seconds < 0.01


def test_short_calls_are_repeated_most_long_ones_once() -> None:
    log: list[str] = []
    cputime.measure([spinner(log, "short", 0.0)])
    assert len(log) == cputime.MAX_TIMED_CALLS
    log.clear()
    seconds = cputime.measure([spinner(log, "long", cputime.LONG_CALLS_SECONDS)])
    assert log == ["long"]
    assert seconds >= cputime.LONG_CALLS_SECONDS


def test_cpu_time_not_time_spent_waiting() -> None:
    def sleeping() -> None:
        time.sleep(0.01)  # off the CPU: another process would have it

    assert cputime.measure([sleeping]) < 0.005


def test_an_owners_calls_add_up_and_an_owner_without_calls_costs_nothing() -> None:
    log: list[str] = []
    both = cputime.measure_interleaved([[spinner(log, "a", 0.002), spinner(log, "b", 0.003)], []])
    assert 0.005 <= both[0] < 0.02
    assert both[1] == 0.0


def test_the_calls_of_several_owners_are_interleaved() -> None:
    """Round-robin: while both still repeat, neither runs twice before the other ran again, so
    both minimums are taken under the same conditions."""
    log: list[str] = []
    a, b = spinner(log, "a", 0.0005), spinner(log, "b", 0.0005)
    cputime.measure_interleaved([[a], [b]])
    both_running = 2 * cputime.MIN_TIMED_CALLS
    window = log[:both_running]
    assert sorted(window) == ["a"] * cputime.MIN_TIMED_CALLS + ["b"] * cputime.MIN_TIMED_CALLS
    for first, second in zip(window[::2], window[1::2], strict=True):
        assert {first, second} == {"a", "b"}
