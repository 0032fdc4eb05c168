"""One client session's state and listeners, kept the same way by every store backend.

A :class:`SessionKeeper` holds the session's id and state and tells the session listeners of each
change; a backend decides when the state changes (its connection, its heartbeats) and reports it
here. The rules every backend follows:

* a change to the state the session is already in is no change: listeners hear of none;
* CLOSED is final: nothing changes a closed session's state again;
* :meth:`SessionKeeper.suspend` (a connection failed) moves only a CONNECTED session, so a failure
  seen late neither hides LOST nor repeats SUSPENDED;
* listeners run on the store's event thread, one at a time, in the order of the changes, between
  the watch callbacks queued before and after each change.

:class:`KeptSessionStore` answers the session members of :class:`MetadataStore` from the store's
keeper, so a backend writes none of them.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from coordkit.store.data_model import SessionState
from coordkit.store.events import SessionListener
from coordkit.store.interface import MetadataStore

if TYPE_CHECKING:
    from coordkit.store.watches import EventThread

_log = logging.getLogger("coordkit.store")


class SessionKeeper:
    """The state, id and listeners of one client session.

    :param events: the store's event thread, on which listeners are called.
    :param state: the state before the first change (CONNECTED for a backend that opens its first
        session before returning, SUSPENDED for one that is still connecting).
    :param name: names the client in the debug log of changes.
    :param log: the backend's logger.
    """

    def __init__(
        self,
        events: EventThread,
        *,
        state: SessionState = SessionState.CONNECTED,
        name: str = "",
        log: logging.Logger = _log,
    ):
        self._events = events
        self._state = state
        #: The current session's id (0 before the first session); the backend sets it.
        self.session_id = 0
        self._name = name
        self._log = log
        self._listeners: list[SessionListener] = []
        self._state_lock = threading.Lock()  # the state and the listener list

    @property
    def state(self) -> SessionState:
        return self._state

    def add_listener(self, listener: SessionListener) -> None:
        with self._state_lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        with self._state_lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def change_state(self, state: SessionState) -> bool:
        """Move to ``state`` and tell the listeners; False if nothing changed (the session was in
        ``state`` already, or is closed)."""
        return self._change(state, only_from=None)

    def suspend(self) -> bool:
        """A connection failed: CONNECTED → SUSPENDED (False, and no change, from any other
        state: a session being replaced or closed stays as it is)."""
        return self._change(SessionState.SUSPENDED, only_from=SessionState.CONNECTED)

    def _change(self, state: SessionState, only_from: SessionState | None) -> bool:
        with self._state_lock:
            current = self._state
            if current is state or current is SessionState.CLOSED:
                return False
            if only_from is not None and current is not only_from:
                return False
            self._state = state
            # Posted before the lock is let go: two changes racing reach the listeners in the
            # order they were made, so the last state a listener hears is the session's state.
            for listener in self._listeners:
                self._events.post(listener, state)
        self._log.debug("%s: session %#x %s", self._name, self.session_id, state.value)
        return True


class KeptSessionStore(MetadataStore):
    """A :class:`MetadataStore` whose session members are its :class:`SessionKeeper`'s: the
    backend sets ``_keeper`` and reports its session's changes there."""

    _keeper: SessionKeeper

    @property
    def session_id(self) -> int:
        return self._keeper.session_id

    @property
    def state(self) -> SessionState:
        return self._keeper.state

    def add_listener(self, listener: SessionListener) -> None:
        self._keeper.add_listener(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        self._keeper.remove_listener(listener)
