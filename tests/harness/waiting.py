"""Waiting without timed assertions lives in the kit (coordkit.testing.waiting); tests import it
here."""

from __future__ import annotations

from coordkit.testing.waiting import DEFAULT_TIMEOUT, wait_for

__all__ = ["DEFAULT_TIMEOUT", "wait_for"]
