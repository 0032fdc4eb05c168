"""What the helpers of the ZooKeeper store use of it: the session's raw request paths.

:class:`~coordkit_zookeeper.store.ZooKeeperStore` keeps this protocol; the subtree operations
(:mod:`.subtrees`) and the change feeds (:mod:`.treewatch`) are typed against it, so neither
imports the store that imports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from coordkit.store import Op, SessionState, Stat
from coordkit.store.urls import StoreURL
from coordkit.store.watches import EventThread, WatchHub


class ZooKeeperSession(Protocol):
    """One ZooKeeper store session as its helpers see it."""

    url: StoreURL
    _chroot: str
    _closing: bool
    _timeout: float
    _client: Any  # kazoo's KazooClient
    _events: EventThread
    _hub: WatchHub

    @property
    def client(self) -> Any:
        """kazoo's client of the session."""
        ...

    @property
    def state(self) -> SessionState: ...

    def exists(self, path: str) -> Stat | None: ...

    def _check_usable(self, path: str | None) -> None:
        """Raise the store error for a session that cannot take requests now."""
        ...

    def _full(self, path: str) -> str:
        """``path`` with the chroot prefix, for raw protocol requests."""
        ...

    def _run(self, requests: Sequence[Any], action: str) -> list[Any]:
        """Pipeline raw requests; one reply or kazoo exception per request, in order."""
        ...

    def _multi(self, ops: list[Op], *, tag: bool) -> list[Any]:
        """Commit ``ops`` in one transaction."""
        ...

    def _raise_failed_op(self, reply: list[Any], ops: Sequence[Op], *, tag: bool) -> None:
        """Raise the error of the op that failed a multi, if one did."""
        ...

    def _wait(self, result: Any, path: str | None, action: str, **context: Any) -> Any:
        """Wait for an asynchronous kazoo result, translating its failure."""
        ...
