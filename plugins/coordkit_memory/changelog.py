"""The memory server's change log: every committed change with the state it wrote, for change
feeds (:meth:`~coordkit.store.MetadataStore.watch_tree`).

Recording starts with a server's first feed (a server nobody follows pays nothing) and keeps the
last ``history`` changes, so a feed resumes exactly from any position they cover: ``since=P``, a
client reconnecting, a session that expired while its client was cut off. Older positions get a
RESYNC. Positions are the server's zxids; a transaction's changes share one.

Changes are recorded as the server applies them (under its lock), dropped if the transaction rolls
back, and published to the feeds in commit order by the server's flush, still under its lock, so
two writers flushing at once cannot swap their changes.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from coordkit.store import SessionState, Stat, TreeCallback, TreeEvent, TreeEventKind
from coordkit.store.changefeed import TreeFeed, at_or_below
from coordkit.store.watches import EventThread

if TYPE_CHECKING:
    from coordkit_memory.client import MemoryClient

#: Changes kept for resuming feeds (about 300 bytes each plus the values they wrote).
DEFAULT_HISTORY = 10_000

#: (kind, path, position, data, stat): a recorded change, turned into a TreeEvent on delivery.
Change = tuple[TreeEventKind, str, int, bytes | None, Stat | None]


class _Node(Protocol):
    data: bytes

    def stat(self) -> Stat: ...


class _Subscription:
    __slots__ = ("behind", "client", "feed", "pushed", "root")

    def __init__(self, feed: TreeFeed[Change], root: str, client: MemoryClient, pushed: int):
        self.feed = feed
        self.root = root
        self.client = client
        self.pushed = pushed  # position of the last change pushed
        self.behind = False  # missed changes while its client was cut off


def to_events(changes: list[Change]) -> list[TreeEvent]:
    return [
        TreeEvent(kind, path, position, data, stat) for kind, path, position, data, stat in changes
    ]


class ChangeLog:
    """The change log of one :class:`~coordkit_memory.server.MemoryServer`.

    :param lock: the server's lock: recording and :meth:`publish` run with it held;
        :meth:`subscribe`, :meth:`catch_up` and :meth:`forget` take it themselves.
    :param position: the server's current zxid.
    """

    def __init__(
        self, lock: threading.RLock, position: Callable[[], int], history: int = DEFAULT_HISTORY
    ):
        if history < 1:
            raise ValueError(f"change history must keep at least 1 change, got {history}")
        self._lock = lock
        self._position = position
        self._history: deque[Change] = deque(maxlen=history)
        # Every change after the floor is in the history; None: not recording yet.
        self._floor: int | None = None
        self._pending: list[Change] = []
        self._subscriptions: list[_Subscription] = []

    # -- recording (the server holds its lock)
    def created(self, path: str, node: _Node, zxid: int) -> None:
        if self._floor is not None:
            self._pending.append((TreeEventKind.CREATED, path, zxid, node.data, node.stat()))

    def changed(self, path: str, node: _Node, zxid: int) -> None:
        if self._floor is not None:
            self._pending.append((TreeEventKind.CHANGED, path, zxid, node.data, node.stat()))

    def deleted(self, path: str, zxid: int) -> None:
        if self._floor is not None:
            self._pending.append((TreeEventKind.DELETED, path, zxid, None, None))

    def rollback(self, zxid: int) -> None:
        """Forget what the failed transaction ``zxid`` recorded (it is the latest)."""
        pending = self._pending
        while pending and pending[-1][2] == zxid:
            pending.pop()

    def publish(self) -> None:
        """Append committed changes to the history and push them to the feeds they concern."""
        if not self._pending:
            return
        changes, self._pending = self._pending, []
        history = self._history
        for change in changes:
            if len(history) == history.maxlen:
                self._floor = history[0][2]
            history.append(change)
        for sub in self._subscriptions:
            if sub.behind:
                continue
            if sub.client.state is not SessionState.CONNECTED:
                sub.behind = True  # catch_up replays from sub.pushed on reconnect
                continue
            root = sub.root
            mine = [c for c in changes if at_or_below(c[1], root)]
            if mine:
                sub.pushed = mine[-1][2]
                sub.feed.push(mine)

    # -- feeds
    def subscribe(
        self,
        client: MemoryClient,
        root: str,
        callback: TreeCallback,
        since: int | None,
        events: EventThread,
    ) -> TreeFeed[Change]:
        with self._lock:
            self.publish()  # pending changes belong before the feed's start
            now = self._position()
            if self._floor is None:
                self._floor = now
            feed: TreeFeed[Change] = TreeFeed(root, callback, events, to_events, self._cancelled)
            sub = _Subscription(feed, root, client, now)
            self._start(sub, since, now)
            self._subscriptions.append(sub)
            return feed

    def catch_up(self, client: MemoryClient) -> None:
        """``client`` is connected again: give its feeds what they missed (or RESYNC)."""
        with self._lock:
            self.publish()
            now = self._position()
            for sub in self._subscriptions:
                if sub.client is client and sub.behind:
                    sub.behind = False
                    self._start(sub, sub.pushed, now)

    def forget(self, client: MemoryClient) -> None:
        """``client`` closed: end its feeds."""
        with self._lock:
            feeds = [sub.feed for sub in self._subscriptions if sub.client is client]
        for feed in feeds:
            feed.cancel()

    def _start(self, sub: _Subscription, since: int | None, now: int) -> None:
        """Push what followed ``since`` if the history covers it, else RESYNC at ``now``."""
        assert self._floor is not None
        sub.pushed = now
        if since is not None and self._floor <= since <= now:
            history = self._history
            first = bisect.bisect_right(history, since, key=_position_of)
            missed = [history[i] for i in range(first, len(history))]
            mine = [c for c in missed if at_or_below(c[1], sub.root)]
            if mine:
                sub.feed.push(mine)
            return
        sub.feed.push([(TreeEventKind.RESYNC, sub.root, now, None, None)])

    def _cancelled(self, feed: TreeFeed[Any]) -> None:
        with self._lock:
            self._subscriptions = [s for s in self._subscriptions if s.feed is not feed]

    # -- inspection
    def retained(self) -> int:
        """Changes in the history now."""
        with self._lock:
            return len(self._history)


def _position_of(change: Change) -> int:
    return change[2]
