"""What every controller candidate shares: a worker thread, the held term, session handling.

Store callbacks (watches, session listeners) only post work to the candidate's own worker thread,
so store calls never run on a store's event thread, and one candidate's steps never interleave.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from coordkit import layout
from coordkit.clock import Clock
from coordkit.elections import ControllerTerm, DeposedCallback, ElectedCallback
from coordkit.engine.controllership import holds_controller
from coordkit.errors import (
    ConnectionLossError,
    LayoutError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
)
from coordkit.store import MetadataStore, SessionState
from coordkit.watches import EventThread

log = logging.getLogger("coordkit.elections")

RETRY_DELAY = 0.1


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

    def _win(self, term: ControllerTerm) -> None:
        self._term = term
        log.info("%s election: broker %s won epoch %s", self.strategy, self.broker_id, term.epoch)
        self._on_elected(term)

    def _mine(self, data: bytes, owner: int) -> bool:
        """Whether a ``/controller`` value names this broker and is owned by this session."""
        try:
            info = layout.CONTROLLER_INFO.decode(data, layout.CONTROLLER)
        except LayoutError:
            return False
        return info.broker_id == self.broker_id and owner == self.store.session_id

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
        except ConnectionLossError:
            # Try again once the connection is back (the session may well survive).
            timer = threading.Timer(RETRY_DELAY, self._post, (fn, *args))
            timer.daemon = True
            timer.start()
        except (SessionExpiredError, StoreClosedError):
            # The session listener drives what happens next (LOST, then a new session).
            pass

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
