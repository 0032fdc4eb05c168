"""The ZooKeeper change feed (:meth:`~coordkit.store.MetadataStore.watch_tree`): a persistent
recursive watch (``addWatch``, ZooKeeper 3.6+) per feed, spoken on kazoo's connection directly.

kazoo (2.11, as installed) has no ``add_watch``, so this module brings the three requests it needs
(``addWatch``, ``removeWatches``, and a ``multiRead`` that keeps its reply's zxid) and reads the
notifications off the wire: :class:`TreeWatches` wraps the connection handler's
``_read_watch_event``, hands each created/changed/deleted notification below a feed's root to that
feed, then lets kazoo's own dispatch run for its one-shot watches (the server sends one
notification per connection, whichever watches asked for it).

Order. ZooKeeper sends a connection's notifications in zxid order, and before the reply to any
later request on it; kazoo reads them on its connection thread, which only appends them to the
feed's inbox. So once a write on this client returns, every change committed before it is in the
inbox, and :meth:`~coordkit.store.TreeWatch.flush` waits for exactly those.

Positions. A 3.8 notification carries a type and a path, no zxid (3.9 added it). The feed reads
the nodes after their notifications, on the store's event thread, a batch at a time with
``multiRead``: CREATED/CHANGED carry the node's data and stat as read, at position ``stat.mzxid``
(raised to the previous event's position if lower: the node still had that state then, as the
read came later); for a node deleted again before the read, the event carries no state, at the
previous event's position (its DELETED follows). A DELETED event's position is the parent's
``pzxid`` (the zxid of the parent's last child created or deleted, which is the delete unless a
later one follows), the read's zxid if the parent is gone too, or ``czxid - 1`` if the node was
created again meanwhile (a CREATED follows): always at or after the delete, never before it.

Gaps. The server forgets a connection's watches when the connection drops, and nothing replays
what happened meanwhile, so every reconnect (and a new session after expiry) re-adds the watch and
the feed delivers RESYNC at the re-add's zxid; so does a failed read. ``since`` cannot replay
history: the feed opens with RESYNC unless nothing at all was committed after ``since``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NoNodeError as KazooNoNode
from kazoo.exceptions import UnimplementedError
from kazoo.protocol.connection import CHANGED_EVENT, CREATED_EVENT, DELETED_EVENT
from kazoo.protocol.serialization import Watch as WireWatch
from kazoo.protocol.serialization import int_struct, write_string
from kazoo.protocol.states import KazooState

from coordkit.errors import ConnectionLossError, UnsupportedError
from coordkit.store import SessionState, TreeCallback, TreeEvent, TreeEventKind, paths
from coordkit.store.changefeed import TreeFeed
from coordkit_zookeeper import multiread, wire
from coordkit_zookeeper.errors import translate

if TYPE_CHECKING:
    from coordkit_zookeeper.session import ZooKeeperSession

log = logging.getLogger("coordkit.zookeeper")

ADD_WATCH = 106
REMOVE_WATCHES = 18
PERSISTENT_RECURSIVE = 1
#: removeWatches' WatcherType.Any: 3.8 has no type for persistent watches alone.
WATCHER_ANY = 3

_KINDS = {
    CREATED_EVENT: TreeEventKind.CREATED,
    CHANGED_EVENT: TreeEventKind.CHANGED,
    DELETED_EVENT: TreeEventKind.DELETED,
}

#: (event type, path relative to the chroot): a notification, resolved into an event by reading.
Notice = tuple[int, str]
Item = Notice | TreeEvent


class AddWatch:
    """``addWatch(path, PERSISTENT_RECURSIVE)``; ``on_reply(zxid)`` runs on kazoo's connection
    thread as the reply is read, before any notification that follows it."""

    type = ADD_WATCH
    __slots__ = ("client", "on_reply", "path")

    def __init__(self, path: str, client: Any, on_reply: Callable[[int], None]):
        self.path = path
        self.client = client
        self.on_reply = on_reply

    def serialize(self) -> bytes:
        return bytes(write_string(self.path) + int_struct.pack(PERSISTENT_RECURSIVE))

    def deserialize(self, buffer: bytes, offset: int) -> int:
        zxid: int = self.client.last_zxid  # kazoo set it from this reply's header just now
        self.on_reply(zxid)
        return zxid

    def __repr__(self) -> str:
        return f"AddWatch({self.path!r}, persistent recursive)"


class RemoveWatches:
    """``removeWatches(path, Any)``: drops every watch this connection holds on ``path``."""

    type = REMOVE_WATCHES
    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path

    def serialize(self) -> bytes:
        return bytes(write_string(self.path) + int_struct.pack(WATCHER_ANY))

    def deserialize(self, buffer: bytes, offset: int) -> None:
        return None

    def __repr__(self) -> str:
        return f"RemoveWatches({self.path!r})"


class PositionedMultiRead(multiread.MultiRead):
    """A ``multiRead`` whose result is ``(zxid, results)``: the reply header's zxid, the server's
    last applied transaction when it read, so every result is the node's state at that zxid."""

    __slots__ = ("client",)

    def __init__(self, paths_: list[str], client: Any):
        super().__init__(paths_)
        self.client = client

    def deserialize(self, buffer: bytes, offset: int) -> Any:
        zxid = self.client.last_zxid
        return zxid, super().deserialize(buffer, offset)


class _Subscription:
    """One feed's wiring: its root on the wire, whether the server holds its watch now, and where
    its resolver stands (event thread only)."""

    __slots__ = ("attached", "broken", "feed", "full_root", "last", "resume", "root")

    def __init__(self, root: str, full_root: str, since: int | None):
        self.root = root
        self.full_root = full_root
        self.feed: TreeFeed[Item] | None = None
        self.attached = False  # notifications count only between addWatch's reply and a drop
        self.resume = since  # first attach: skip RESYNC if nothing was committed after it
        self.broken = False  # a read failed: drop notices until the RESYNC that follows
        self.last = 0  # position of the last event resolved


class TreeWatches:
    """The change feeds of one :class:`~coordkit_zookeeper.store.ZooKeeperStore`."""

    def __init__(self, store: ZooKeeperSession):
        self._store = store
        self._subs: tuple[_Subscription, ...] = ()  # replaced whole: read without a lock
        self._lock = threading.Lock()
        self._hooked = False
        self._original: Callable[[bytes, int], Any] | None = None
        #: Created/changed/deleted notifications read off the wire (for tests and benchmarks).
        self.notifications = 0

    # -- opening and closing
    def open(self, path: str, callback: TreeCallback, since: int | None) -> TreeFeed[Item]:
        store = self._store
        store._check_usable(path)
        self._hook()
        sub = _Subscription(path, store._full(path), since)
        feed: TreeFeed[Item] = TreeFeed(
            path,
            callback,
            store._events,
            lambda items: self._resolve(sub, items),
            lambda _feed: self._cancelled(sub),
        )
        sub.feed = feed
        with self._lock:
            self._subs = (*self._subs, sub)
        batch = self._attach(sub)
        failure: BaseException | None = None
        if not batch.wait(store._timeout):
            failure = ConnectionLossError(
                f"no reply from ZooKeeper to addWatch within {store._timeout:g}s", path=path
            )
        elif isinstance(batch.results[0], BaseException):
            failure = batch.results[0]
        if failure is None:
            return feed
        feed.cancel()
        if isinstance(failure, UnimplementedError):
            raise UnsupportedError(
                f"ZooKeeper at {store.url.redacted()} does not support addWatch "
                "(persistent recursive watches need ZooKeeper 3.6 or later)"
            )
        raise translate(failure, path=path, action="watch_tree", closing=store._closing)

    def close(self) -> None:
        """The store is closing: end every feed (nothing is sent)."""
        with self._lock:
            subs, self._subs = self._subs, ()
        for sub in subs:
            if sub.feed is not None:
                sub.feed.cancel()

    def _cancelled(self, sub: _Subscription) -> None:
        with self._lock:
            if sub not in self._subs:
                return
            self._subs = tuple(s for s in self._subs if s is not sub)
            shared = any(s.full_root == sub.full_root for s in self._subs)
        sub.attached = False
        if shared or self._store._closing:
            return
        # Any type: also the one-shot watches on the root itself, which the hub re-reads (and so
        # re-arms) below; its reads follow the removal on the session, so nothing is missed.
        wire.submit(self._store.client, [RemoveWatches(sub.full_root)])
        self._store._hub.notify_many([("data", sub.root), ("children", sub.root)])

    def _attach(self, sub: _Subscription) -> wire.Batch:
        """Ask the server for the watch (again); its reply attaches the feed and queues RESYNC."""
        sub.attached = False

        def attached(zxid: int) -> None:
            if sub.feed is None or sub.feed.cancelled:
                return
            sub.attached = True
            resume, sub.resume = sub.resume, None
            if resume != zxid:
                sub.feed.push([TreeEvent(TreeEventKind.RESYNC, sub.root, max(zxid, 0))])

        return wire.submit(
            self._store.client, [AddWatch(sub.full_root, self._store.client, attached)]
        )

    # -- kazoo's connection thread
    def on_state(self, state: str) -> None:
        """A session state change (kazoo's listener): the server's watches went with the
        connection, so detach; once connected again, ask for them anew."""
        subs = self._subs
        if state == KazooState.CONNECTED:
            for sub in subs:
                self._attach(sub)
        else:
            for sub in subs:
                sub.attached = False

    def _hook(self) -> None:
        with self._lock:
            if self._hooked:
                return
            connection = self._store.client._connection
            self._original = connection._read_watch_event
            connection._read_watch_event = self._on_wire_event
            # The batching handler reads runs of notifications without kazoo (see wire.py).
            connection.notice_sink = self._on_notices
            self._hooked = True

    def _on_wire_event(self, buffer: bytes, offset: int) -> None:
        """A notification kazoo reads (one a one-shot kazoo watch waits on, or any notification
        on kazoo's stock handler): routed as a run of one, then kazoo dispatches it."""
        try:
            notification, _ = WireWatch.deserialize(buffer, offset)
        except Exception:  # never break kazoo's connection loop
            log.exception("change feed: could not read a notification")
        else:
            self._on_notices([(notification.type, notification.path)])
        assert self._original is not None
        self._original(buffer, offset)

    def _on_notices(self, notices: list[wire.Notice]) -> None:
        """Route notifications (in wire order, paths as on the wire) to every attached feed whose
        root they are at or below, each feed given its share in one push; other types than
        created, changed and deleted are not a feed's."""
        try:
            attached = [sub for sub in self._subs if sub.attached]
            self.notifications += sum(1 for kind, _ in notices if kind in _KINDS)
            if not attached:
                return
            chroot = self._store._chroot
            cut = len(chroot) if chroot else 0  # the store's _relative, for paths below a root
            for sub in attached:
                root = sub.full_root
                below = "/" if root == "/" else root + "/"  # at_or_below, as one prefix test
                share: list[Notice] = [
                    (kind, path[cut:] or "/")
                    for kind, path in notices
                    if kind in _KINDS and (path.startswith(below) or path == root)
                ]
                if share:
                    assert sub.feed is not None
                    sub.feed.push(share)
        except Exception:  # never break kazoo's connection loop
            log.exception("change feed: could not route %d notification(s)", len(notices))

    # -- the store's event thread
    def _resolve(self, sub: _Subscription, items: list[Item]) -> list[TreeEvent]:
        out: list[TreeEvent] = []
        notices: list[Notice] = []
        for item in items:
            if isinstance(item, TreeEvent):
                out.extend(self._read_notices(sub, notices))
                notices = []
                sub.broken = False
                sub.last = max(sub.last, item.position)
                out.append(TreeEvent(item.kind, item.path, sub.last))
            else:
                notices.append(item)
        out.extend(self._read_notices(sub, notices))
        return out

    def _read_notices(self, sub: _Subscription, notices: list[Notice]) -> list[TreeEvent]:
        if not notices or sub.broken:
            return []
        store = self._store
        wanted: dict[str, None] = {}
        for event_type, path in notices:
            wanted[path] = None
            if event_type == DELETED_EVENT and path != "/":
                wanted[paths.parent(path)] = None
        order = list(wanted)
        chunks = multiread.chunks([store._full(p) for p in order])
        client = store.client
        batch = wire.submit(client, [PositionedMultiRead(list(c), client) for c in chunks])
        read: dict[str, tuple[int, Any]] = {}
        failure: str | None = None
        # A slow server is waited for as long as the session is connected: re-reading the whole
        # subtree instead (a RESYNC) would load an overloaded server far more than this read.
        while not batch.wait(store._timeout):
            if store.state is not SessionState.CONNECTED:
                failure = f"no reply for {store._timeout:g}s, then {store.state.value}"
                break
            log.info(
                "%s: change feed read of %d nodes: no reply for %gs yet; waiting",
                store.url.redacted(),
                len(order),
                store._timeout,
            )
        if failure is None:
            at = 0
            for reply in batch.results:
                if isinstance(reply, BaseException):
                    failure = type(reply).__name__
                    break
                zxid, results = reply
                for result in results:
                    read[order[at]] = (zxid, result)
                    at += 1
        if failure is None:
            failure = next(
                (
                    type(result).__name__
                    for _zxid, result in read.values()
                    if isinstance(result, BaseException) and not isinstance(result, KazooNoNode)
                ),
                None,
            )
        if failure is not None:
            # What the notices said is lost: start over from a RESYNC, once the server (or the
            # connection coming back) answers a fresh addWatch.
            connected = store.state is SessionState.CONNECTED
            # A session being closed or cut fails its reads too: expected, not worth a warning.
            log.log(
                logging.WARNING if connected else logging.INFO,
                "%s: change feed read of %d nodes failed (%s); resyncing %s",
                store.url.redacted(),
                len(order),
                failure,
                sub.root,
            )
            sub.broken = True
            if connected:
                self._attach(sub)
            return []
        from coordkit_zookeeper.requests import to_stat

        out: list[TreeEvent] = []
        for event_type, path in notices:
            zxid, result = read[path]
            kind = _KINDS[event_type]
            if kind is TreeEventKind.DELETED:
                if isinstance(result, KazooNoNode):
                    parent = read.get(paths.parent(path)) if path != "/" else None
                    bound = zxid
                    if parent is not None and not isinstance(parent[1], BaseException):
                        bound = min(zxid, parent[1][1].pzxid)
                else:
                    bound = result[1].czxid - 1  # created again since: its CREATED follows
                sub.last = max(sub.last, bound)
                out.append(TreeEvent(kind, path, sub.last))
                continue
            if isinstance(result, KazooNoNode):
                # Deleted again before the read: reported without its state; its DELETED follows.
                out.append(TreeEvent(kind, path, sub.last))
                continue
            data, zstat = result
            stat = to_stat(zstat)
            sub.last = max(sub.last, stat.mzxid)
            out.append(TreeEvent(kind, path, sub.last, data, stat))
        return out
