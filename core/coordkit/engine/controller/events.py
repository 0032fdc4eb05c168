"""The controller's event loop (Kafka's ``ControllerEventManager``), level-triggered.

Watches, session changes and timers never carry work; they only *mark* what the controller should
look at again (brokers, topics, one topic's assignment, deletions, ISR notifications, or
everything). One thread takes the marks, runs a reconciliation pass computed from what the store
holds now, then serves queued requests (controlled shutdown, preferred election). Marks raised
while a pass runs merge into the next pass, so a burst of events costs one pass.

A pass that fails for any reason but the end of the term (a connection lost mid-write, a server
restarting, a timeout whose outcome is unknown, an unexpected value) marks *everything* and is
retried after a backoff: the next pass re-reads the store and plans again, so a lost write is
simply planned again. Failures are logged once per kind, never in a tight loop.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any

import attrs

from coordkit.engine.errors import ControllerFencedError, EngineError, StateConflictError
from coordkit.errors import ConnectionLossError, SessionExpiredError, StoreClosedError
from coordkit.support.clock import Clock

log = logging.getLogger("coordkit.engine.controller")

#: First and longest pause before a failed pass is tried again (seconds).
RETRY_BACKOFF = (0.05, 2.0)


@attrs.define
class Marks:
    """What the next pass must look at again."""

    everything: bool = False
    brokers: bool = False
    topics: bool = False
    deletions: bool = False
    isr_changes: bool = False
    reassignments: bool = False
    preferred: bool = False
    assignments: set[str] = attrs.field(factory=set)

    def any(self) -> bool:
        return (
            self.everything
            or self.brokers
            or self.topics
            or self.deletions
            or self.isr_changes
            or self.reassignments
            or self.preferred
            or bool(self.assignments)
        )

    def __str__(self) -> str:
        """The marks set, briefly (a log line names what a pass looked at)."""
        flags = [f.name for f in attrs.fields(Marks) if f.name != "assignments"]
        names = [name for name in flags if getattr(self, name)]
        if self.assignments:
            names.append(f"assignments of {len(self.assignments)} topics")
        return ", ".join(names) or "nothing"

    def merge(self, other: Marks) -> None:
        self.everything |= other.everything
        self.brokers |= other.brokers
        self.topics |= other.topics
        self.deletions |= other.deletions
        self.isr_changes |= other.isr_changes
        self.reassignments |= other.reassignments
        self.preferred |= other.preferred
        self.assignments |= other.assignments


@attrs.define
class _Request:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    future: concurrent.futures.Future[Any]


class ControllerEventManager:
    """One thread that turns marks into reconciliation passes and serves requests.

    :param reconcile: runs one pass for the given marks (on this manager's thread).
    :param tick: runs after every wake-up (timers such as the leader-imbalance check); returns the
        monotonic time it wants to run again at, or ``None``.
    :param end_term: called with an error that ends the term (fencing, a session gone); the
        manager stops after it.
    """

    def __init__(
        self,
        name: str,
        *,
        clock: Clock,
        reconcile: Callable[[Marks], None],
        tick: Callable[[], float | None],
        end_term: Callable[[BaseException], None],
    ):
        self._clock = clock
        self._reconcile = reconcile
        self._tick = tick
        self._end_term = end_term
        self._cond = threading.Condition()
        self._marks = Marks(everything=True)
        self._requests: list[_Request] = []
        self._stopped = False
        self._busy = False
        self._retry_at: float | None = None
        self._backoff = RETRY_BACKOFF[0]
        self._logged_failures: set[str] = set()
        self.passes = 0
        self.failed_passes = 0
        #: Set once a pass has completed without failing (the controller has loaded).
        self.caught_up = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    # -- any thread ----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def halt(self) -> None:
        """Stop taking work, without waiting for a pass in progress to end (safe on a store's
        event thread: the pass may be waiting on that thread)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._fail_requests()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if threading.current_thread() is not self._thread and self._thread.is_alive():
            self._thread.join(timeout=30)
        self._fail_requests()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def mark(self, marks: Marks) -> None:
        with self._cond:
            if self._stopped:
                return
            self._marks.merge(marks)
            if marks.everything and self._retry_at is not None:
                # A reconnect (or anything asking for a full re-read) ends the backoff.
                self._retry_at = self._clock.monotonic()
            self._cond.notify_all()

    def request(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._cond:
            if not self._stopped:
                self._requests.append(_Request(fn, args, future))
                self._cond.notify_all()
                return future
        future.set_exception(EngineError("the controller has stopped"))
        return future

    def idle(self) -> bool:
        """Caught up, nothing marked or queued, no pass running and no retry pending."""
        with self._cond:
            return (
                self.caught_up.is_set()
                and not self._busy
                and not self._marks.any()
                and not self._requests
                and self._retry_at is None
            )

    def retrying(self) -> bool:
        """Whether the last pass failed and the next one waits for its backoff."""
        return self._retry_at is not None

    # -- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        wake_at: float | None = None
        while True:
            with self._cond:
                while not self._stopped and not self._due(wake_at):
                    self._cond.wait(self._wait_seconds(wake_at))
                if self._stopped:
                    return
                marks, self._marks = self._marks, Marks()
                if self._retry_at is not None and self._clock.monotonic() >= self._retry_at:
                    self._retry_at = None
                    marks.everything = True
                requests, self._requests = self._requests, []
                self._busy = True
            try:
                wake_at = self._step(marks, requests)
            finally:
                with self._cond:
                    self._busy = False

    def _due(self, wake_at: float | None) -> bool:
        now = self._clock.monotonic()
        if self._retry_at is not None:
            # While backing off, only the retry (or stop) wakes the loop.
            return now >= self._retry_at
        return self._marks.any() or bool(self._requests) or (wake_at is not None and now >= wake_at)

    def _wait_seconds(self, wake_at: float | None) -> float:
        now = self._clock.monotonic()
        targets = [t for t in (self._retry_at, wake_at) if t is not None]
        if not targets:
            return 0.5
        return min(0.5, max(0.001, min(targets) - now))

    def _step(self, marks: Marks, requests: list[_Request]) -> float | None:
        try:
            if marks.any():
                self.passes += 1
                self._reconcile(marks)
                self.caught_up.set()
            for index, request in enumerate(requests):
                if request.future.cancelled():
                    continue
                try:
                    result = request.fn(*request.args)
                except BaseException as exc:
                    if _ends_term(exc) or _retryable(exc):
                        # Served again after the store has been re-read.
                        self._failed(exc, requests[index:])
                        return None
                    request.future.set_exception(exc)
                else:
                    request.future.set_result(result)
            wake_at = self._tick()
        except BaseException as exc:
            self._failed(exc, requests)
            return None
        self._backoff = RETRY_BACKOFF[0]
        return wake_at

    def _failed(self, exc: BaseException, unserved: list[_Request]) -> None:
        unserved = [r for r in unserved if not r.future.done()]
        if _ends_term(exc):
            self._end_term(exc)
            with self._cond:
                self._stopped = True
                unserved += self._requests
                self._requests = []
            for request in unserved:
                if not request.future.done():
                    request.future.set_exception(exc)
            return
        self.failed_passes += 1
        kind = type(exc).__name__
        if isinstance(exc, ConnectionLossError):
            log.info(
                "controller pass interrupted (%s); re-reading the store in %.2fs",
                exc,
                self._backoff,
            )
        elif kind not in self._logged_failures:
            self._logged_failures.add(kind)
            log.warning(
                "controller pass failed; re-reading the store and trying again in %.2fs",
                self._backoff,
                exc_info=exc,
            )
        else:
            log.debug("controller pass failed again: %s", exc)
        with self._cond:
            self._requests[:0] = unserved
            self._retry_at = self._clock.monotonic() + self._backoff
            self._marks.everything = True
            self._cond.notify_all()
        self._backoff = min(self._backoff * 2, RETRY_BACKOFF[1])

    def _fail_requests(self) -> None:
        with self._cond:
            pending, self._requests = self._requests, []
        for request in pending:
            if not request.future.done():
                request.future.set_exception(EngineError("the controller has stopped"))


def _ends_term(exc: BaseException) -> bool:
    return isinstance(exc, ControllerFencedError | SessionExpiredError | StoreClosedError)


def _retryable(exc: BaseException) -> bool:
    """Errors after which a request is served again once the store has been re-read."""
    return isinstance(exc, ConnectionLossError | StateConflictError)
