"""The ZooKeeper store: one kazoo session, held to the same contract as the memory store.

* Session states follow kazoo's: CONNECTED, SUSPENDED (connection lost, session may live on), LOST
  (session expired; kazoo then opens a new session, reported as CONNECTED) and CLOSED.
* Every call fails fast while the client is not connected (``ConnectionLossError`` while
  SUSPENDED, ``SessionExpiredError`` while LOST) and never waits longer than ``request_timeout``
  for a reply.
* Watches go through :class:`coordkit.store.watches.WatchHub`: its readers read with a one-shot
  ZooKeeper watch that tells the hub to re-read. kazoo forgets those watches whenever the
  connection drops, so every reconnect re-reads (and so re-arms) every watched node.
* ``watch_tree`` is a persistent recursive watch (ZooKeeper 3.6+) spoken on kazoo's connection
  (:mod:`coordkit_zookeeper.treewatch`); every reconnect delivers RESYNC.
* Paths and values are checked before anything is sent: ZooKeeper closes the connection on a
  packet larger than its ``jute.maxbuffer``.
* Nothing of ours runs on kazoo's connection thread but the state listener (which only posts):
  watch callbacks run on the store's event thread, so a slow callback cannot delay a ping; an idle
  connection pings every tenth of the session timeout (:mod:`coordkit_zookeeper.heartbeats`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol import serialization as proto
from kazoo.protocol.states import EventType, KazooState, KeeperState, WatchedEvent
from kazoo.retry import KazooRetry

from coordkit.errors import (
    AuthFailedError,
    ConnectionLossError,
    InvalidPathError,
    NoNodeError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
)
from coordkit.store import (
    ANY_VERSION,
    MAX_DATA_SIZE,
    Check,
    ChildrenCallback,
    Create,
    DataCallback,
    KeptSessionStore,
    Op,
    SessionKeeper,
    SessionState,
    Stat,
    StatColumns,
    StoreCharacteristics,
    TreeCallback,
    TreeWatch,
    Watch,
    check_data,
    check_set_columns,
    describe_op,
    paths,
)
from coordkit.store.changefeed import check_since
from coordkit.store.urls import StoreURL
from coordkit.store.watches import EventThread, WatchHub
from coordkit_zookeeper import wire
from coordkit_zookeeper.bulk_reads import BulkReads
from coordkit_zookeeper.config import ZooKeeperConfig
from coordkit_zookeeper.errors import first_failure, translate, translate_op
from coordkit_zookeeper.requests import (
    check_transaction_size,
    op_result,
    to_stat,
    validate_op,
    wire_op,
)
from coordkit_zookeeper.security import (
    RedactingLogger,
    auth_data,
    default_acls,
    node_acls,
    sasl_options,
)
from coordkit_zookeeper.setmany import send_set_many
from coordkit_zookeeper.subtrees import create_with_parents, delete_tree
from coordkit_zookeeper.treewatch import TreeWatches

log = logging.getLogger("coordkit.zookeeper")

kazoo_log = logging.getLogger("coordkit.zookeeper.kazoo")

CHARACTERISTICS = StoreCharacteristics(
    linearizable_writes=True,
    durable=True,
    shared_across_processes=True,
    ordered_change_feed=True,
    multi_host=True,
    notes="ZooKeeper: writes are linearizable and logged to disk by a quorum; reads are served by "
    "the connected server (sequentially consistent); the change feed needs ZooKeeper 3.6+",
)

#: Reconnect quickly: kazoo's default backs off to an hour between attempts.
_RECONNECT = {"max_tries": -1, "delay": 0.05, "backoff": 2, "max_jitter": 0.2, "max_delay": 1.0}


class ZooKeeperStore(KeptSessionStore):
    """A session on a ZooKeeper ensemble, rooted at the URL's chroot (created if missing, unless
    ``read_only``: then a missing chroot is a :class:`NoNodeError` and nothing is created)."""

    characteristics = CHARACTERISTICS

    def __init__(self, url: StoreURL, config: ZooKeeperConfig, *, read_only: bool = False):
        self.url = url
        self.config = config
        self.read_only = read_only
        self._lock = threading.Lock()
        self._closing = False
        self._chroot = config.chroot
        self._acl = node_acls(config)
        self._timeout = config.request_timeout
        tls = config.tls
        # kazoo warns on every failed connection attempt; the logger demotes those to DEBUG and
        # keeps the last one for the error _connect raises.
        self._kazoo_logger = RedactingLogger(kazoo_log, config.secrets)
        self._client = KazooClient(
            hosts=config.host_string,
            timeout=config.session_timeout,
            auth_data=auth_data(config),
            sasl_options=sasl_options(config),
            default_acl=self._acl("/") if config.set_acl else None,
            connection_retry=KazooRetry(**_RECONNECT),
            logger=self._kazoo_logger,
            use_ssl=tls is not None,
            ca=tls.ca if tls else None,
            certfile=tls.cert if tls else None,
            keyfile=tls.key if tls else None,
            keyfile_password=tls.key_password if tls else None,
            verify_certs=tls.verify if tls else True,
            check_hostname=tls.check_hostname if tls else False,
        )
        self.batched_io = config.batched_io and wire.install_batching(self._client)
        self._bulk_reads = BulkReads(self, config.multi_read)
        # Threads start only from here on: nothing above can leave one behind.
        self._events = EventThread(f"coordkit-zookeeper{self._chroot.replace('/', '-')}")
        # SUSPENDED until the first session is established.
        self._keeper = SessionKeeper(
            self._events, state=SessionState.SUSPENDED, name=url.redacted(), log=log
        )
        self._hub = WatchHub(self._events, self._read_data, self._read_children)
        self._trees = TreeWatches(self)
        self._client.add_listener(self._on_kazoo_state)
        try:
            self._connect(config.connect_timeout)
            self._ensure_chroot()
        except BaseException:
            self._shutdown()
            raise

    # -- session
    @property
    def client(self) -> Any:
        """The underlying :class:`kazoo.client.KazooClient` (for tools and fault tests)."""
        return self._client

    @property
    def worst_heartbeat_gap(self) -> float | None:
        """Seconds: the longest the server went without a packet from this client while connected
        (including the time since the last one), for tests and benchmarks; None with kazoo's own
        connection handler (``batched_io`` off or unavailable), which does not measure it."""
        gap: float | None = getattr(self._client._connection, "worst_heartbeat_gap", None)
        return gap

    def _on_kazoo_state(self, state: str) -> None:
        # On kazoo's connection thread: must not block.
        if self._closing:
            return
        self._trees.on_state(state)
        keeper = self._keeper
        if state == KazooState.CONNECTED:
            session_id = self._client._session_id or 0
            if session_id != keeper.session_id:
                log.info("%s: session %#x established", self.url.redacted(), session_id)
            keeper.session_id = session_id
            keeper.change_state(SessionState.CONNECTED)
            # kazoo dropped every watch with the connection: re-read (and re-arm) them all.
            self._hub.resync()
        elif state == KazooState.SUSPENDED:
            log.warning(
                "%s: connection lost; session %#x may still be alive",
                self.url.redacted(),
                keeper.session_id,
            )
            keeper.change_state(SessionState.SUSPENDED)
        else:
            if self._client.client_state == KeeperState.AUTH_FAILED:
                log.error("%s: ZooKeeper refused the credentials", self.url.redacted())
            else:
                log.warning("%s: session %#x expired", self.url.redacted(), keeper.session_id)
            keeper.change_state(SessionState.LOST)

    def _connect(self, timeout: float) -> None:
        live = self._client.start_async()
        deadline = time.monotonic() + timeout
        while not live.wait(0.05):
            if self._client.client_state == KeeperState.AUTH_FAILED:
                raise AuthFailedError(f"ZooKeeper at {self.url.redacted()} refused the credentials")
            if time.monotonic() > deadline:
                last = self._kazoo_logger.last_demoted
                raise ConnectionLossError(
                    f"could not connect to ZooKeeper at {self.url.redacted()} within {timeout:g}s "
                    "(connect_timeout)" + (f"; last attempt: {last}" if last else "")
                )

    def _ensure_chroot(self) -> None:
        if not self._chroot:
            return
        if self.read_only:
            (stat,) = self._run([proto.Exists(self._chroot, None)], "exists")
            if isinstance(stat, BaseException):
                raise translate(stat, path=self._chroot, action="look up the chroot")
            if stat is None:
                hosts = ",".join(f"{h}:{p}" for h, p in self.config.hosts)
                raise NoNodeError(
                    f"no such chroot {self._chroot} (nothing was created) on ZooKeeper at {hosts}"
                )
            return
        chain = [*paths.ancestors(self._chroot), self._chroot]
        # Raw requests carry absolute paths: kazoo's chroot prefix does not apply to them.
        found = self._run([proto.Exists(p, None) for p in chain], "exists")
        missing: list[str] = []
        for path, stat in zip(chain, found, strict=True):
            if isinstance(stat, BaseException):
                raise translate(stat, path=path, action="look up the chroot")
            if stat is None:
                missing.append(path)
        # Kafka creates its chroot with the ACL of that path (makeSurePersistentPathExists).
        acl = self.config.set_acl
        replies = self._run(
            [proto.Create(p, b"", default_acls(acl, p), 0) for p in missing], "create"
        )
        for path, reply in zip(missing, replies, strict=True):
            if isinstance(reply, BaseException) and not isinstance(reply, kz.NodeExistsError):
                error = translate(reply, path=path, action="create the chroot")
                raise type(error)(
                    f"cannot create the chroot {self._chroot}: {error.message}", path=path
                )

    def close(self) -> None:
        with self._lock:
            if self._keeper.state is SessionState.CLOSED or self._closing:
                return
            self._closing = True
        self._shutdown()

    def _shutdown(self) -> None:
        self._closing = True
        try:
            # Ends the session: the server deletes its ephemeral nodes before replying.
            self._client.stop()
        except KazooException as exc:
            log.debug("%s: error while closing: %s", self.url.redacted(), type(exc).__name__)
        finally:
            self._client.close()
            self._keeper.change_state(SessionState.CLOSED)
            self._trees.close()
            self._events.stop()

    def flush_events(self, timeout: float = 10.0) -> bool:
        """Wait until every watch and listener callback queued so far has run."""
        return self._events.flush(timeout)

    # -- plumbing
    def _check_usable(self, path: str | None) -> None:
        state = self._keeper.state
        if state is SessionState.CONNECTED:
            return
        if state is SessionState.CLOSED or self._closing:
            raise StoreClosedError("store client is closed", path=path)
        if state is SessionState.SUSPENDED:
            raise ConnectionLossError(
                f"not connected to ZooKeeper at {self.url.redacted()}; reconnecting", path=path
            )
        if self._client.client_state == KeeperState.AUTH_FAILED:
            raise AuthFailedError(
                f"ZooKeeper at {self.url.redacted()} refused the credentials", path=path
            )
        raise SessionExpiredError(
            "the ZooKeeper session expired; a new session is being established", path=path
        )

    def _wait(self, result: Any, path: str | None, action: str, **context: Any) -> Any:
        try:
            return result.get(timeout=self._timeout)
        except (KazooException, KazooTimeoutError) as exc:
            raise translate(
                exc, path=path, action=action, closing=self._closing, **context
            ) from exc

    def _full(self, path: str) -> str:
        """``path`` with the chroot prefix, for raw protocol requests."""
        if not self._chroot:
            return path
        return self._chroot if path == "/" else self._chroot + path

    def _relative(self, path: str) -> str:
        if self._chroot and path.startswith(self._chroot):
            return path[len(self._chroot) :] or "/"
        return path

    def _run(self, requests: Sequence[Any], action: str) -> list[Any]:
        """Pipeline raw requests; one reply or kazoo exception per request, in order."""
        batch = wire.submit(self._client, requests)
        if not batch.wait(self._timeout):
            batch.fail_pending(
                lambda: ConnectionLossError(
                    f"no reply from ZooKeeper to {action} within {self._timeout:g}s; the outcome is unknown"
                )
            )
        return batch.results

    # -- single operations
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
        self._check_usable(path)
        paths.validate(path, sequential=sequential)
        data = check_data(path, data)
        if path == "/":
            raise InvalidPathError("the root node has no parent", path=path)
        try:
            created: str = self._wait(
                self._client.create_async(
                    path, data, self._acl(path), ephemeral=ephemeral, sequence=sequential
                ),
                path,
                "create",
                sequential=sequential,
            )
            return created
        except NoNodeError:
            if not make_parents:
                raise
        return create_with_parents(self, Create(path, data, ephemeral, sequential))

    def get(self, path: str) -> tuple[bytes, Stat]:
        self._check_usable(path)
        paths.validate(path)
        data, stat = self._wait(self._client.get_async(path), path, "get")
        return data, to_stat(stat)

    def exists(self, path: str) -> Stat | None:
        self._check_usable(path)
        paths.validate(path)
        stat = self._wait(self._client.exists_async(path), path, "exists")
        return None if stat is None else to_stat(stat)

    def children(self, path: str) -> list[str]:
        self._check_usable(path)
        paths.validate(path)
        names: list[str] = self._wait(self._client.get_children_async(path), path, "children")
        return sorted(names)

    def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> Stat:
        self.check_writable("set", path)
        self._check_usable(path)
        paths.validate(path)
        data = check_data(path, data)
        stat = self._wait(self._client.set_async(path, data, version), path, "set", version=version)
        return to_stat(stat)

    def delete(self, path: str, version: int = ANY_VERSION, *, recursive: bool = False) -> None:
        self.check_writable("delete", path)
        self._check_usable(path)
        paths.validate(path)
        if recursive:
            delete_tree(self, path, version)
            return
        if path == "/":
            raise StoreError("the root node cannot be deleted", path=path)
        self._wait(self._client.delete_async(path, version), path, "delete", version=version)

    # -- multi-operations
    def commit(self, ops: Sequence[Op]) -> list[Any]:
        self.check_writable("commit a transaction")
        ops = list(ops)
        self._check_usable(None)
        self._validate_all(ops)
        if not ops:
            return []
        return self._multi(ops, tag=True)

    def _validate_all(self, ops: Sequence[Op]) -> None:
        """Validate every op of a transaction; an error names its op's index."""
        for index, op in enumerate(ops):
            try:
                self._validate(op)
            except StoreError as exc:
                exc.op_index = index
                raise

    def _multi(self, ops: list[Op], *, tag: bool) -> list[Any]:
        check_transaction_size(ops)
        (reply,) = self._run([proto.Transaction([self._wire_op(op) for op in ops])], "commit")
        if isinstance(reply, BaseException):
            raise translate(reply, path=None, action="commit", closing=self._closing)
        self._raise_failed_op(reply, ops, tag=tag)
        return [self._result(op, value) for op, value in zip(ops, reply, strict=True)]

    def set_many(
        self,
        paths_: Sequence[str],
        data: Sequence[bytes],
        versions: Sequence[int],
        *,
        checks: Sequence[Check] = (),
    ) -> StatColumns:
        self.check_writable("commit a transaction")
        check_set_columns(paths_, data, versions)
        self._check_usable(None)
        self._validate_all(checks)
        # The usual batch (plain paths, bytes within the limit) is vouched for in a few C-speed
        # passes; anything else is checked item by item, which names the op at fault.
        if not (
            paths.all_plain(paths_)
            and set(map(type, data)) <= {bytes}
            and max(map(len, data), default=0) <= MAX_DATA_SIZE
        ):
            for index, (path, value) in enumerate(zip(paths_, data, strict=True)):
                try:
                    paths.validate(path)
                    if value.__class__ is not bytes or len(value) > MAX_DATA_SIZE:
                        check_data(path, value)  # bytes-like within the limit, or an error
                except StoreError as exc:
                    exc.op_index = len(checks) + index
                    raise
        return send_set_many(self, paths_, data, versions, checks)

    def _raise_failed_op(self, reply: list[Any], ops: Sequence[Op], *, tag: bool) -> None:
        """Raise the error of the op that failed a multi, if one did (``op_index`` set; ``tag``:
        the message names the op)."""
        failed = first_failure(reply)
        if failed is None:
            return
        op = ops[failed]
        error = translate_op(reply[failed], op, closing=self._closing)
        error.op_index = failed
        if tag:
            error.message = f"{error.message} [transaction op {failed}: {describe_op(op)}]"
        raise error

    def _validate(self, op: Op) -> None:
        validate_op(op)

    def _wire_op(self, op: Op) -> Any:
        return wire_op(op, self._full, self._acl)

    def _result(self, op: Op, value: Any) -> Any:
        return op_result(op, value, self._relative)

    # -- bulk
    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        return self._bulk_reads.get_many(paths_)

    def apply(self, ops: Sequence[Op]) -> list[Any]:
        self.check_writable("apply operations")
        ops = list(ops)
        self._check_usable(None)
        results: list[Any] = [None] * len(ops)
        sent: list[int] = []
        requests: list[Any] = []
        for index, op in enumerate(ops):
            try:
                self._validate(op)
            except StoreError as exc:
                exc.op_index = index
                results[index] = exc
                continue
            sent.append(index)
            # A check is a one-op multi, as in memory's apply.
            wire_op = self._wire_op(op)
            requests.append(proto.Transaction([wire_op]) if isinstance(op, Check) else wire_op)
        replies = self._run(requests, "apply")
        for index, reply in zip(sent, replies, strict=True):
            results[index] = self._applied(ops[index], index, reply)
        return results

    def _applied(self, op: Op, index: int, reply: Any) -> Any:
        """One op's result in :meth:`apply`: its value, or its error with ``op_index`` set."""
        note = ""
        if isinstance(op, Check) and isinstance(reply, list):
            reply, note = reply[0], f" [transaction op 0: {describe_op(op)}]"
        if not isinstance(reply, BaseException):
            return self._result(op, reply)
        error = (
            reply
            if isinstance(reply, StoreError)
            else translate_op(reply, op, closing=self._closing)
        )
        error.message += note
        error.op_index = index
        return error

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
        """The change feed through a persistent recursive watch (:mod:`coordkit_zookeeper.treewatch`
        says what its positions mean); RESYNC after every reconnect, and on opening unless
        nothing at all was committed after ``since``."""
        paths.validate(path)
        check_since(since)
        self._require_open()
        return self._trees.open(path, callback, since)

    def _require_open(self) -> None:
        if self._keeper.state is SessionState.CLOSED or self._closing:
            raise StoreClosedError("store client is closed")

    def _on_data_event(self, event: WatchedEvent) -> None:
        if event.type != EventType.NONE and event.path is not None:
            self._hub.notify_data(event.path)

    def _on_children_event(self, event: WatchedEvent) -> None:
        if event.type != EventType.NONE and event.path is not None:
            self._hub.notify_children(event.path)

    def _read_data(self, path: str) -> tuple[bytes, Stat] | None:
        found: tuple[bytes, Stat] | None = self._read_watched(
            path, self._on_data_event, self._client.get_async, "get"
        )
        return found

    def _read_children(self, path: str) -> tuple[list[str], Stat] | None:
        def children_with_stat(p: str, watch: Callable[[WatchedEvent], None]) -> Any:
            return self._client.get_children_async(p, watch=watch, include_data=True)

        found: tuple[list[str], Stat] | None = self._read_watched(
            path, self._on_children_event, children_with_stat, "children"
        )
        return found

    def _read_watched(
        self, path: str, watcher: Callable[[WatchedEvent], None], read: Any, action: str
    ) -> Any:
        """Read ``path`` leaving a watch; a missing node gets an exists-watch for its creation."""
        while True:
            self._check_usable(path)
            try:
                value, stat = self._wait(read(path, watch=watcher), path, action)
                return value, to_stat(stat)
            except NoNodeError:
                pass
            if self._wait(self._client.exists_async(path, watch=watcher), path, "exists") is None:
                return None
            # Created between the two reads: read it again.

    def __repr__(self) -> str:
        keeper = self._keeper
        return f"<ZooKeeperStore {self.url.redacted()} session={keeper.session_id:#x} {keeper.state.value}>"
