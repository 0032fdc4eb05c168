"""Waiting on the engine's clock.

Everything time-based in consumer groups (heartbeats, session and rebalance timeouts, retry
back-off) reads :meth:`Clock.monotonic`, so a :class:`~coordkit.support.clock.ManualClock` drives it in
tests. Waits sleep in short real-time slices and re-read the clock, which makes them correct for
both the system clock and a clock that only moves when told to.
"""

from __future__ import annotations

import threading

from coordkit.support.clock import Clock

#: Longest real-time sleep before the clock is read again.
SLICE = 0.01


def wait_on_clock(clock: Clock, seconds: float, stop: threading.Event) -> bool:
    """Wait until ``seconds`` have passed on ``clock`` or ``stop`` is set; ``True`` if stopped."""
    deadline = clock.monotonic() + seconds
    while not stop.is_set():
        remaining = deadline - clock.monotonic()
        if remaining <= 0:
            return False
        stop.wait(min(remaining, SLICE))
    return True
