"""What every controller candidate shares: a worker thread, the held term, session handling.

Store callbacks (watches, session listeners) only post work to the candidate's own worker thread,
so store calls never run on a store's event thread, and one candidate's steps never interleave.

A controller node no election can use (:class:`UnreadableControllerNodeError`) is left for an
operator to clear, and a candidate says so once per value written there. An unreadable
``/controller`` is held by nobody, yet no claim gets past it until it goes, which the watch on it
tells the candidate whose turn it is; an unreadable ``/controller_epoch`` stops a claim before it
is tried, and nothing watches it, so the candidate tries again every :data:`UNREADABLE_RETRY`
seconds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from coordkit.engine.controllership import (
    UnreadableControllerNodeError,
    controller_info,
    holds_controller,
)
from coordkit.errors import (
    ConnectionLossError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
)
from coordkit.store import MetadataStore, SessionState, Stat
from coordkit.store.watches import EventThread
from coordkit.strategies.elections import ControllerTerm, DeposedCallback, ElectedCallback
from coordkit.support.clock import Clock

log = logging.getLogger("coordkit.strategies.elections")

RETRY_DELAY = 0.1
#: Seconds between attempts while ``/controller`` or ``/controller_epoch`` is unreadable.
UNREADABLE_RETRY = 0.5


class CandidateBase:
    """Base of the controller candidates of this plugin.

    :ivar attempts: claims of ``/controller`` tried (each one epoch read plus one multi).
    :ivar wakeups: watch deliveries after a watch's first one, i.e. changes a candidate was woken
        for: on failover, the herd a strategy wakes.
    """

    strategy = "?"

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        clock: Clock,
        on_elected: ElectedCallback,
        on_deposed: DeposedCallback,
    ):
        self.store = store
        self.broker_id = broker_id
        self.clock = clock
        self._on_elected = on_elected
        self._on_deposed = on_deposed
        self._worker = EventThread(f"coordkit-{self.strategy}-candidate-{broker_id}")
        self._term: ControllerTerm | None = None
        self._closed = False
        self._started = False
        self._joined_session = 0
        self._watched: set[str] = set()
        self._armed: set[str] = set()
        self.attempts = 0
        self.wakeups = 0
        #: Whether a timer will try for the controller again (a controller node was unreadable).
        self._retry_pending = False
        #: Per controller node, the (czxid, mzxid) of the unreadable value last reported.
        self._reported: dict[str, tuple[int, int]] = {}

    # -- ControllerCandidate ---------------------------------------------------------------------

    @property
    def term(self) -> ControllerTerm | None:
        return self._term

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.store.add_listener(self._on_session)
        self._post(self._enter)

    def resign(self, term: ControllerTerm | None = None) -> None:
        self._post(self._resign_if_held, term)

    def _resign_if_held(self, term: ControllerTerm | None) -> None:
        if self._term is not None and (term is None or term == self._term):
            self._resign()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.store.remove_listener(self._on_session)
        done = threading.Event()

        def leave() -> None:
            try:
                self._leave()
            except StoreError:
                pass
            finally:
                self._lose_term()
                done.set()

        if self._worker.on_thread():
            leave()
        else:
            self._worker.post(leave)
            done.wait(timeout=30)
        self._worker.stop()

    # -- for subclasses --------------------------------------------------------------------------

    def _enter(self) -> None:
        raise NotImplementedError

    def _resign(self) -> None:
        raise NotImplementedError

    def _leave(self) -> None:
        raise NotImplementedError

    def _rejoin(self) -> None:
        """After a new session replaced a lost one."""
        raise NotImplementedError

    def _try_for_controller(self) -> None:
        """Claim the controller now if this candidate's turn has come (what a try stopped by an
        unreadable controller node does again)."""
        raise NotImplementedError

    def _win(self, term: ControllerTerm) -> None:
        self._term = term
        log.info("%s election: broker %s won epoch %s", self.strategy, self.broker_id, term.epoch)
        self._on_elected(term)

    def _mine(self, data: bytes, stat: Stat) -> bool:
        """Whether a ``/controller`` value names this broker and is owned by this session (an
        unreadable one is reported, and is nobody's)."""
        try:
            info = controller_info(self.store, data, stat)
        except UnreadableControllerNodeError as exc:
            self._report_unreadable(exc)
            return False
        return info.broker_id == self.broker_id and stat.ephemeral_owner == self.store.session_id

    def _still_held(self) -> bool:
        """Whether the store still shows this session holding ``/controller`` under a term (watch
        events can trail the candidate's own claim, so losing a term is checked on the store)."""
        return self._term is not None and holds_controller(self.store, self.broker_id)

    def _lose_term(self) -> None:
        term, self._term = self._term, None
        if term is not None:
            self._on_deposed(term)

    def quiet(self) -> bool:
        """Every watch this candidate holds has delivered its first (current-state) event and no
        step is queued: from here on, each delivery is a wakeup."""
        return self._armed <= self._watched and self._worker.flush(timeout=5)

    def _arming(self, watch_key: str) -> None:
        self._armed.add(watch_key)

    def _delivered(self, watch_key: str) -> None:
        """Count a wakeup unless this is the watch's first (current-state) delivery."""
        if watch_key in self._watched:
            self.wakeups += 1
        else:
            self._watched.add(watch_key)

    def _unwatched(self, watch_key: str) -> None:
        self._watched.discard(watch_key)
        self._armed.discard(watch_key)

    def _post(self, fn: Callable[..., Any], *args: Any) -> None:
        if not self._closed:
            self._worker.post(self._guarded, fn, args)

    def _guarded(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        if self._closed:
            return
        try:
            fn(*args)
        except UnreadableControllerNodeError as exc:
            self._report_unreadable(exc)
            self._try_again_later()
        except ConnectionLossError:
            # Try again once the connection is back (the session may well survive).
            timer = threading.Timer(RETRY_DELAY, self._post, (fn, *args))
            timer.daemon = True
            timer.start()
        except (SessionExpiredError, StoreClosedError):
            # The session listener drives what happens next (LOST, then a new session).
            pass

    def _report_unreadable(self, exc: UnreadableControllerNodeError) -> None:
        """Log ``exc`` once per value written to its node (every read finds it until cleared)."""
        written = (exc.stat.czxid, exc.stat.mzxid)
        if self._reported.get(exc.path) == written:
            return
        self._reported[exc.path] = written
        log.warning("%s election: broker %s: %s", self.strategy, self.broker_id, exc)

    def _try_again_later(self) -> None:
        """Try for the controller again in :data:`UNREADABLE_RETRY` seconds (one timer at a time:
        a node is as unreadable to every step that reads it)."""
        if self._retry_pending:
            return
        self._retry_pending = True
        timer = threading.Timer(UNREADABLE_RETRY, self._post, (self._retry,))
        timer.daemon = True
        timer.start()

    def _retry(self) -> None:
        self._retry_pending = False
        self._try_for_controller()

    # -- sessions --------------------------------------------------------------------------------

    def _on_session(self, state: SessionState) -> None:
        self._post(self._session_changed, state)

    def _session_changed(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            self._lose_term()
        elif state is SessionState.CONNECTED and self.store.session_id != self._joined_session:
            self._rejoin()

    def _mark_joined(self) -> None:
        self._joined_session = self.store.session_id
