"""The in-process "server": one node tree, its sessions and its clock, shared by every
:class:`~coordkit_memory.store.MemoryStore` client connected to it (``MemoryStore.connect(server)``).

All state changes happen under one lock; every committed change is announced to connected clients,
which re-read on their own event threads (see :mod:`coordkit.store.watches`).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from coordkit.errors import (
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    StoreError,
)
from coordkit.store import (
    ANY_VERSION,
    Check,
    Create,
    Delete,
    Op,
    SetData,
    Stat,
    check_data,
    describe_op,
    paths,
)
from coordkit.support.clock import Clock, ManualClock, SystemClock
from coordkit_memory.changelog import DEFAULT_HISTORY, ChangeLog

if TYPE_CHECKING:
    from coordkit_memory.client import MemoryClient


class _Node:
    __slots__ = (
        "child_creations",
        "children",
        "ctime",
        "cversion",
        "czxid",
        "data",
        "mtime",
        "mzxid",
        "owner",
        "pzxid",
        "version",
    )

    def __init__(self, data: bytes, zxid: int, now_ms: int, owner: int):
        self.data = data
        self.czxid = self.mzxid = self.pzxid = zxid
        self.ctime = self.mtime = now_ms
        self.version = 0
        self.cversion = 0
        # ZooKeeper numbers sequential children by creations only; cversion also counts deletions.
        self.child_creations = 0
        self.owner = owner
        self.children: set[str] = set()

    def stat(self) -> Stat:
        return Stat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            pzxid=self.pzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=self.cversion,
            aversion=0,
            ephemeral_owner=self.owner,
            data_length=len(self.data),
            num_children=len(self.children),
        )


def _check_version(node: _Node, version: int, path: str) -> None:
    if version not in (ANY_VERSION, node.version):
        raise BadVersionError(f"expected version {version}, node is at {node.version}", path=path)


class _Session:
    __slots__ = ("client", "connected", "ephemerals", "id", "last_seen", "timeout")

    def __init__(self, session_id: int, client: MemoryClient, timeout: float, now: float):
        self.id = session_id
        self.client = client
        self.timeout = timeout
        self.connected = True
        self.last_seen = now
        self.ephemerals: set[str] = set()


class _Journal:
    """Undo actions for every change a multi-op made, to run in reverse on failure."""

    def __init__(self, zxid: int):
        self.zxid = zxid
        self.undo: list[Callable[[], None]] = []


class MemoryServer:
    """An in-process metadata server.

    :param clock: drives session expiry; a :class:`~coordkit.support.clock.ManualClock` makes expiry
        deterministic (sessions of disconnected clients expire once the clock passes their timeout).
    :param feed_history: changes kept for change feeds to resume from (:mod:`.changelog`).
    """

    _registry: dict[str, MemoryServer] = {}
    _registry_lock = threading.Lock()

    def __init__(
        self, name: str = "", *, clock: Clock | None = None, feed_history: int = DEFAULT_HISTORY
    ):
        self.name = name
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._zxid = 0
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0)}
        self._sessions: dict[int, _Session] = {}
        self._session_ids = itertools.count(0x100_0000_0001)
        self._events: list[tuple[str, str]] = []
        # (kind, path) → clients watching it: a change goes only to the clients that watch it, so
        # a commit costs the same with 3 sessions or 300.
        self._interest: dict[tuple[str, str], set[MemoryClient]] = {}
        self._reaper: threading.Timer | None = None
        #: Leave the registry once no session is left (``memory://NAME?lifetime=sessions``).
        self.forget_when_unused = False
        self.changes = ChangeLog(self._lock, lambda: self._zxid, feed_history)
        if isinstance(self.clock, ManualClock):
            self.clock.on_advance(self.reap)

    # -- the process-wide registry behind memory://NAME
    @classmethod
    def named(
        cls, name: str, *, clock: Clock | None = None, forget_when_unused: bool = False
    ) -> MemoryServer:
        """The shared server called ``name`` in this process, created on first use;
        ``forget_when_unused``: the registry forgets it when its last session ends."""
        with cls._registry_lock:
            server = cls._registry.get(name)
            if server is None:
                server = cls._registry[name] = cls(name, clock=clock)
            server.forget_when_unused |= forget_when_unused
            return server

    @classmethod
    def discard(cls, name: str) -> None:
        """Forget the shared server ``name``; the next ``memory://name`` starts empty."""
        with cls._registry_lock:
            cls._registry.pop(name, None)

    @classmethod
    def existing(cls, name: str) -> MemoryServer | None:
        """The shared server called ``name`` if this process has one (creating nothing)."""
        with cls._registry_lock:
            return cls._registry.get(name)

    # -- sessions
    def open_session(self, client: MemoryClient, timeout: float) -> int:
        with self._lock:
            session_id = next(self._session_ids)
            self._sessions[session_id] = _Session(
                session_id, client, timeout, self.clock.monotonic()
            )
            return session_id

    def session_ids(self) -> list[int]:
        with self._lock:
            self.reap()
            return sorted(self._sessions)

    def close_session(self, session_id: int) -> None:
        with self._lock:
            session = self._sessions.pop(session_id, None)
            if session is not None:
                self._drop_ephemerals(session)
        self._flush()
        self._forget_if_unused()

    def _forget_if_unused(self) -> None:
        with self._lock:
            unused = self.forget_when_unused and not self._sessions
        if unused:
            with MemoryServer._registry_lock:
                if MemoryServer._registry.get(self.name) is self:
                    del MemoryServer._registry[self.name]

    def expire_session(self, session_id: int) -> None:
        """End a session as the server would on timeout; its owner sees LOST."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
            if session is None:
                raise SessionExpiredError(f"no live session {session_id:#x}")
            self._drop_ephemerals(session)
            connected = session.connected
        self._flush()
        if connected:
            session.client._session_expired(session_id)
        self._forget_if_unused()

    def client_disconnected(self, session_id: int) -> None:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return
            session.connected = False
            session.last_seen = self.clock.monotonic()
            if not isinstance(self.clock, ManualClock):
                self._schedule_reaper(session.timeout)

    def client_reconnected(self, session_id: int) -> bool:
        """Reattach a client to its session; False if the session expired meanwhile."""
        with self._lock:
            self.reap()
            session = self._sessions.get(session_id)
            if session is None:
                return False
            session.connected = True
            return True

    def reap(self) -> None:
        """Expire every disconnected session whose timeout has passed."""
        with self._lock:
            now = self.clock.monotonic()
            overdue = [
                s.id
                for s in self._sessions.values()
                if not s.connected and now - s.last_seen > s.timeout
            ]
            for session_id in overdue:
                self._drop_ephemerals(self._sessions.pop(session_id))
        self._flush()
        if overdue:
            self._forget_if_unused()

    def _schedule_reaper(self, delay: float) -> None:
        if self._reaper is not None and self._reaper.is_alive():
            return
        self._reaper = threading.Timer(delay + 0.05, self._reaper_tick)
        self._reaper.daemon = True
        self._reaper.start()

    def _reaper_tick(self) -> None:
        self.reap()
        with self._lock:
            waiting = [s.timeout for s in self._sessions.values() if not s.connected]
            self._reaper = None
            if waiting:
                self._schedule_reaper(min(waiting) / 2)

    def _drop_ephemerals(self, session: _Session) -> None:
        if not session.ephemerals:
            return  # nothing changes, so no zxid is used: a read-only session leaves no trace
        # Deepest first is not needed: ephemerals cannot have children.
        zxid = self._next_zxid()
        for path in sorted(session.ephemerals):
            if path in self._nodes:
                self._remove(path, zxid, None)
        session.ephemerals.clear()

    def _session(self, session_id: int) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionExpiredError(f"session {session_id:#x} has expired")
        return session

    # -- reads
    def get(self, path: str) -> tuple[bytes, Stat]:
        paths.validate(path)
        with self._lock:
            node = self._node(path)
            return node.data, node.stat()

    def exists(self, path: str) -> Stat | None:
        paths.validate(path)
        with self._lock:
            node = self._nodes.get(path)
            return None if node is None else node.stat()

    def children(self, path: str) -> tuple[list[str], Stat]:
        paths.validate(path)
        with self._lock:
            node = self._node(path)
            return sorted(node.children), node.stat()

    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        out: list[tuple[bytes, Stat] | StoreError] = []
        with self._lock:
            for index, path in enumerate(paths_):
                try:
                    paths.validate(path)
                    node = self._node(path)
                    out.append((node.data, node.stat()))
                except StoreError as exc:
                    exc.op_index = index
                    out.append(exc)
        return out

    # -- writes
    def create(
        self,
        session_id: int,
        path: str,
        data: bytes,
        *,
        ephemeral: bool,
        sequential: bool,
        make_parents: bool,
    ) -> str:
        paths.validate(path, sequential=sequential)
        data = check_data(path, data)
        with self._lock:
            self._session(session_id)
            journal = _Journal(self._next_zxid())
            mark = len(self._events)
            try:
                if make_parents:
                    for ancestor in paths.ancestors(
                        path.rstrip("/") + ("/x" if path.endswith("/") else "")
                    ):
                        if ancestor not in self._nodes:
                            self._create(ancestor, b"", journal.zxid, 0, False, journal)
                owner = session_id if ephemeral else 0
                created = self._create(path, data, journal.zxid, owner, sequential, journal)
            except StoreError:
                # A failed create leaves no parents behind.
                self._rollback(journal)
                del self._events[mark:]
                raise
        self._flush()
        return created

    def set(self, session_id: int, path: str, data: bytes, version: int) -> Stat:
        paths.validate(path)
        data = check_data(path, data)
        with self._lock:
            self._session(session_id)
            stat = self._set(path, data, version, self._next_zxid(), None)
        self._flush()
        return stat

    def delete(self, session_id: int, path: str, version: int, recursive: bool) -> None:
        paths.validate(path)
        with self._lock:
            self._session(session_id)
            node = self._node(path)
            _check_version(node, version, path)
            if path == "/":
                raise StoreError("the root node cannot be deleted", path=path)
            zxid = self._next_zxid()
            if recursive:
                for descendant in self._descendants(path):
                    self._remove(descendant, zxid, None)
            elif node.children:
                raise NotEmptyError(f"node has {len(node.children)} children", path=path)
            self._remove(path, zxid, None)
        self._flush()

    def multi(self, session_id: int, ops: Sequence[Op]) -> list[Any]:
        for index, op in enumerate(ops):
            try:
                paths.validate(op.path, sequential=isinstance(op, Create) and op.sequential)
                if isinstance(op, Create | SetData):
                    check_data(op.path, op.data)
            except StoreError as exc:
                exc.op_index = index
                raise
        with self._lock:
            self._session(session_id)
            journal = _Journal(self._next_zxid())
            results: list[Any] = []
            mark = len(self._events)
            try:
                for index, op in enumerate(ops):
                    try:
                        results.append(self._apply_in(journal, op, session_id))
                    except StoreError as exc:
                        exc.op_index = index
                        exc.message = f"{exc.message} [transaction op {index}: {describe_op(op)}]"
                        raise
            except StoreError:
                self._rollback(journal)
                del self._events[mark:]
                raise
        self._flush()
        return results

    def _apply_in(self, journal: _Journal, op: Op, session_id: int) -> Any:
        match op:
            case Create(path=path, data=data, ephemeral=ephemeral, sequential=sequential):
                return self._create(
                    path, data, journal.zxid, session_id if ephemeral else 0, sequential, journal
                )
            case SetData(path=path, data=data, version=version):
                return self._set(path, data, version, journal.zxid, journal)
            case Delete(path=path, version=version):
                node = self._node(path)
                _check_version(node, version, path)
                if node.children:
                    raise NotEmptyError(f"node has {len(node.children)} children", path=path)
                self._remove(path, journal.zxid, journal)
                return None
            case Check(path=path, version=version):
                node = self._node(path)
                _check_version(node, version, path)
                return None
        raise TypeError(f"not a store operation: {op!r}")

    # -- primitives (caller holds the lock and has validated input)
    def _next_zxid(self) -> int:
        self._zxid += 1
        return self._zxid

    def _node(self, path: str) -> _Node:
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError("no node", path=path)
        return node

    def _create(
        self,
        path: str,
        data: bytes,
        zxid: int,
        owner: int,
        sequential: bool,
        journal: _Journal | None,
    ) -> str:
        parent_path = (
            paths.parent(path.rstrip("/") + "/x") if path.endswith("/") else paths.parent(path)
        )
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(f"parent {parent_path} does not exist", path=path)
        if parent.owner:
            raise NoChildrenForEphemeralsError(f"parent {parent_path} is ephemeral", path=path)
        if sequential:
            path = paths.sequential_name(path, parent.child_creations)
        if path in self._nodes:
            raise NodeExistsError("node already exists", path=path)
        name = paths.basename(path)
        if journal is not None:
            journal.undo.append(self._undo_create(path, parent, name, owner))
        self._nodes[path] = _Node(data, zxid, self.clock.wall_ms(), owner)
        parent.children.add(name)
        parent.cversion += 1
        parent.child_creations += 1
        parent.pzxid = zxid
        if owner:
            self._sessions[owner].ephemerals.add(path)
        self.changes.created(path, self._nodes[path], zxid)
        self._events.append(("data", path))
        self._events.append(("children", parent_path))
        return path

    def _set(
        self, path: str, data: bytes, version: int, zxid: int, journal: _Journal | None
    ) -> Stat:
        node = self._node(path)
        _check_version(node, version, path)
        if journal is not None:
            saved = (node.data, node.version, node.mzxid, node.mtime)

            def undo_set() -> None:
                node.data, node.version, node.mzxid, node.mtime = saved

            journal.undo.append(undo_set)
        node.data = data
        node.version += 1
        node.mzxid = zxid
        node.mtime = self.clock.wall_ms()
        self.changes.changed(path, node, zxid)
        self._events.append(("data", path))
        return node.stat()

    def _remove(self, path: str, zxid: int, journal: _Journal | None) -> None:
        parent_path = paths.parent(path)
        parent = self._nodes[parent_path]
        node = self._nodes.pop(path)
        if journal is not None:
            journal.undo.append(self._undo_remove(path, node, parent))
        if node.owner and node.owner in self._sessions:
            self._sessions[node.owner].ephemerals.discard(path)
        parent.children.discard(paths.basename(path))
        parent.cversion += 1
        parent.pzxid = zxid
        self.changes.deleted(path, zxid)
        self._events.append(("data", path))
        self._events.append(("children", path))
        self._events.append(("children", parent_path))

    def _descendants(self, path: str) -> list[str]:
        """Descendants of ``path``, deepest first."""
        out: list[str] = []
        stack = [path]
        while stack:
            current = stack.pop()
            for name in self._nodes[current].children:
                child = f"{current}/{name}" if current != "/" else f"/{name}"
                out.append(child)
                stack.append(child)
        out.sort(key=lambda p: p.count("/"), reverse=True)
        return out

    def _undo_create(self, path: str, parent: _Node, name: str, owner: int) -> Callable[[], None]:
        cversion, pzxid, creations = parent.cversion, parent.pzxid, parent.child_creations

        def undo() -> None:
            del self._nodes[path]
            parent.children.discard(name)
            parent.cversion, parent.pzxid, parent.child_creations = cversion, pzxid, creations
            if owner and owner in self._sessions:
                self._sessions[owner].ephemerals.discard(path)

        return undo

    def _undo_remove(self, path: str, node: _Node, parent: _Node) -> Callable[[], None]:
        cversion, pzxid = parent.cversion, parent.pzxid

        def undo() -> None:
            self._nodes[path] = node
            parent.children.add(paths.basename(path))
            parent.cversion, parent.pzxid = cversion, pzxid
            if node.owner and node.owner in self._sessions:
                self._sessions[node.owner].ephemerals.add(path)

        return undo

    def _rollback(self, journal: _Journal) -> None:
        for undo in reversed(journal.undo):
            undo()
        journal.undo.clear()
        self.changes.rollback(journal.zxid)

    def _flush(self) -> None:
        """Announce committed changes to the connected clients watching them (outside the lock).

        A data change also concerns a children watch on the same path (the node may have been
        created or deleted); the client's hub re-reads and drops what did not change.
        """
        with self._lock:
            self.changes.publish()
            events, self._events = self._events, []
            if not events:
                return
            connected = {s.client for s in self._sessions.values() if s.connected}
            interest = self._interest
            due: dict[MemoryClient, list[tuple[str, str]]] = {}
            for event in events:
                kind, path = event
                keys = (event, ("children", path)) if kind == "data" else (event,)
                for key in keys:
                    for client in interest.get(key, ()):
                        if client in connected:
                            due.setdefault(client, []).append(event)
        for client, changes in due.items():
            client._changed(changes)

    # -- watch interest (from the clients' watch hubs)
    def interest_changed(self, client: MemoryClient, key: tuple[str, str]) -> None:
        """``client`` gained its first or lost its last watch on ``key``; its hub is the truth
        (read under the lock, so racing calls settle on the latest state)."""
        with self._lock:
            if client.watches(key):
                self._interest.setdefault(key, set()).add(client)
            else:
                holders = self._interest.get(key)
                if holders is not None:
                    holders.discard(client)
                    if not holders:
                        del self._interest[key]

    def forget_client(self, client: MemoryClient) -> None:
        """A closed client watches nothing any more."""
        with self._lock:
            for key in [k for k, holders in self._interest.items() if client in holders]:
                holders = self._interest[key]
                holders.discard(client)
                if not holders:
                    del self._interest[key]

    # -- inspection
    def node_count(self) -> int:
        with self._lock:
            return len(self._nodes)

    def __repr__(self) -> str:
        return f"<MemoryServer {self.name or '(private)'} nodes={len(self._nodes)} sessions={len(self._sessions)}>"
