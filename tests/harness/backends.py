"""Store backends for the contract suite, one class per URL scheme.

A backend hands out isolated store URLs (one namespace per test) and knows how to inflict the
faults the suite needs on a client: server-side session expiry and connection loss without
expiry. The suite itself never branches on the backend.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable
from typing import Any, Protocol

from coordkit.plugins import get_plugin_manager
from coordkit.store import MetadataStore

#: Opens another session on the test's namespace (the contract suite's ``open_session`` fixture).
StoreFactory = Callable[..., MetadataStore]

#: Backend name → "module:class" (modules in this folder); the real servers' backends are added by
#: the store issue.
BACKENDS: dict[str, str] = {
    "memory": "harness.backends:MemoryBackend",
    "redis": "harness.redis_server:RedisBackend",
    "zookeeper": "harness.zookeeper:ZooKeeperBackend",
}


class Backend(Protocol):
    name: str

    def new_url(self) -> str:
        """A URL for a fresh, empty namespace."""
        ...

    def open(self, url: str, **options: Any) -> MetadataStore: ...

    def expire(self, store: MetadataStore) -> None:
        """Expire ``store``'s session on the server side, as a timeout would."""
        ...

    def disconnect(self, store: MetadataStore) -> None:
        """Cut ``store``'s connection without ending its session."""
        ...

    def reconnect(self, store: MetadataStore) -> None:
        """Let ``store`` reconnect to its session."""
        ...

    def close(self) -> None: ...


class MemoryBackend:
    name = "memory"
    _ids = itertools.count(1)

    def new_url(self) -> str:
        return f"memory://contract-{next(self._ids)}"

    def open(self, url: str, **options: Any) -> MetadataStore:
        return get_plugin_manager().store_for(url, **options)

    def expire(self, store: MetadataStore) -> None:
        store.server.expire_session(store.session_id)  # type: ignore[attr-defined]

    def disconnect(self, store: MetadataStore) -> None:
        store.disconnect()  # type: ignore[attr-defined]

    def reconnect(self, store: MetadataStore) -> None:
        store.reconnect()  # type: ignore[attr-defined]

    def close(self) -> None:
        pass


def load_backend(name: str) -> Backend:
    try:
        module_name, _, class_name = BACKENDS[name].partition(":")
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}") from None
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls()  # type: ignore[no-any-return]
