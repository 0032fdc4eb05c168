"""The Redis store client: one ZooKeeper-style session on a Redis server (redis-py).

Reads are single commands (HGETALL) or small read-only scripts; every write is one atomic Lua
script (see ``lua/``); bulk calls stream batches of ops (or paths) to scripts over one connection.
Watches go through the shared :class:`~coordkit.store.watches.WatchHub`, fed by the change-stream shards
covering the watched paths (:mod:`coordkit_redis.changes`, read by :mod:`coordkit_redis.reader`);
change feeds (``watch_tree``) read the tree stream (:mod:`coordkit_redis.treefeed`), on a thread
and connection of their own started with the first feed.

Three threads besides the caller's, two with a connection of their own: the session keeper's
heartbeat (:mod:`coordkit_redis.sessions`), the change reader (:mod:`coordkit_redis.reader`), and
the event thread running callbacks; none waits for another, so a busy feed or a slow callback
never delays a renewal. (One more thread serves every store of the process: the pacer, which
renews sessions whose keeper is late, :mod:`coordkit_redis.pacer`.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import redis
import redis.exceptions as rex

from coordkit.errors import (
    ConnectionLossError,
    NoNodeError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
)
from coordkit.store import (
    ANY_VERSION,
    ChildrenCallback,
    DataCallback,
    KeptSessionStore,
    Op,
    SessionState,
    Stat,
    StoreCharacteristics,
    TreeCallback,
    TreeWatch,
    Watch,
    check_data,
    describe_op,
)
from coordkit.store.changefeed import check_since
from coordkit.store.urls import StoreURL
from coordkit.store.watches import EventThread, WatchHub
from coordkit_redis.bulk import stream_calls
from coordkit_redis.changes import ChangeFeed
from coordkit_redis.codec import (
    SESSION_EXPIRED,
    Words,
    check_creatable,
    check_path,
    create_words,
    encode_op,
    multi_error,
    node_from_hash,
    nodes_from_blob,
    result_of,
    stat_from_script,
)
from coordkit_redis.config import RedisConfig, probe_characteristics
from coordkit_redis.failures import is_connection_failure, translate
from coordkit_redis.keys import KeySpace
from coordkit_redis.reader import MAX_BLOCK, ChangeReader
from coordkit_redis.scripts import SCRIPTS, LuaScript
from coordkit_redis.sessions import RedisSessionKeeper
from coordkit_redis.treefeed import MAX_BLOCK as TREE_BLOCK
from coordkit_redis.treefeed import TreeFeeds

#: Ops per script call in apply(), and a bound on the bytes one call carries.
BATCH_OPS = 1000
BATCH_BYTES = 4 * 1024 * 1024
#: Paths per read.lua call in get_many(), and the data bytes after which a call stops early.
READ_BATCH = 1000
READ_BUDGET = 8 * 1024 * 1024

Batch = list[tuple[int, Words]]


class RedisStore(KeptSessionStore):
    """A client session on a Redis server emulating ZooKeeper (see ``lua/engine.lua``).

    With ``read_only`` it opens no session (a session is written: its key, its deadline, and the
    root node of a fresh prefix), so it writes nothing at all: a prefix without a root node is a
    :class:`NoNodeError`, and every write method raises ``ReadOnlyError``. Watches still work
    (the change stream is read as usual); the session id is 0.
    """

    characteristics: StoreCharacteristics
    _keeper: RedisSessionKeeper

    def __init__(self, url: StoreURL, config: RedisConfig, *, read_only: bool = False):
        self.url = url
        self.config = config
        self.read_only = read_only
        self.keys = KeySpace(config.prefix)
        self._script_prefix = (self.keys.zxid, self.keys.base, str(config.stream_maxlen))
        self._client: Any = redis.Redis(**config.connection_kwargs())
        label = f"{config.prefix}@{config.host}:{config.port}"
        self._events = EventThread(f"coordkit-redis-events-{label}")
        self._hub = WatchHub(
            self._events, self._read_data, self._read_children, on_interest=self._interest_changed
        )
        own: list[Any] = []  # single-connection clients, each owned by one thread
        try:
            # A single-connection client connects (and authenticates) at once. A heartbeat waits
            # for its reply a third of the session timeout (at least a second) plus the connect
            # timeout: the server may be busy with a long script. The reader's timeout also
            # covers its blocking read.
            patience = max(1.0, config.session_timeout / 3) + config.connect_timeout
            heartbeat_client = redis.Redis(
                **config.connection_kwargs(socket_timeout=patience), single_connection_client=True
            )
            own.append(heartbeat_client)
            reader_client = redis.Redis(
                **config.connection_kwargs(socket_timeout=patience + MAX_BLOCK),
                single_connection_client=True,
            )
            own.append(reader_client)
            self._keeper = RedisSessionKeeper(
                name=label,
                run_script=self._run_script,
                script_prefix=self._script_prefix,
                ops_client=self._client,
                heartbeat_client=heartbeat_client,
                timeout=config.session_timeout,
                events=self._events,
                hub=self._hub,
                read_only=read_only,
            )
            self._feed = ChangeFeed(
                self.keys, self._hub, self._keeper.session_expired_event, sessions=not read_only
            )
            self._reader = ChangeReader(
                name=label,
                feed=self._feed,
                client=reader_client,
                keeper=self._keeper,
                hub=self._hub,
            )
            self._trees = TreeFeeds(
                name=label,
                keys=self.keys,
                run_script=self._run_script,
                ops_client=self._client,
                make_client=lambda: redis.Redis(
                    **config.connection_kwargs(socket_timeout=patience + TREE_BLOCK),
                    single_connection_client=True,
                ),
                keeper=self._keeper,
                events=self._events,
                lease=max(30.0, 3 * config.session_timeout),
                maxlen=config.tree_maxlen,
            )
            self.characteristics = probe_characteristics(self._client)
            if read_only:
                # A feed registers its subscriber (a write): a read-only client has none.
                self.characteristics = attrs.evolve(
                    self.characteristics,
                    ordered_change_feed=False,
                    change_feed_history=False,
                    notes=f"{self.characteristics.notes}; opened read-only: no change feed "
                    "(subscribing to one registers the subscriber, a write)",
                )
                self._require_root(config)
            self._keeper.open()
            self._feed.start(self._client)
            self._reader.start()
        except BaseException as exc:
            if getattr(self, "_keeper", None) is not None and self._keeper.session_id:
                self._keeper.close()
            self._events.stop()
            self._client.close()
            for client in own:
                client.close()
            if isinstance(exc, rex.RedisError | OSError):
                # Named by its redacted URL: `coordkit serve` refusing to start says which store.
                error = translate(exc)
                raise type(error)(f"Redis at {url.redacted()}: {error.message}") from None
            raise
        self._own_clients = own

    def _require_root(self, config: RedisConfig) -> None:
        if not self._client.execute_command("EXISTS", self.keys.node("/")):
            raise NoNodeError(
                f"no store with prefix {config.prefix!r} (nothing was created) on Redis at "
                f"{config.host}:{config.port} database {config.db}"
            )

    # -- plumbing
    def _run_script(self, client: Any, script: LuaScript, *args: Any) -> Any:
        """EVALSHA, loading the script first if the server does not know it (NOSCRIPT ran nothing)."""
        try:
            return client.execute_command("EVALSHA", script.sha, 1, *self._script_prefix, *args)
        except rex.NoScriptError:
            client.execute_command("SCRIPT", "LOAD", script.source)
            return client.execute_command("EVALSHA", script.sha, 1, *self._script_prefix, *args)

    def _failed(self, exc: BaseException, path: str | None) -> StoreError:
        if isinstance(exc, ValueError) and not is_connection_failure(exc):
            raise exc  # a bug, not the server
        if is_connection_failure(exc):
            if self._keeper.state is SessionState.CLOSED:
                return StoreClosedError("store client is closed", path=path)
            self._keeper.connection_failed()
        return translate(exc, path)

    def _require_connected(self, path: str | None) -> None:
        state = self._keeper.state
        if state is SessionState.CLOSED:
            raise StoreClosedError("store client is closed", path=path)
        if state is SessionState.SUSPENDED:
            raise ConnectionLossError("not connected to the Redis server", path=path)
        self._keeper.renew_if_late(self._client)  # a busy caller covers for a starved keeper

    def _session_gone(self, session_id: int, path: str | None = None) -> SessionExpiredError:
        self._keeper.session_rejected()
        return SessionExpiredError(f"session {session_id:#x} has expired", path=path)

    def _write(self, words: Words) -> Any:
        """One op in its own transaction; returns its result or raises its error."""
        path = words[1]
        self._require_connected(path)
        session = self._keeper.session_word
        try:
            reply = self._run_script(self._client, SCRIPTS.ops, session, "e", *words)
        except (rex.RedisError, OSError, ValueError) as exc:
            raise self._failed(exc, path) from None
        if reply == SESSION_EXPIRED:
            raise self._session_gone(int(session), path)
        result = result_of(reply)
        if isinstance(result, StoreError):
            raise result
        return result

    # -- session
    @property
    def worst_heartbeat_gap(self) -> float:
        """Seconds: the longest this client's sessions went without a renewal, on the server's
        clock, or the time since the last heartbeat if that is longer (see
        :mod:`coordkit_redis.sessions`). For tests and benchmarks: well under the session timeout
        means renewals were never close to being starved."""
        return self._keeper.worst_heartbeat_gap

    @property
    def change_feed(self) -> ChangeFeed:
        """The change-stream shards this client follows, and how many entries it has read."""
        return self._feed

    @property
    def heartbeat_interval(self) -> float:
        """Seconds between renewals (a fifteenth of the session timeout)."""
        return self._keeper.heartbeat_interval

    @property
    def tree_feeds(self) -> TreeFeeds:
        """This client's change feeds (``watch_tree``): its subscriber id, entries read."""
        return self._trees

    def close(self) -> None:
        if self._keeper.state is SessionState.CLOSED:
            return
        self._trees.close()
        self._keeper.close()
        self._reader.stop()
        self._events.stop()
        self._client.close()
        for client in self._own_clients:
            client.close()

    def flush_events(self, timeout: float = 10.0) -> bool:
        """Wait until every watch and listener callback queued so far has run."""
        return self._events.flush(timeout)

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
        check_path(path, sequential=sequential)
        data = check_data(path, data)
        check_creatable(path, sequential)
        created: str = self._write(create_words(path, data, ephemeral, sequential, make_parents))
        return created

    def get(self, path: str) -> tuple[bytes, Stat]:
        check_path(path)
        self._require_connected(path)
        try:
            node = self._client.execute_command("HGETALL", self.keys.node(path))
        except (rex.RedisError, OSError, ValueError) as exc:
            raise self._failed(exc, path) from None
        if not node:
            raise NoNodeError("no node", path=path)
        return node_from_hash(node)

    def exists(self, path: str) -> Stat | None:
        check_path(path)
        self._require_connected(path)
        try:
            reply = self._run_script(self._client, SCRIPTS.stat, path)
        except (rex.RedisError, OSError, ValueError) as exc:
            raise self._failed(exc, path) from None
        return None if reply is None else stat_from_script(reply)

    def children(self, path: str) -> list[str]:
        found = self._children(path)
        if found is None:
            raise NoNodeError("no node", path=path)
        return found[0]

    def _children(self, path: str) -> tuple[list[str], Stat] | None:
        check_path(path)
        self._require_connected(path)
        try:
            reply = self._run_script(self._client, SCRIPTS.children, path)
        except (rex.RedisError, OSError, ValueError) as exc:
            raise self._failed(exc, path) from None
        if reply is None:
            return None
        names = reply[10].decode()
        return sorted(names.split("\n")) if names else [], stat_from_script(reply)

    def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> Stat:
        self.check_writable("set", path)
        check_path(path)
        data = check_data(path, data)
        stat: Stat = self._write(("s", path, data, str(int(version))))
        return stat

    def delete(self, path: str, version: int = ANY_VERSION, *, recursive: bool = False) -> None:
        self.check_writable("delete", path)
        check_path(path)
        self._write(("r" if recursive else "d", path, b"", str(int(version))))

    # -- multi-operations
    def commit(self, ops: Sequence[Op]) -> list[Any]:
        self.check_writable("commit a transaction")
        ops = list(ops)
        args: list[bytes | str] = []
        for index, op in enumerate(ops):
            try:
                args.extend(encode_op(op))
            except StoreError as exc:
                exc.op_index = index
                raise
        self._require_connected(None)
        if not ops:
            return []
        session = self._keeper.session_word
        try:
            reply = self._run_script(self._client, SCRIPTS.ops, session, "m", *args)
        except (rex.RedisError, OSError, ValueError) as exc:
            raise self._failed(exc, None) from None
        if reply == SESSION_EXPIRED:
            raise self._session_gone(int(session))
        if reply[:1] == b"!":
            error = multi_error(reply)
            failed = error.op_index
            assert failed is not None
            error.message = f"{error.message} [transaction op {failed}: {describe_op(ops[failed])}]"
            raise error
        return [result_of(line) for line in reply.split(b"\n")]

    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        self._require_connected(None)
        results: list[Any] = [None] * len(paths_)
        wanted: list[tuple[int, str]] = []
        for index, path in enumerate(paths_):
            try:
                wanted.append((index, check_path(path)))
            except StoreError as exc:
                exc.op_index = index
                results[index] = exc
        retry: list[list[tuple[int, str]]] = []

        def on_reply(batch: list[tuple[int, str]], reply: Any) -> None:
            if isinstance(reply, Exception):
                raise self._failed(reply, None)
            nodes = nodes_from_blob(reply)
            for (index, path), node in zip(batch, nodes, strict=False):
                results[index] = (
                    NoNodeError("no node", path=path, op_index=index) if node is None else node
                )
            if len(nodes) < len(batch):  # the script's byte budget ran out: ask again
                retry.append(batch[len(nodes) :])

        pending = [wanted[i : i + READ_BATCH] for i in range(0, len(wanted), READ_BATCH)]
        while pending:
            self._stream(SCRIPTS.read, pending, self._read_args, on_reply)
            pending, retry = retry, []
        return results

    @staticmethod
    def _read_args(batch: list[tuple[int, str]]) -> list[bytes | str]:
        return [str(READ_BUDGET), *(path for _, path in batch)]

    def apply(self, ops: Sequence[Op]) -> list[Any]:
        self.check_writable("apply operations")
        ops = list(ops)
        results: list[Any] = [None] * len(ops)
        batches: list[Batch] = []
        batch: Batch = []
        size = 0
        for index, op in enumerate(ops):
            try:
                words = encode_op(op)
            except StoreError as exc:
                exc.op_index = index
                results[index] = exc
                continue
            if batch and (len(batch) >= BATCH_OPS or size + len(words[2]) > BATCH_BYTES):
                batches.append(batch)
                batch, size = [], 0
            batch.append((index, words))
            size += len(words[1]) + len(words[2]) + 16
        if batch:
            batches.append(batch)
        if not batches:
            return results
        session_id = self._keeper.session_id
        session = str(session_id)
        answered: set[int] = set()

        def args_of(batch: Batch) -> list[bytes | str]:
            args: list[bytes | str] = [session, "e"]
            for _, words in batch:
                args.extend(words)
            return args

        def on_reply(batch: Batch, reply: Any) -> None:
            answered.add(id(batch))
            if isinstance(reply, Exception):
                self._fail(results, batch, self._failed(reply, None))
            elif reply == SESSION_EXPIRED:
                self._fail(results, batch, self._session_gone(session_id))
            else:
                for (index, _), line in zip(batch, reply.split(b"\n"), strict=True):
                    results[index] = result_of(line, index)

        try:
            self._require_connected(None)
            self._stream(SCRIPTS.ops, batches, args_of, on_reply)
        except StoreError as exc:
            # Not atomic: whatever was answered stands; every other op gets the error.
            for unanswered in batches:
                if id(unanswered) not in answered:
                    self._fail(results, unanswered, exc)
        return results

    def _stream(
        self,
        script: LuaScript,
        batches: Sequence[Any],
        args_of: Callable[[Any], Sequence[bytes | str]],
        on_reply: Callable[[Any, Any], None],
    ) -> None:
        """Run ``script`` once per batch, in order, streamed over one connection.

        :raises StoreError: the connection failed (batches answered so far have been handled).
        """
        todo: Sequence[Any] = batches
        try:
            for _attempt in range(2):
                calls = ((batch, args_of(batch)) for batch in todo)
                todo = stream_calls(self._client, script, self._script_prefix, calls, on_reply)
                if not todo:
                    return
                # NOSCRIPT: the server restarted or was flushed; those calls did not run.
                self._client.execute_command("SCRIPT", "LOAD", script.source)
        except (rex.RedisError, OSError, ValueError) as exc:
            raise self._failed(exc, None) from None
        raise StoreError(f"the server does not keep the {script.name} script loaded")

    @staticmethod
    def _fail(results: list[Any], batch: Sequence[tuple[int, Any]], error: StoreError) -> None:
        for index, item in batch:
            path = item if isinstance(item, str) else item[1]
            results[index] = type(error)(error.message, path=path, op_index=index)

    # -- watches
    def watch_data(self, path: str, callback: DataCallback) -> Watch:
        check_path(path)
        self._require_open()
        return self._hub.add_data_watch(path, callback)

    def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        check_path(path)
        self._require_open()
        return self._hub.add_children_watch(path, callback)

    def watch_tree(
        self, path: str, callback: TreeCallback, *, since: int | None = None
    ) -> TreeWatch:
        """The change feed, from the tree stream (:mod:`coordkit_redis.treefeed`): exact
        positions (the zxid each change committed at, with the state it wrote) and exact
        resumption while the stream holds what followed ``since``; a cut connection or a lost
        session resumes where the feed stood, unless entries were trimmed meanwhile (RESYNC)."""
        check_path(path)
        check_since(since)
        self.require("ordered_change_feed")
        self._require_connected(path)
        return self._trees.subscribe(path, callback, since)

    def _require_open(self) -> None:
        if self._keeper.state is SessionState.CLOSED:
            raise StoreClosedError("store client is closed")

    def _interest_changed(self, key: tuple[str, str]) -> None:
        """The hub's first watch on a (kind, path) was added or its last removed: follow the
        stream shards it needs (before the watch's first read) or let the reader drop them."""
        kind, path = key
        try:
            if self._feed.follow(self._client, kind, path):
                self._reader.wake(self._client)
        except (rex.RedisError, OSError, ValueError) as exc:
            # The reader follows them once it can, then re-reads every watch (nothing is missed).
            self._feed.follow_failed()
            if is_connection_failure(exc):
                self._keeper.connection_failed()
            elif isinstance(exc, ValueError):
                raise

    def _read_data(self, path: str) -> tuple[bytes, Stat] | None:
        try:
            return self.get(path)
        except NoNodeError:
            return None

    def _read_children(self, path: str) -> tuple[list[str], Stat] | None:
        return self._children(path)
