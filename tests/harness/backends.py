"""Store backends for the contract suite (coordkit.testing's store suite), one class per URL scheme.

A backend hands out isolated store URLs (one namespace per test) and knows how to inflict the
faults the suite needs on a client: server-side session expiry, connection loss without expiry,
a server crash, a clock to move. The suite itself never branches on the backend.
"""

from __future__ import annotations

import importlib
import itertools
from typing import Any

from coordkit.store import MetadataStore
from coordkit.support.clock import ManualClock
from coordkit.testing.backends import StoreBackend, StoreFactory

__all__ = [
    "BACKENDS",
    "Backend",
    "ClockedMemoryBackend",
    "MemoryBackend",
    "StoreFactory",
    "load_backend",
]

#: The kit's backend type, by the name the engine and fault tests use.
Backend = StoreBackend

#: Backend name → "module:class" (modules in this folder).
BACKENDS: dict[str, str] = {
    "memory": "harness.backends:MemoryBackend",
    "redis": "harness.redis_server:RedisBackend",
    "zookeeper": "harness.zookeeper:ZooKeeperBackend",
}


class MemoryBackend(StoreBackend):
    """Named in-process servers, one per test, on the system clock."""

    name = "memory"
    _ids = itertools.count(1)

    def new_url(self) -> str:
        return f"memory://contract-{next(self._ids)}"

    def expire(self, store: MetadataStore) -> None:
        store.server.expire_session(store.session_id)  # type: ignore[attr-defined]

    def disconnect(self, store: MetadataStore) -> None:
        store.disconnect()  # type: ignore[attr-defined]

    def reconnect(self, store: MetadataStore) -> None:
        store.reconnect()  # type: ignore[attr-defined]


class ClockedMemoryBackend(MemoryBackend):
    """The memory backend whose sessions time out on one manual clock (the contract suite's, so
    that its clock tests apply; the engine tests keep the system clock)."""

    def __init__(self) -> None:
        self.clock = ManualClock()

    def new_url(self) -> str:
        return f"memory://contract-clocked-{next(self._ids)}"

    def open(self, url: str, **options: Any) -> MetadataStore:
        options.setdefault("clock", self.clock)
        return super().open(url, **options)

    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)


def load_backend(name: str) -> Backend:
    try:
        module_name, _, class_name = BACKENDS[name].partition(":")
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}") from None
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls()  # type: ignore[no-any-return]
