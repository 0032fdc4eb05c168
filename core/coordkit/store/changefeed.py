"""Delivering a change feed (:meth:`coordkit.store.MetadataStore.watch_tree`) on a store client's
event thread, shared by the backends that have one.

A backend pushes what it learns, in store order, from whatever thread learns it (memory: the
committing writer, under the server lock; ZooKeeper: kazoo's connection thread, which must never
block). The feed turns batches of those items into :class:`~coordkit.store.TreeEvent` s with the
backend's ``resolve`` (ZooKeeper reads the nodes there) and hands them to the callback on the event
thread, one at a time and in order, alongside the client's other watches. It counts items received
and delivered, which is what :meth:`TreeFeed.flush` waits on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from coordkit.store import TreeCallback, TreeEvent, TreeWatch
from coordkit.store.watches import EventThread

log = logging.getLogger("coordkit.store")

T = TypeVar("T")

#: Items resolved and delivered per turn of the event thread (other watches run in between).
BATCH = 1000


class TreeFeed(TreeWatch, Generic[T]):
    """One feed: an inbox of backend items, resolved and delivered in order on ``events``.

    :param resolve: turns a batch of items (in order) into the events to deliver (in order); runs
        on the event thread and may do I/O.
    :param on_cancel: told once, when the feed is cancelled, so the backend stops pushing.
    """

    def __init__(
        self,
        path: str,
        callback: TreeCallback,
        events: EventThread,
        resolve: Callable[[list[T]], list[TreeEvent]],
        on_cancel: Callable[[TreeFeed[T]], None] | None = None,
    ):
        self.path = path
        self._callback = callback
        self._events = events
        self._resolve = resolve
        self._on_cancel = on_cancel
        self._cond = threading.Condition()
        self._inbox: deque[T] = deque()
        self._received = 0
        self._delivered = 0
        self._scheduled = False
        self.cancelled = False
        self.position: int | None = None

    # -- from the backend (any thread)
    def push(self, items: Iterable[T]) -> None:
        with self._cond:
            if self.cancelled:
                return
            before = len(self._inbox)
            self._inbox.extend(items)
            self._received += len(self._inbox) - before
            if self._scheduled or not self._inbox:
                return
            self._scheduled = True
        self._events.post(self._turn)

    # -- the watch
    def cancel(self) -> None:
        with self._cond:
            if self.cancelled:
                return
            self.cancelled = True
            self._delivered = self._received  # nothing more will come: no one waits for it
            self._inbox.clear()
            self._cond.notify_all()
        if self._on_cancel is not None:
            self._on_cancel(self)

    def flush(self, timeout: float = 10.0) -> bool:
        with self._cond:
            target = self._received
        if self._events.on_thread():
            while self._deliver_batch():
                pass
            return self._delivered >= target
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._delivered < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def backlog(self) -> int:
        """Items received but not yet delivered."""
        with self._cond:
            return self._received - self._delivered

    # -- the event thread
    def _turn(self) -> None:
        self._deliver_batch()
        with self._cond:
            if self._inbox and not self.cancelled:
                again = True
            else:
                again = self._scheduled = False
        if again:
            self._events.post(self._turn)  # let the client's other watches run in between

    def _deliver_batch(self) -> bool:
        """Resolve and deliver up to :data:`BATCH` items; False if there were none."""
        with self._cond:
            count = min(len(self._inbox), BATCH)
            batch = [self._inbox.popleft() for _ in range(count)]
        if not batch:
            return False
        try:
            events = self._resolve(batch)
        except Exception:
            log.exception("change feed for %s: resolving %d item(s) failed", self.path, count)
            events = []
        for event in events:
            if self.cancelled:
                break
            self.position = event.position
            try:
                self._callback(event)
            except Exception:
                log.exception("change feed callback for %s failed on %r", self.path, event)
        with self._cond:
            if not self.cancelled:
                self._delivered += count
            self._cond.notify_all()
        return True

    def __repr__(self) -> str:
        state = " cancelled" if self.cancelled else ""
        return f"<TreeFeed {self.path} at {self.position}{state}>"


def at_or_below(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies below it."""
    if root == "/":
        return True
    return path == root or (path.startswith(root) and path[len(root) : len(root) + 1] == "/")


def check_since(since: object) -> None:
    """Reject a ``since=`` that is not a position (before anything is registered)."""
    if since is not None and (isinstance(since, bool) or not isinstance(since, int) or since < 0):
        raise ValueError(f"watch_tree since= must be a position (an int >= 0), got {since!r}")
