"""Level-triggered, persistent watches shared by every store backend.

A backend tells the :class:`WatchHub` that something at a path *may* have changed; the hub re-reads
the node on the store's event thread and delivers the new state to every watcher whose last seen
state differs. Because delivery is driven by re-reading, a reconnect needs only :meth:`WatchHub.resync`
to catch up on anything missed, and coalesced notifications never lose the final state.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from coordkit.errors import ConnectionLossError, SessionExpiredError, StoreClosedError
from coordkit.store import (
    ChildrenCallback,
    ChildrenEvent,
    DataCallback,
    DataEvent,
    Stat,
    Watch,
)

log = logging.getLogger("coordkit.store")

DataReader = Callable[[str], "tuple[bytes, Stat] | None"]
ChildrenReader = Callable[[str], "tuple[list[str], Stat] | None"]

_STOP = object()


class EventThread:
    """Runs posted callables one at a time, in order, on a daemon thread."""

    def __init__(self, name: str):
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        self._queue.put((fn, args))

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything posted so far has run (returns False on timeout)."""
        if self.on_thread():
            return True
        done = threading.Event()
        self.post(done.set)
        return done.wait(timeout)

    def stop(self) -> None:
        self._queue.put(_STOP)
        if not self.on_thread():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("store event callback %r failed", fn)


class _HubWatch(Watch):
    def __init__(self, hub: WatchHub, kind: str, path: str, callback: Callable[[Any], Any]):
        self._hub = hub
        self.kind = kind
        self.path = path
        self.callback = callback
        self.token: object = _UNSEEN
        self.cancelled = False

    def cancel(self) -> None:
        self._hub._remove(self)

    def __repr__(self) -> str:
        return f"<Watch {self.kind} {self.path}{' cancelled' if self.cancelled else ''}>"


_UNSEEN = object()


class WatchHub:
    """Registry of watches for one store client.

    :param read_data: reads ``(data, stat)`` of a path or ``None`` if missing, (re-)arming whatever
        server-side notification the backend needs.
    :param read_children: reads ``(children, stat)`` or ``None``, likewise.
    """

    def __init__(
        self,
        events: EventThread,
        read_data: DataReader,
        read_children: ChildrenReader,
        on_interest: Callable[[tuple[str, str]], None] | None = None,
    ):
        self._events = events
        self._read = {"data": read_data, "children": read_children}
        self._watches: dict[tuple[str, str], list[_HubWatch]] = {}
        self._pending: set[tuple[str, str]] = set()
        self._stale: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        # Told (outside the lock) when a (kind, path) gains its first watch or loses its last, so
        # a backend can send only the changes someone watches; it reads is_watched() for the truth.
        self._on_interest = on_interest

    # -- registration
    def add_data_watch(self, path: str, callback: DataCallback) -> Watch:
        return self._add("data", path, callback)

    def add_children_watch(self, path: str, callback: ChildrenCallback) -> Watch:
        return self._add("children", path, callback)

    def _add(self, kind: str, path: str, callback: Callable[[Any], Any]) -> Watch:
        watch = _HubWatch(self, kind, path, callback)
        with self._lock:
            watchers = self._watches.setdefault((kind, path), [])
            first = not watchers
            watchers.append(watch)
        if first and self._on_interest is not None:
            self._on_interest((kind, path))
        self._events.post(self._refresh, kind, path)
        return watch

    def _remove(self, watch: _HubWatch) -> None:
        key = (watch.kind, watch.path)
        with self._lock:
            watch.cancelled = True
            watchers = self._watches.get(key, [])
            if watch in watchers:
                watchers.remove(watch)
            last = not watchers and self._watches.pop(key, None) is not None
        if last and self._on_interest is not None:
            self._on_interest(key)

    def is_watched(self, kind: str, path: str) -> bool:
        return (kind, path) in self._watches

    def watched(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._watches)

    # -- notifications from the backend (any thread)
    def notify_data(self, path: str) -> None:
        self._notify("data", path)

    def notify_children(self, path: str) -> None:
        self._notify("children", path)

    def _notify(self, kind: str, path: str) -> None:
        self.notify_many([(kind, path)])

    def notify_many(self, changes: list[tuple[str, str]]) -> None:
        """Notify a batch of ``(kind, path)`` changes (kind ``"data"`` or ``"children"``)."""
        if not self._watches:
            return
        # A data event may mean the node was created or deleted, which a children watch on the same
        # path must see too; an unchanged state is filtered out by the watch's token on re-read.
        keys = dict.fromkeys(changes)
        keys.update(dict.fromkeys(("children", path) for kind, path in changes if kind == "data"))
        with self._lock:
            due = [key for key in keys if key in self._watches and key not in self._pending]
            self._pending.update(due)
        for kind, path in due:
            self._events.post(self._refresh, kind, path)

    def resync(self) -> None:
        """Re-read every watched node (after a reconnect or a new session)."""
        for kind, path in self.watched():
            self._notify(kind, path)

    def stale(self) -> bool:
        return bool(self._stale)

    # -- event thread
    def _refresh(self, kind: str, path: str) -> None:
        key = (kind, path)
        with self._lock:
            self._pending.discard(key)
            watchers = list(self._watches.get(key, ()))
        if not watchers:
            return
        try:
            state = self._read[kind](path)
        except (ConnectionLossError, SessionExpiredError):
            # Re-read on resync; the watcher keeps its last state until then.
            with self._lock:
                self._stale.add(key)
            return
        except StoreClosedError:
            return
        with self._lock:
            self._stale.discard(key)
        if state is None:
            token: object = None
            event: DataEvent | ChildrenEvent = (
                DataEvent(path, None, None) if kind == "data" else ChildrenEvent(path, None, None)
            )
        else:
            value, stat = state
            if kind == "data":
                token = (stat.czxid, stat.mzxid)
                event = DataEvent(path, value, stat)  # type: ignore[arg-type]
            else:
                token = (stat.czxid, stat.pzxid, tuple(value))
                event = ChildrenEvent(path, tuple(sorted(value)), stat)  # type: ignore[arg-type]
        for watch in watchers:
            if watch.cancelled or watch.token == token:
                continue
            watch.token = token
            try:
                watch.callback(event)
            except Exception:
                log.exception("watch callback for %s %s failed", kind, path)
