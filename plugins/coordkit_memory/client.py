"""What the in-memory server knows of a connected client: the calls it makes on one.

:class:`~coordkit_memory.store.MemoryStore` keeps this protocol; the server and its change log
are typed against it, so neither imports the client that imports them.
"""

from __future__ import annotations

from typing import Protocol

from coordkit.store import SessionState

#: Seconds a client's session outlives its connection, unless the URL says otherwise.
DEFAULT_SESSION_TIMEOUT = 10.0


class MemoryClient(Protocol):
    """A client session as the server sees it."""

    @property
    def state(self) -> SessionState:
        """Its session's state (feeds hold changes back while it is not connected)."""
        ...

    def watches(self, key: tuple[str, str]) -> bool:
        """Whether it holds a watch on ``key`` (``(kind, path)``)."""
        ...

    def _changed(self, events: list[tuple[str, str]]) -> None:
        """Deliver the ``(kind, path)`` changes it watches (on the server's flush)."""
        ...

    def _session_expired(self, session_id: int) -> None:
        """Its session ``session_id`` expired on the server."""
        ...
