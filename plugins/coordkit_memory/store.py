"""The memory store client: one session on a :class:`~coordkit_memory.server.MemoryServer`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from coordkit.errors import (
    ConnectionLossError,
    NoNodeError,
    StoreClosedError,
    StoreError,
)
from coordkit.store import (
    ANY_VERSION,
    ChildrenCallback,
    Create,
    DataCallback,
    Delete,
    KeptSessionStore,
    Op,
    SessionKeeper,
    SessionState,
    SetData,
    Stat,
    StoreCharacteristics,
    TreeCallback,
    TreeWatch,
    Watch,
    paths,
)
from coordkit.store.changefeed import check_since
from coordkit.store.watches import EventThread, WatchHub
from coordkit_memory.client import DEFAULT_SESSION_TIMEOUT

if TYPE_CHECKING:
    from coordkit.store.urls import StoreURL
    from coordkit_memory.server import MemoryServer

T = TypeVar("T")

CHARACTERISTICS = StoreCharacteristics(
    linearizable_writes=True,
    durable=False,
    shared_across_processes=False,
    ordered_change_feed=True,
    change_feed_history=True,
    notes="in-process: state lives as long as the process and is shared only by clients in it",
)


class MemoryStore(KeptSessionStore):
    """A client session on an in-process server.

    Besides the store contract it can simulate the network: :meth:`disconnect` drops the connection
    (state SUSPENDED, calls fail with ``ConnectionLossError``, the session expires if the server's
    clock passes its timeout) and :meth:`reconnect` restores it.
    """

    characteristics = CHARACTERISTICS

    def __init__(
        self,
        server: MemoryServer,
        url: StoreURL,
        session_timeout: float,
        *,
        read_only: bool = False,
    ):
        self.url = url
        self.read_only = read_only
        self.server = server
        self.session_timeout = session_timeout
        self._events = EventThread(f"coordkit-memory{url.path.replace('/', '-')}")
        self._keeper = SessionKeeper(self._events, name=url.redacted())
        self._hub = WatchHub(
            self._events,
            self._read_data,
            self._read_children,
            on_interest=lambda key: server.interest_changed(self, key),
        )
        self._keeper.session_id = server.open_session(self, session_timeout)

    @classmethod
    def connect(
        cls,
        server: MemoryServer,
        *,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        read_only: bool = False,
    ) -> MemoryStore:
        """A new client session on ``server`` (``read_only``: one that cannot write)."""
        from coordkit.store.urls import StoreURL

        path = f"/{server.name}" if server.name else ""
        return cls(server, StoreURL("memory", path=path), session_timeout, read_only=read_only)

    # -- session
    def close(self) -> None:
        if self._keeper.state is SessionState.CLOSED:
            return
        self.server.close_session(self._keeper.session_id)
        self.server.forget_client(self)
        self.server.changes.forget(self)
        self._keeper.change_state(SessionState.CLOSED)
        self._events.stop()

    def disconnect(self) -> None:
        """Simulate losing the connection to the server (the session lives on until it times out)."""
        self._require_open()
        self.server.client_disconnected(self._keeper.session_id)
        self._keeper.change_state(SessionState.SUSPENDED)

    def reconnect(self) -> None:
        """Restore the connection; if the session expired meanwhile, report LOST and start a new one."""
        self._require_open()
        keeper = self._keeper
        if keeper.state is not SessionState.SUSPENDED:
            return
        if not self.server.client_reconnected(keeper.session_id):
            keeper.change_state(SessionState.LOST)
            keeper.session_id = self.server.open_session(self, self.session_timeout)
        keeper.change_state(SessionState.CONNECTED)
        self._hub.resync()
        self.server.changes.catch_up(self)

    def _session_expired(self, session_id: int) -> None:
        """Called by the server when it expires this client's live session."""
        keeper = self._keeper
        if session_id != keeper.session_id or keeper.state is SessionState.CLOSED:
            return
        keeper.change_state(SessionState.LOST)
        # Like a ZooKeeper client, establish a fresh session right away.
        keeper.session_id = self.server.open_session(self, self.session_timeout)
        keeper.change_state(SessionState.CONNECTED)
        self._hub.resync()

    def flush_events(self, timeout: float = 10.0) -> bool:
        """Wait until every watch and listener callback queued so far has run."""
        return self._events.flush(timeout)

    def _require_open(self) -> None:
        if self._keeper.state is SessionState.CLOSED:
            raise StoreClosedError("store client is closed")

    def _call(self, path: str | None, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        state = self._keeper.state
        if state is SessionState.CLOSED:
            raise StoreClosedError("store client is closed", path=path)
        if state is SessionState.SUSPENDED:
            raise ConnectionLossError("not connected to the server", path=path)
        return fn(*args, **kwargs)

    # -- operations
    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        self.check_writable("create", path)
        return self._call(
            path,
            self.server.create,
            self._keeper.session_id,
            path,
            data,
            ephemeral=ephemeral,
            sequential=sequential,
            make_parents=make_parents,
        )

    def get(self, path: str) -> tuple[bytes, Stat]:
        return self._call(path, self.server.get, path)

    def exists(self, path: str) -> Stat | None:
        return self._call(path, self.server.exists, path)

    def children(self, path: str) -> list[str]:
        return self._call(path, self.server.children, path)[0]

    def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> Stat:
        self.check_writable("set", path)
        return self._call(path, self.server.set, self._keeper.session_id, path, data, version)

    def delete(self, path: str, version: int = ANY_VERSION, *, recursive: bool = False) -> None:
        self.check_writable("delete", path)
        self._call(path, self.server.delete, self._keeper.session_id, path, version, recursive)

    def commit(self, ops: Sequence[Op]) -> list[Any]:
        self.check_writable("commit a transaction")
        return self._call(None, self.server.multi, self._keeper.session_id, list(ops))

    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        return self._call(None, self.server.get_many, list(paths_))

    def apply(self, ops: Sequence[Op]) -> list[Any]:
        self.check_writable("apply operations")
        results: list[Any] = []
        for index, op in enumerate(ops):
            try:
                match op:
                    case Create():
                        results.append(
                            self.create(
                                op.path, op.data, ephemeral=op.ephemeral, sequential=op.sequential
                            )
                        )
                    case SetData():
                        results.append(self.set(op.path, op.data, op.version))
                    case Delete():
                        self.delete(op.path, op.version)
                        results.append(None)
                    case _:
                        results.append(self.commit([op])[0])
            except StoreError as exc:
                exc.op_index = index
                results.append(exc)
        return results

    # -- watches
    def watch_data(self, path: str, callback: DataCallback) -> Watch:
        paths.validate(path)
        self._require_open()
        return self._hub.add_data_watch(path, callback)

    def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        paths.validate(path)
        self._require_open()
        return self._hub.add_children_watch(path, callback)

    def watch_tree(
        self, path: str, callback: TreeCallback, *, since: int | None = None
    ) -> TreeWatch:
        """The change feed, from the server's change log: exact positions (the zxid each change
        was committed at, with the state it wrote) and exact resumption from any position its
        history still covers (see :mod:`coordkit_memory.changelog`); a cut connection or an
        expired session resumes where the feed stood, without RESYNC."""
        paths.validate(path)
        check_since(since)
        return self._call(
            path, self.server.changes.subscribe, self, path, callback, since, self._events
        )

    def _read_data(self, path: str) -> tuple[bytes, Stat] | None:
        try:
            return self._call(path, self.server.get, path)
        except NoNodeError:
            return None

    def _read_children(self, path: str) -> tuple[list[str], Stat] | None:
        try:
            return self._call(path, self.server.children, path)
        except NoNodeError:
            return None

    def watches(self, key: tuple[str, str]) -> bool:
        """Whether this client has a watch on ``(kind, path)``."""
        return self._hub.is_watched(*key)

    def _changed(self, events: list[tuple[str, str]]) -> None:
        self._hub.notify_many(events)
