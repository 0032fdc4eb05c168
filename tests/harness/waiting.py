"""Waiting for asynchronous outcomes (watch deliveries, session changes) without timed assertions:
the timeout only bounds how long a failing test hangs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT = 20.0


def wait_for(
    predicate: Callable[[], T], timeout: float = DEFAULT_TIMEOUT, what: str = "condition"
) -> T:
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
