"""Clocks. The memory store and the engine take a clock so tests and the lab can drive time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the epoch, as Kafka writes its timestamps."""
        ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to; listeners run after every :meth:`advance`."""

    def __init__(self, start: float = 0.0, wall_ms: int = 1_700_000_000_000):
        self._now = start
        self._wall_base = wall_ms
        self._start = start
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        return self._now

    def wall_ms(self) -> int:
        return self._wall_base + int((self._now - self._start) * 1000)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"ManualClock.advance: seconds must be >= 0, got {seconds}")
        with self._lock:
            self._now += seconds
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def on_advance(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)
