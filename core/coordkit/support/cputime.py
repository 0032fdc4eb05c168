"""How the lab times a strategy: the minimum thread CPU time of repeated calls, the calls of
every strategy of a scenario interleaved, so that a busy machine cannot reorder strategies.

* **Thread CPU time**, not wall time: another process competing for the cores stretches wall
  time, not this thread's CPU time.
* **The minimum of repeated calls**: one-off pauses (a GC pass, a page fault, a cold cache after
  the scheduler moved the thread) only ever add time.
* **Interleaved**: what is left (a busy hyperthread sibling, caches shared with a noisy
  neighbour, the clock speed) changes from one moment to the next. The runner hands the calls
  of the same step of every strategy of a scenario to :func:`measure_interleaved` together, which
  times them round-robin (A, B, C, A, B, C, ...), so each strategy's minimum is taken under the
  same conditions and their ratios hold when the machine is loaded.

Short calls, where noise is largest relative to the time, are repeated most; a call of
:data:`LONG_CALLS_SECONDS` or more is timed once. Callers guarantee that repeating a call
changes nothing but the measurement (assignors are pure functions of their input: tested).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

#: How a timing is measured, as reports state it.
TIMING_METHOD = (
    "minimum thread CPU time of repeated calls (3 to 30 calls below 5 ms, fewer for longer "
    "calls, one from 50 ms), the calls of every strategy of a scenario interleaved"
)
MIN_TIMED_CALLS = 3
MAX_TIMED_CALLS = 30
#: Repeat a call up to MAX_TIMED_CALLS times while its calls together took less than this.
SHORT_CALLS_SECONDS = 0.005
#: Stop repeating a call (before MIN_TIMED_CALLS) once its calls together took this long.
LONG_CALLS_SECONDS = 0.05

Call = Callable[[], object]


class _Timed:
    __slots__ = ("call", "calls", "fastest", "spent")

    def __init__(self, call: Call):
        self.call = call
        self.fastest = math.inf
        self.spent = 0.0
        self.calls = 0

    def wants_more(self) -> bool:
        return (self.calls < MIN_TIMED_CALLS and self.spent < LONG_CALLS_SECONDS) or (
            self.spent < SHORT_CALLS_SECONDS and self.calls < MAX_TIMED_CALLS
        )

    def run(self) -> None:
        started = time.thread_time()
        self.call()
        elapsed = time.thread_time() - started
        self.fastest = min(self.fastest, elapsed)
        self.spent += elapsed
        self.calls += 1


def measure_interleaved(owners: Sequence[Sequence[Call]]) -> list[float]:
    """Seconds of each owner's calls (each call's fastest run, summed per owner), the calls of
    all owners timed round-robin until each has had its repeats (see the module docstring).

    An owner with no calls gets 0.0.
    """
    timed = [[_Timed(call) for call in calls] for calls in owners]
    flat = [t for calls in timed for t in calls]
    rounds = 0
    while True:
        waiting = [t for t in flat if t.wants_more()]
        if not waiting:
            break
        # Rotate who goes first, so no call always runs right after the same neighbour.
        turn = rounds % len(waiting)
        for t in waiting[turn:] + waiting[:turn]:
            t.run()
        rounds += 1
    return [sum(t.fastest for t in calls) for calls in timed]


def measure(calls: Sequence[Call]) -> float:
    """Seconds of one owner's calls measured alone (no other strategy to interleave with)."""
    return measure_interleaved([calls])[0]
