"""The in-memory metadata store: the embedded default backend and the reference model.

``memory://`` opens a private server; ``memory://NAME`` joins the server called NAME in this
process, so several sessions (brokers, consumers, tests) share one tree. Query parameters:
``session_timeout`` (seconds, default 10).
"""

from __future__ import annotations

from typing import Any

from coordkit import hookimpl
from coordkit.errors import InvalidURLError
from coordkit.urls import StoreURL
from coordkit_memory.server import DEFAULT_SESSION_TIMEOUT, MemoryServer
from coordkit_memory.store import MemoryStore

__all__ = ["MemoryServer", "MemoryStore", "open_memory_store"]


def open_memory_store(url: StoreURL, **options: Any) -> MemoryStore:
    """Open ``memory://[NAME]``; options: ``clock``, ``session_timeout``."""
    if url.hosts and url.path:
        raise InvalidURLError(f"memory URL {url.redacted()!r}: expected memory://NAME")
    name = url.host_string or url.path.strip("/")
    params = url.params
    unknown = set(params) - {"session_timeout"}
    if unknown:
        raise InvalidURLError(
            f"memory URL {url.redacted()!r}: unknown parameter(s) {', '.join(sorted(unknown))}"
        )
    timeout = float(
        options.pop("session_timeout", params.get("session_timeout", DEFAULT_SESSION_TIMEOUT))
    )
    clock = options.pop("clock", None)
    if options:
        raise TypeError(f"memory store: unknown option(s) {', '.join(sorted(options))}")
    server = MemoryServer.named(name, clock=clock) if name else MemoryServer(clock=clock)
    store = server.connect(session_timeout=timeout)
    store.url = url
    return store


@hookimpl
def coordkit_register_stores(register: Any) -> None:
    register("memory", open_memory_store)
