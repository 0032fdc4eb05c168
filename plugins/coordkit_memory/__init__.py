"""The in-memory metadata store: the embedded default backend and the reference model.

``memory://`` opens a private server; ``memory://NAME`` joins the server called NAME in this
process, so several sessions (brokers, consumers, tests) share one tree. Query parameters:
``session_timeout`` (seconds, default 10); ``lifetime``: ``process`` (the default: a named tree
lives as long as the process) or ``sessions`` (it is forgotten once its last session ends, and
the next ``memory://NAME`` starts empty: for a run that must leave nothing behind, as the labs'
simulations).

Opened with ``read_only=True``, a NAME no session in this process has opened reads as an empty
tree and is *not* registered (nothing is created); writes raise :class:`~coordkit.store.ReadOnlyError`.
"""

from __future__ import annotations

from typing import Any

import attrs

from coordkit import hookimpl
from coordkit.errors import InvalidURLError
from coordkit.store.urls import StoreURL, parse_seconds
from coordkit_memory.client import DEFAULT_SESSION_TIMEOUT
from coordkit_memory.server import MemoryServer
from coordkit_memory.store import MemoryStore

__all__ = ["MemoryConfig", "MemoryServer", "MemoryStore", "open_memory_store"]

KNOWN_PARAMS = frozenset({"session_timeout", "lifetime"})
LIFETIMES = ("process", "sessions")


@attrs.frozen
class MemoryConfig:
    """What a ``memory://`` URL asks for (checked before anything is opened)."""

    name: str
    session_timeout: float = DEFAULT_SESSION_TIMEOUT
    lifetime: str = "process"

    @classmethod
    def from_url(cls, url: StoreURL, *, session_timeout: object = None) -> MemoryConfig:
        """:param session_timeout: the open option, overriding the URL's parameter."""
        if url.hosts and url.path:
            raise InvalidURLError(f"{url.where}: expected memory://NAME")
        if url.username is not None or url.password is not None:
            raise InvalidURLError(f"{url.where}: a memory store takes no user name or password")
        unknown = set(url.params) - KNOWN_PARAMS
        if unknown:
            raise InvalidURLError(
                f"{url.where}: unknown parameter(s) {', '.join(map(repr, sorted(unknown)))}; "
                f"known: {', '.join(sorted(KNOWN_PARAMS))}"
            )
        raw = url.params.get("session_timeout") if session_timeout is None else session_timeout
        lifetime = url.params.get("lifetime", "process")
        if lifetime not in LIFETIMES:
            raise InvalidURLError(
                f"{url.where}: lifetime={lifetime!r} is not one of {', '.join(LIFETIMES)}"
            )
        return cls(
            lifetime=lifetime,
            name=url.host_string or url.path.strip("/"),
            session_timeout=(
                DEFAULT_SESSION_TIMEOUT
                if raw is None
                else parse_seconds(url.where, "session_timeout", raw)
            ),
        )


def open_memory_store(url: StoreURL, *, read_only: bool = False, **options: Any) -> MemoryStore:
    """Open ``memory://[NAME]``; options: ``clock``, ``session_timeout``, ``read_only``."""
    config = MemoryConfig.from_url(url, session_timeout=options.pop("session_timeout", None))
    clock = options.pop("clock", None)
    if options:
        raise TypeError(f"memory store: unknown option(s) {', '.join(sorted(options))}")
    server: MemoryServer | None = None
    if config.name:
        server = (
            MemoryServer.existing(config.name)
            if read_only
            else MemoryServer.named(
                config.name, clock=clock, forget_when_unused=config.lifetime == "sessions"
            )
        )
    if server is None:  # private, or (read-only) a name nobody opened: a detached empty tree
        server = MemoryServer(config.name, clock=clock)
    store = MemoryStore.connect(server, session_timeout=config.session_timeout, read_only=read_only)
    store.url = url
    return store


@hookimpl
def coordkit_register_stores(register: Any) -> None:
    register("memory", open_memory_store)
