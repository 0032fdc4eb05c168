"""The client side of a session: the heartbeat and the state machine.

The session keeper has a thread and a connection of its own and does nothing else, so no watch
callback, watch delivery or change-stream read can delay a renewal (the change feed has its own
thread, :mod:`coordkit_redis.reader`). It renews the session key fifteen times per timeout
(heartbeat script; the script also reaps other clients' overdue sessions), on a fixed schedule: a
slow reply does not push the next renewal back. (A tenth was not enough: with a hundred sessions
and a write storm in one process, turns on the GIL put the median gap between renewals at half
again the beat and the worst, now and then, just past a third of the timeout.)

What can still delay a renewal is the interpreter, and the machine: busy threads of one process
take turns on the GIL (and all of them wait while the garbage collector runs), and a thread waking
up waits for its turn, mostly briefly, now and then for a second or more with a hundred busy
threads on a loaded machine. So the keeper's is not the only turn a renewal can take: a session's
writes renew it (``ops.lua``), as any request renews a ZooKeeper session; the change reader (busy
exactly when watches are) and every operation renew it on their own connections when the keeper
is half a beat late (:meth:`RedisSessionKeeper.renew_if_late`); and so does the process's pacer, one
thread for all sessions (:mod:`coordkit_redis.pacer`). The state machine:

* CONNECTED → SUSPENDED when the connection fails (its own, or one an operation or the change
  reader reported);
* SUSPENDED → CONNECTED when a heartbeat gets through and the session is still alive (watches
  whose re-read failed meanwhile are read again);
* → LOST when the session key is gone (expired or reaped), then a new session and CONNECTED again,
  with every watch re-read, as a ZooKeeper client does;
* CLOSED on :meth:`RedisSessionKeeper.close`, which ends the session (its ephemerals are deleted).

:attr:`RedisSessionKeeper.worst_heartbeat_gap` is the longest time the server went without renewing a
session of this client, on the server's clock (the heartbeat script returns it), or, if longer, the
time since the current session's last heartbeat was sent: a starved keeper shows even before it
renews again.

The state and the session listeners are :class:`coordkit.store.sessions.SessionKeeper`'s.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from coordkit.errors import StoreError
from coordkit.store import SessionKeeper, SessionState
from coordkit.store.watches import EventThread, WatchHub
from coordkit_redis.failures import is_connection_failure, translate
from coordkit_redis.pacer import PACER
from coordkit_redis.scripts import SCRIPTS

log = logging.getLogger("coordkit.store.redis")

#: Renewals per session timeout.
BEATS_PER_TIMEOUT = 15
MIN_BACKOFF = 0.05
MAX_BACKOFF = 1.0

ScriptRunner = Callable[..., Any]


def new_session_id() -> int:
    """A random id in [2**52, 2**53): unique across server restarts, exact as a Lua number."""
    return (1 << 52) | secrets.randbits(52)


class RedisSessionKeeper(SessionKeeper):
    """A Redis client's session: its state and listeners, and the thread that keeps it alive.

    :param run_script: ``run_script(client, script, *args)`` runs a Lua script (loads it on NOSCRIPT).
    :param script_prefix: the words every script call starts with (key, prefix, stream length),
        for the renewals :mod:`coordkit_redis.pacer` sends on the keeper's connection.
    :param ops_client: the store's pooled client (used to open and close sessions from callers).
    :param heartbeat_client: a single-connection client owned by the keeper thread.
    :param read_only: hold no session (opening one writes keys): the thread only PINGs to follow
        the connection.
    """

    def __init__(
        self,
        *,
        name: str,
        run_script: ScriptRunner,
        script_prefix: Sequence[str],
        ops_client: Any,
        heartbeat_client: Any,
        timeout: float,
        events: EventThread,
        hub: WatchHub,
        read_only: bool = False,
    ):
        super().__init__(events, name=name, log=log)
        self._read_only = read_only
        self._run_script = run_script
        self._script_prefix = tuple(script_prefix)
        self._ops_client = ops_client
        self._client = heartbeat_client
        self._timeout_ms = str(max(1, int(timeout * 1000)))
        self.heartbeat_interval = timeout / BEATS_PER_TIMEOUT
        self._hub = hub
        self._session_word = "0"
        self._session_lock = threading.Lock()  # session transitions: heartbeat results, close
        self._helping = threading.Lock()  # one renewal at a time by threads other than the keeper
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # When the current session's last heartbeat was sent (monotonic; None: no session yet).
        self._renewed_at: float | None = None
        self._worst_gap = 0.0

    # -- state
    @property
    def session_word(self) -> str:
        """The session id as the scripts take it."""
        return self._session_word

    @property
    def worst_heartbeat_gap(self) -> float:
        """Seconds: the longest any session of this client went between renewals (see the module
        docstring), including the time since the current session's last renewal. Above the
        session timeout, a session expired for want of renewals."""
        renewed = self._renewed_at
        if renewed is None or self.state is SessionState.CLOSED:
            return self._worst_gap
        return max(self._worst_gap, time.monotonic() - renewed)

    # -- lifecycle
    def open(self) -> None:
        """Start the first session (raises the mapped error if the server is unreachable)."""
        if not self._read_only:
            self._open_session(self._ops_client)
        self._thread = threading.Thread(
            target=self._run, name=f"coordkit-redis-heartbeat-{self._name}", daemon=True
        )
        self._thread.start()
        if not self._read_only:
            PACER.register(self)

    def _open_session(self, client: Any) -> None:
        for _ in range(8):
            session_id = new_session_id()
            sent = time.monotonic()
            opened = self._run_script(
                client, SCRIPTS.session_open, str(session_id), self._timeout_ms
            )
            if int(opened) == 1:
                self.session_id = session_id
                self._session_word = str(session_id)
                self._renewed_at = sent  # opening counts as the session's first renewal
                return
        raise StoreError("could not allocate a unique session id")

    def close(self) -> None:
        """End the session server-side (deleting its ephemerals) and stop the keeper thread."""
        PACER.unregister(self)
        with self._session_lock:
            self._stop.set()
            # Also when SUSPENDED: the connection may be back (at worst this waits for the
            # connect timeout); a LOST session has no ephemerals left to delete.
            if not self._read_only and self.state in (
                SessionState.CONNECTED,
                SessionState.SUSPENDED,
            ):
                try:
                    self._run_script(self._ops_client, SCRIPTS.session_close, str(self.session_id))
                except Exception as exc:  # the session will expire on the server by itself
                    log.warning(
                        "%s: could not end session %#x: %s",
                        self._name,
                        self.session_id,
                        translate(exc),
                    )
            self.change_state(SessionState.CLOSED)
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    # -- hints from operations and the change reader (any thread)
    def connection_failed(self) -> None:
        """A connection was lost: report SUSPENDED and let the keeper recover."""
        if self.suspend():
            self._wake.set()

    def session_rejected(self) -> None:
        """A write found the session gone: check at once (the keeper reports LOST)."""
        self._wake.set()

    def session_expired_event(self, session_id: int) -> None:
        """The change feed saw ``session_id`` expire."""
        if session_id == self.session_id:
            self._wake.set()

    def renew_if_late(self, client: Any) -> None:
        """From another thread of this client (the change reader, an operation), on its own
        connection: renew if the keeper is half a beat late. A busy thread already has its turn
        on the GIL when it gets here, while the keeper's thread may still be waiting for one (to
        send, or to read a reply), so a busy client's session does not wait for the keeper.
        Anything but a plain renewal (an expired session, a failure) is left to the keeper."""
        now = time.monotonic()
        due = self.pace_due(now)
        if due is None or due > now:
            return
        if not self._helping.acquire(blocking=False):
            return  # another thread is at it
        try:
            if not self._renew(client):
                self._wake.set()
        except Exception:
            self._wake.set()
        finally:
            self._helping.release()

    # -- renewals sent by the pacer (its thread)
    def pace_due(self, now: float) -> float | None:
        """When this session counts as late: half a beat after the last heartbeat was sent."""
        renewed = self._renewed_at
        if (
            renewed is None
            or self.state is not SessionState.CONNECTED
            or self._stop.is_set()
            or self._read_only
        ):
            return None
        return renewed + self.heartbeat_interval * 1.5

    def send_renewal(self) -> tuple[Any, float] | None:
        """Send a heartbeat on a connection of the store's pool without waiting for the reply
        (the keeper's own may be stuck waiting for one); None if none was sent."""
        if not self._helping.acquire(blocking=False):
            return None
        pool = self._ops_client.connection_pool
        connection = None
        try:
            connection = pool.get_connection()
            sent = time.monotonic()
            connection.send_command(
                "EVALSHA",
                SCRIPTS.heartbeat.sha,
                1,
                *self._script_prefix,
                str(self.session_id),
                self._timeout_ms,
            )
            return connection, sent
        except Exception:  # not even sent: the keeper finds out for itself
            if connection is not None:
                connection.disconnect()
                pool.release(connection)
            self._helping.release()
            return None

    def finish_renewal(self, connection: Any, sent: float) -> None:
        pool = self._ops_client.connection_pool
        try:
            alive, gap_ms = connection.read_response()
            if not self._account(sent, alive, gap_ms):
                self._wake.set()  # expired: the keeper reports LOST and opens a new session
        except Exception:  # NOSCRIPT (the keeper's calls load it), a failure
            connection.disconnect()
            self._wake.set()
        finally:
            pool.release(connection)
            self._helping.release()

    # -- the keeper thread
    def _run(self) -> None:
        backoff = MIN_BACKOFF
        due = time.monotonic() + self.heartbeat_interval  # the next renewal, on schedule
        while not self._stop.is_set():
            # On schedule: waking late (a busy interpreter) or a slow reply does not move the
            # next renewal back; a wake-up (a failure, an expiry seen) renews at once.
            if not self._wake.wait(max(0.0, due - time.monotonic())):
                due += self.heartbeat_interval
            self._wake.clear()
            now = time.monotonic()
            if due <= now or due > now + self.heartbeat_interval:
                due = now + self.heartbeat_interval  # a whole beat behind: start afresh
            if self._stop.is_set():
                break
            try:
                if self.state in (SessionState.SUSPENDED, SessionState.LOST):
                    self._recover()
                else:
                    self._heartbeat()
                backoff = MIN_BACKOFF
            except Exception as exc:
                if self._stop.is_set():
                    break
                if is_connection_failure(exc):
                    self._disconnect_client()
                    self.connection_failed()
                else:
                    log.warning("%s: session keeper: %s", self._name, translate(exc))
                due = time.monotonic() + backoff
                backoff = min(backoff * 2, MAX_BACKOFF)
        self._disconnect_client()

    def _disconnect_client(self) -> None:
        try:
            self._client.connection.disconnect()
        except Exception:
            pass

    def _renew(self, client: Any = None) -> bool:
        """Run the heartbeat script (on ``client``, by default the keeper's): True if the session
        was still alive (now renewed)."""
        if self._read_only:
            self._client.ping()  # no session to renew (and no reaping: that is a write)
            return True
        sent = time.monotonic()
        alive, gap_ms = self._run_script(
            client or self._client, SCRIPTS.heartbeat, str(self.session_id), self._timeout_ms
        )
        return self._account(sent, alive, gap_ms)

    def _account(self, sent: float, alive: Any, gap_ms: Any) -> bool:
        """Record a heartbeat's reply; True if the session was alive (renewed at ``sent``)."""
        # On the server's clock, since the last renewal by anyone (a write renews too); also when
        # the session turned out expired: that gap counts most.
        if int(gap_ms) >= 0:
            self._worst_gap = max(self._worst_gap, int(gap_ms) / 1000)
        elif self._renewed_at is not None:
            self._worst_gap = max(self._worst_gap, time.monotonic() - self._renewed_at)
        if int(alive) != 1:
            return False
        # Renewals from several threads may answer out of order: the latest one sent counts.
        renewed = self._renewed_at
        self._renewed_at = sent if renewed is None else max(renewed, sent)
        return True

    def _heartbeat(self) -> None:
        with self._session_lock:
            if self._stop.is_set():
                return
            try:
                alive = self._renew()
            except Exception as exc:
                import redis.exceptions as rex

                if not is_connection_failure(exc) or isinstance(exc, rex.TimeoutError):
                    raise
                # A connection broken while it sat idle (the server restarted since the last
                # beat, and the other connections have moved on): one fresh connection before
                # the client reports SUSPENDED. A server that does not answer is not retried.
                self._disconnect_client()
                alive = self._renew()
            if not alive:
                self._replace_session()

    def _recover(self) -> None:
        """Back from SUSPENDED (session alive, or lost meanwhile) or retrying after LOST."""
        with self._session_lock:
            if self._stop.is_set():
                return
            if self.state is SessionState.LOST:
                self._replace_session()
                return
            if not self._renew():
                self._replace_session()
                return
            self.change_state(SessionState.CONNECTED)
        # Watches whose re-read failed while SUSPENDED are read again (after CONNECTED, so that
        # the re-reads are not refused).
        if self._hub.stale():
            self._hub.resync()

    def _replace_session(self) -> None:
        """The session is gone: LOST, a new session, CONNECTED, and every watch re-read."""
        self.change_state(SessionState.LOST)
        self._renewed_at = None
        self._open_session(self._client)
        self.change_state(SessionState.CONNECTED)
        self._hub.resync()
