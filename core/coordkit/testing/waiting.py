"""Waiting for asynchronous outcomes (watch deliveries, session changes) without timed assertions:
the timeout only bounds how long a failing test hangs (``--coordkit-timeout`` sets it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT = 20.0

#: The bound :func:`wait_for` uses when none is given; the plugin sets it from --coordkit-timeout.
_default_timeout = DEFAULT_TIMEOUT


def set_default_timeout(seconds: float) -> None:
    global _default_timeout
    if not seconds > 0:
        raise ValueError(f"a wait timeout must be positive, got {seconds!r}")
    _default_timeout = seconds


def default_timeout() -> float:
    return _default_timeout


def wait_for(
    predicate: Callable[[], T], timeout: float | None = None, what: str = "condition"
) -> T:
    """Poll ``predicate`` until it returns something true and return that; raise
    ``AssertionError("timed out after ...s waiting for <what>")`` once ``timeout`` passes."""
    bound = _default_timeout if timeout is None else timeout
    deadline = time.monotonic() + bound
    delay = 0.002
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {bound}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
