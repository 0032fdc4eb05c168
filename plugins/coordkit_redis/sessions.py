"""The client side of a session: heartbeats, state changes, and the change-stream reader.

One daemon thread per store owns a dedicated connection. It renews the session key (heartbeat
script, every third of the timeout; the script also reaps other clients' overdue sessions), reads
the change stream in between (XREAD BLOCK), and drives the state machine:

* CONNECTED → SUSPENDED when the connection fails (its own, or one an operation reported);
* SUSPENDED → CONNECTED when a heartbeat gets through and the session is still alive: reading
  resumes at the last revision seen (a full resync if the stream was trimmed past it);
* → LOST when the session key is gone (expired or reaped), then a new session and CONNECTED again,
  with every watch re-read, as a ZooKeeper client does;
* CLOSED on :meth:`SessionKeeper.close`, which ends the session (its ephemerals are deleted).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from coordkit.errors import StoreError
from coordkit.store import SessionListener, SessionState
from coordkit.watches import EventThread, SessionListeners, WatchHub
from coordkit_redis.changes import ChangeFeed
from coordkit_redis.failures import is_connection_failure, translate
from coordkit_redis.scripts import SCRIPTS

log = logging.getLogger("coordkit.store.redis")

MAX_BLOCK = 0.5  # seconds an idle reader waits in XREAD before checking for work
MIN_BACKOFF = 0.05
MAX_BACKOFF = 1.0

ScriptRunner = Callable[..., Any]


def new_session_id() -> int:
    """A random id in [2**52, 2**53): unique across server restarts, exact as a Lua number."""
    return (1 << 52) | secrets.randbits(52)


class SessionKeeper:
    """Session state and the thread that keeps the session alive.

    :param run_script: ``run_script(client, script, *args)`` runs a Lua script (loads it on NOSCRIPT).
    :param ops_client: the store's pooled client (used to open and close sessions from callers).
    :param keeper_client: a single-connection client owned by the keeper thread.
    :param read_only: hold no session (opening one writes keys): the thread only PINGs to follow
        the connection and reads the change stream.
    """

    def __init__(
        self,
        *,
        name: str,
        run_script: ScriptRunner,
        ops_client: Any,
        keeper_client: Any,
        timeout: float,
        events: EventThread,
        hub: WatchHub,
        stream_key: str,
        read_only: bool = False,
    ):
        self._name = name
        self._read_only = read_only
        self._run_script = run_script
        self._ops_client = ops_client
        self._client = keeper_client
        self._timeout_ms = str(max(1, int(timeout * 1000)))
        self._interval = timeout / 3
        self._events = events
        self._hub = hub
        self._feed = ChangeFeed(stream_key, hub, self._session_expired_event)
        self._state = SessionState.CONNECTED
        self._session_id = 0
        self._session_word = "0"
        self._listeners = SessionListeners(events)
        self._lock = threading.Lock()  # state and listeners
        self._session_lock = threading.Lock()  # session transitions: heartbeat results, close
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- state
    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def session_word(self) -> str:
        """The session id as the scripts take it."""
        return self._session_word

    def add_listener(self, listener: SessionListener) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        self._listeners.remove(listener)

    def _set_state(self, state: SessionState) -> None:
        with self._lock:
            if self._state is state or self._state is SessionState.CLOSED:
                return
            self._state = state
        log.debug("%s: session %#x %s", self._name, self._session_id, state.value)
        self._listeners.notify(state)

    # -- lifecycle
    def open(self) -> None:
        """Start the first session (raises the mapped error if the server is unreachable)."""
        if not self._read_only:
            self._open_session(self._ops_client)
        self._feed.start_at_end(self._ops_client)
        self._thread = threading.Thread(
            target=self._run, name=f"coordkit-redis-{self._name}", daemon=True
        )
        self._thread.start()

    def _open_session(self, client: Any) -> None:
        for _ in range(8):
            session_id = new_session_id()
            opened = self._run_script(
                client, SCRIPTS.session_open, str(session_id), self._timeout_ms
            )
            if int(opened) == 1:
                self._session_id = session_id
                self._session_word = str(session_id)
                return
        raise StoreError("could not allocate a unique session id")

    def close(self) -> None:
        """End the session server-side (deleting its ephemerals) and stop the keeper thread."""
        with self._session_lock:
            self._stop.set()
            # Also when SUSPENDED: the connection may be back (at worst this waits for the
            # connect timeout); a LOST session has no ephemerals left to delete.
            if not self._read_only and self._state in (
                SessionState.CONNECTED,
                SessionState.SUSPENDED,
            ):
                try:
                    self._run_script(self._ops_client, SCRIPTS.session_close, str(self._session_id))
                except Exception as exc:  # the session will expire on the server by itself
                    log.warning(
                        "%s: could not end session %#x: %s",
                        self._name,
                        self._session_id,
                        translate(exc),
                    )
            self._set_state(SessionState.CLOSED)
        self._interrupt()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _interrupt(self) -> None:
        """Wake the keeper thread from XREAD BLOCK by shutting its socket down."""
        connection = getattr(self._client, "connection", None)
        sock = getattr(connection, "_sock", None)
        if sock is not None:
            try:
                import socket

                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # -- hints from operations (any thread)
    def connection_failed(self) -> None:
        """An operation lost its connection: report SUSPENDED and let the keeper recover."""
        with self._lock:
            connected = self._state is SessionState.CONNECTED
        if connected:
            self._set_state(SessionState.SUSPENDED)
            self._wake.set()

    def session_rejected(self) -> None:
        """A write found the session gone: check at once (the keeper reports LOST)."""
        self._wake.set()

    def _session_expired_event(self, session_id: int) -> None:
        if session_id == self._session_id:
            self._wake.set()

    # -- the keeper thread
    def _run(self) -> None:
        backoff = MIN_BACKOFF
        next_beat = time.monotonic() + self._interval
        while not self._stop.is_set():
            try:
                if self._state in (SessionState.SUSPENDED, SessionState.LOST):
                    self._recover()
                    next_beat = time.monotonic() + self._interval
                elif self._wake.is_set() or time.monotonic() >= next_beat:
                    self._wake.clear()
                    self._heartbeat()
                    next_beat = time.monotonic() + self._interval
                if self._state is not SessionState.CONNECTED or self._wake.is_set():
                    continue
                wait = min(MAX_BLOCK, max(0.0, next_beat - time.monotonic()))
                self._feed.poll(self._client, max(1, int(wait * 1000)))
                backoff = MIN_BACKOFF
            except Exception as exc:
                if self._stop.is_set():
                    break
                if is_connection_failure(exc):
                    self._disconnect_client()
                    self.connection_failed()
                else:
                    log.warning("%s: session keeper: %s", self._name, translate(exc))
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
        self._disconnect_client()

    def _disconnect_client(self) -> None:
        try:
            self._client.connection.disconnect()
        except Exception:
            pass

    def _renew(self) -> bool:
        """Run the heartbeat script: True if the session was still alive (now renewed)."""
        if self._read_only:
            self._client.ping()  # no session to renew (and no reaping: that is a write)
            return True
        reply = self._run_script(
            self._client, SCRIPTS.heartbeat, str(self._session_id), self._timeout_ms
        )
        return int(reply) == 1

    def _heartbeat(self) -> None:
        with self._session_lock:
            if self._stop.is_set():
                return
            if not self._renew():
                self._replace_session()

    def _recover(self) -> None:
        """Back from SUSPENDED (session alive, or lost meanwhile) or retrying after LOST."""
        with self._session_lock:
            if self._stop.is_set():
                return
            if self._state is SessionState.LOST:
                self._replace_session()
                return
            if not self._renew():
                self._replace_session()
                return
            resync = self._feed.needs_resync(self._client) or self._hub.stale()
            self._set_state(SessionState.CONNECTED)
        if resync:
            self._hub.resync()

    def _replace_session(self) -> None:
        """The session is gone: LOST, a new session, CONNECTED, and every watch re-read."""
        self._set_state(SessionState.LOST)
        self._open_session(self._client)
        self._feed.needs_resync(self._client)
        self._set_state(SessionState.CONNECTED)
        self._hub.resync()
