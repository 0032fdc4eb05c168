"""The Redis store's change feed (:meth:`~coordkit.store.MetadataStore.watch_tree`): the tree stream.

A feed needs one total order, and the directory shards of :mod:`coordkit_redis.changes` have none,
so the scripts keep one more stream, ``{prefix}:tree``, written only while a tree subscriber is
registered: a store nobody follows pays one lookup per write script (``lua/engine.lua``). Each
transaction appends one entry, in the script that commits it (commit order is stream order), with
every create, set and delete it made and the data and stat each op wrote (one entry per script:
a bulk call's thousand transactions make one). The entry's id is ``<last zxid>-<number>``: the
number counts the stream's entries, so a reader finds trimmed ones as a gap; the zxid lets a
resume find its place, and trimming keep the entries of the last ``tree_maxlen`` zxids.

Subscribers. A client registers once for all its feeds (``lua/tree_register.lua``) in a sorted set,
with a lease its reader thread renews while it has a feed; a registration not renewed (the
client's last feed was cancelled, or the client died) stops costing writes when the lease runs
out, and closing the client unregisters at once. When a registration finds no live subscriber, writes were
not being recorded: it appends a *marker* at the current zxid, and a reader meeting a marker
after its position re-reads (RESYNC). So ``since=`` replays exactly when the stream still holds an
entry at or before it (nothing after it was trimmed) and no marker lies after it; otherwise the
feed opens with RESYNC at the current zxid (returned by the same script as the stream's newest
entry, so nothing after it is missed or seen twice).

Reading. One thread per client (:class:`TreeFeeds`), on a connection of its own, reads the stream
from the oldest position among its feeds and hands each feed the changes at or below its path;
delivery is on the store's event thread (:class:`~coordkit.store.changefeed.TreeFeed`). A connection
failure is reported to the session keeper (SUSPENDED); afterwards the reader renews its
registration and reads on: nothing is lost unless entries were trimmed meanwhile (a gap in the
numbers: RESYNC) or the stream was reset (RESYNC). A lost session does not touch the feed: the
stream records the session's ephemerals going like any change.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from coordkit.errors import ConnectionLossError, StoreError
from coordkit.store import SessionState, Stat, TreeCallback, TreeEvent, TreeEventKind
from coordkit.store.changefeed import TreeFeed, at_or_below
from coordkit.store.watches import EventThread
from coordkit_redis.codec import stat_from_text
from coordkit_redis.failures import is_connection_failure, translate
from coordkit_redis.keys import KeySpace
from coordkit_redis.reader import interrupt_blocked_read
from coordkit_redis.scripts import SCRIPTS
from coordkit_redis.sessions import MAX_BACKOFF, MIN_BACKOFF, RedisSessionKeeper

log = logging.getLogger("coordkit.store.redis")

#: Entries read per XREAD (a bulk call's entry holds up to a thousand changes).
READ_COUNT = 100
#: Seconds an idle reader waits in XREAD.
MAX_BLOCK = 0.5
#: Renewals of the registration per lease.
RENEWALS_PER_LEASE = 6

#: (kind, path, position, data, stat): one change as a feed delivers it.
Change = tuple[TreeEventKind, str, int, bytes | None, Stat | None]
#: A tree stream entry's id: (zxid, number).
EntryId = tuple[int, int]
START: EntryId = (0, 0)
#: ``run_script(client, script, *args)``: EVALSHA, loading the script on NOSCRIPT.
ScriptRunner = Callable[..., Any]

_KINDS = {
    ord("c"): TreeEventKind.CREATED,
    ord("s"): TreeEventKind.CHANGED,
    ord("d"): TreeEventKind.DELETED,
}
_MARKER = b"m"


def parse_id(raw: bytes | str) -> EntryId:
    text = raw.decode() if isinstance(raw, bytes) else raw
    zxid, _, number = text.partition("-")
    return int(zxid), int(number or 0)


def format_id(entry: EntryId) -> str:
    return f"{entry[0]}-{entry[1]}"


def decode_entry(zxid: int, fields: dict[bytes, bytes]) -> list[Change] | None:
    """The changes of one tree stream entry (id zxid ``zxid``), in commit order (None for a
    marker)."""
    kinds = fields[b"k"]
    if kinds == _MARKER:
        return None
    paths = fields[b"p"].decode().split("\n")
    stats = fields[b"s"].split(b"\n")
    data = fields[b"d"]
    several = fields.get(b"z")
    zxids = [int(z) for z in several.split(b",")] if several else [zxid] * len(kinds)
    out: list[Change] = []
    offset = 0
    for kind_byte, path, stat_text, at in zip(kinds, paths, stats, zxids, strict=True):
        kind = _KINDS[kind_byte]
        if kind is TreeEventKind.DELETED:
            out.append((kind, path, at, None, None))
            continue
        stat = stat_from_text(stat_text)
        end = offset + stat.data_length
        out.append((kind, path, at, data[offset:end], stat))
        offset = end
    return out


def to_events(changes: list[Change]) -> list[TreeEvent]:
    return [TreeEvent(kind, path, pos, data, stat) for kind, path, pos, data, stat in changes]


class RedisTreeFeed(TreeFeed[Change]):
    """A feed whose :meth:`flush` first asks the server for the stream's newest entry and waits
    for the reader to pass it, so that after a write of this client returns, a flush covers every
    change committed before it."""

    def __init__(
        self,
        path: str,
        callback: TreeCallback,
        events: EventThread,
        feeds: TreeFeeds,
        after: EntryId,
    ):
        super().__init__(path, callback, events, to_events, feeds.cancelled)
        self._feeds = feeds
        #: The newest stream entry handed to this feed (or skipped as not its own).
        self.after = after
        #: The position of the last event handed to it (a RESYNC never goes back before it);
        #: changes at or before it are not handed (an entry may hold several transactions).
        self.pushed = 0

    def flush(self, timeout: float = 10.0) -> bool:
        if self.cancelled:
            return super().flush(timeout)
        deadline = time.monotonic() + timeout
        read = self._feeds.wait_read(self, deadline)
        # On the event thread (a callback flushing) this delivers what waits, whatever the read.
        delivered = super().flush(max(0.0, deadline - time.monotonic()))
        return read and delivered


class TreeFeeds:
    """The change feeds of one store client: their registration, and the thread reading them.

    :param make_client: makes the reader's single-connection client (called once, lazily).
    :param lease: seconds a registration lasts unless renewed.
    :param maxlen: the tree stream keeps the entries of this many newest zxids (approximately)
        while this client subscribes.
    """

    def __init__(
        self,
        *,
        name: str,
        keys: KeySpace,
        run_script: ScriptRunner,
        ops_client: Any,
        make_client: Callable[[], Any],
        keeper: RedisSessionKeeper,
        events: EventThread,
        lease: float,
        maxlen: int,
    ):
        self._name = name
        self._stream = keys.tree
        self._subscribers = keys.tree_subscribers
        self._run_script = run_script
        self._ops_client = ops_client
        self._make_client = make_client
        self._keeper = keeper
        self._events = events
        self._lease_ms = str(max(1, int(lease * 1000)))
        self._renew_every = lease / RENEWALS_PER_LEASE
        self._maxlen = str(maxlen)
        self.subscriber_id = secrets.token_hex(8)
        # Guards the feeds and their positions; the reader waits on it for none, flush for reads.
        self._cond = threading.Condition()
        self._feeds: list[RedisTreeFeed] = []
        # Held while registering or unregistering, so a renewal never revives a registration
        # that closing just dropped.
        self._registration = threading.Lock()
        self._registered = False
        self._renewed_at = 0.0
        self._client: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._connection_id: int | None = None
        #: Stream entries read so far (what following the tree has cost this client).
        self.entries_read = 0

    # -- feeds (caller threads)
    def subscribe(self, root: str, callback: TreeCallback, since: int | None) -> RedisTreeFeed:
        """Register, then start a feed on ``root``: the changes after ``since`` if the stream
        holds them all, else RESYNC at the current zxid; then every change as the reader reads it.

        :raises ConnectionLossError: the client is not connected (nothing was registered).
        """
        if self._keeper.state is not SessionState.CONNECTED:
            raise ConnectionLossError("not connected to the Redis server", path=root)
        with self._registration:
            zxid, newest, gap, covering = self._register(self._ops_client, since)
            if since is not None and 0 < since <= zxid and since >= gap and covering is not None:
                feed = RedisTreeFeed(root, callback, self._events, self, covering)
                feed.pushed = since
            else:
                feed = RedisTreeFeed(root, callback, self._events, self, newest)
                feed.push([(TreeEventKind.RESYNC, root, zxid, None, None)])
                feed.pushed = zxid
            with self._cond:
                self._feeds.append(feed)
                self._cond.notify_all()
        self._start_reader()
        self._wake()
        return feed

    def cancelled(self, feed: TreeFeed[Any]) -> None:
        """A feed was cancelled: drop it. The registration is no longer renewed but stays until its
        lease runs out, so a feed re-opened meanwhile with ``since=`` still replays exactly."""
        with self._cond:
            self._feeds = [f for f in self._feeds if f is not feed]
            self._cond.notify_all()

    def close(self) -> None:
        """The client closes: end every feed and the reader, and unregister."""
        with self._cond:
            feeds = list(self._feeds)
        for feed in feeds:
            feed.cancel()
        with self._registration:
            if self._registered:
                self._unregister(self._ops_client)  # writes stop recording at once
        self._stop.set()
        self._interrupt()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                pass

    def wait_read(self, feed: RedisTreeFeed, deadline: float) -> bool:
        """Wait until the reader has read, for ``feed``, up to the stream's newest entry now."""
        try:
            newest = self._run_script(self._ops_client, SCRIPTS.tree_newest)
        except Exception as exc:
            log.debug("%s: tree feed flush: %s", self._name, translate(exc))
            return False
        if not newest:
            return True
        target = parse_id(newest)
        with self._cond:
            while feed.after < target and not feed.cancelled:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    # -- registration
    def _register(
        self, client: Any, since: int | None = None
    ) -> tuple[int, EntryId, int, EntryId | None]:
        """Register or renew: (zxid, the stream's newest entry, the newest marker's zxid, the
        newest entry at or before ``since``)."""
        try:
            reply = self._run_script(
                client,
                SCRIPTS.tree_register,
                self.subscriber_id,
                self._lease_ms,
                self._maxlen,
                "" if since is None else str(since),
            )
        except Exception as exc:
            if is_connection_failure(exc):
                self._keeper.connection_failed()
            if isinstance(exc, StoreError):
                raise
            raise translate(exc) from None
        self._registered = True
        self._renewed_at = time.monotonic()
        zxid, newest, gap, covering = reply
        return (
            int(zxid),
            parse_id(newest) if newest else START,
            int(gap),
            parse_id(covering) if covering else None,
        )

    def _unregister(self, client: Any) -> None:
        self._registered = False
        try:
            client.zrem(self._subscribers, self.subscriber_id)
        except Exception as exc:  # the lease runs out by itself
            log.debug("%s: could not unregister tree subscriber: %s", self._name, translate(exc))

    def _renew(self) -> None:
        """Renew the registration on the reader's connection. Feeds whose position is past the
        stream's newest entry (a server that lost its data: a new history, whose positions
        start over) re-read, from the new zxid."""
        with self._registration:
            with self._cond:
                if not self._feeds:
                    return  # the lease runs out by itself
            zxid, newest, _gap, _covering = self._register(self._client)
            with self._cond:
                for feed in self._feeds:
                    if feed.after > newest:
                        log.warning(
                            "%s: the tree stream went back (the server lost data): re-reading",
                            self._name,
                        )
                        feed.pushed = zxid
                        feed.push([(TreeEventKind.RESYNC, feed.path, zxid, None, None)])
                        feed.after = newest
                self._cond.notify_all()

    # -- the reader thread
    def _start_reader(self) -> None:
        with self._cond:
            if self._thread is not None or self._stop.is_set():
                return
            self._client = self._make_client()
            self._thread = threading.Thread(
                target=self._run, name=f"coordkit-redis-tree-{self._name}", daemon=True
            )
        self._thread.start()

    def _wake(self) -> None:
        """Unblock the reader's XREAD so it picks up a new feed now (else within MAX_BLOCK)."""
        target = self._connection_id
        if target is None:
            return
        try:
            self._ops_client.execute_command("CLIENT", "UNBLOCK", target)
        except Exception:  # an ACL without CLIENT UNBLOCK: the feed waits for the idle read
            self._connection_id = None

    def _own_id(self) -> int | None:
        """The reader connection's id, for CLIENT UNBLOCK (None for a user who may not run
        CLIENT commands: a new feed then waits for the idle read to end)."""
        try:
            return int(self._client.client_id())
        except Exception:
            return None

    def _interrupt(self) -> None:
        interrupt_blocked_read(self._client)

    def _run(self) -> None:
        backoff = MIN_BACKOFF
        renew = False  # after a failure: the lease may have run out, the stream been reset
        while not self._stop.is_set():
            try:
                with self._cond:
                    if not self._feeds:
                        self._cond.wait(MAX_BLOCK)
                if renew or time.monotonic() - self._renewed_at >= self._renew_every:
                    self._renew()
                    renew = False
                if self._connection_id is None:
                    self._connection_id = self._own_id()
                self._poll()
                backoff = MIN_BACKOFF
            except Exception as exc:
                if self._stop.is_set():
                    break
                self._connection_id = None
                renew = True
                if is_connection_failure(exc) or isinstance(exc, ConnectionLossError):
                    try:
                        self._client.connection.disconnect()
                    except Exception:
                        pass
                    self._keeper.connection_failed()
                else:
                    log.warning("%s: tree feed reader: %s", self._name, translate(exc))
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)

    def _poll(self) -> None:
        with self._cond:
            feeds = [feed for feed in self._feeds if not feed.cancelled]
        if not feeds:
            return
        low = min(feed.after for feed in feeds)
        reply = self._client.xread(
            {self._stream: format_id(low)}, count=READ_COUNT, block=int(MAX_BLOCK * 1000)
        )
        if not reply:
            return
        entries = reply[0][1]
        self.entries_read += len(entries)
        decoded = []
        for raw_id, fields in entries:
            entry = parse_id(raw_id)
            decoded.append((entry, decode_entry(entry[0], fields)))
        with self._cond:
            for feed in feeds:
                if not feed.cancelled:
                    self._hand(feed, decoded)
            self._cond.notify_all()

    @staticmethod
    def _hand(feed: RedisTreeFeed, decoded: list[tuple[EntryId, list[Change] | None]]) -> None:
        """Give ``feed`` the changes below its path among the entries after its position."""
        root = feed.path
        out: list[Change] = []
        after = feed.after
        position = feed.pushed
        for entry, changes in decoded:
            if entry <= after:
                continue
            zxid, number = entry
            if after != START and number != after[1] + 1:
                # Entries between were trimmed (it fell more than the stream's length behind):
                # everything from this entry on follows.
                first = changes[0][2] if changes else zxid
                position = max(position, first - 1)
                out.append((TreeEventKind.RESYNC, root, position, None, None))
            after = entry
            if changes is None:  # a marker: no subscriber was registered up to its zxid
                position = max(position, zxid)
                out.append((TreeEventKind.RESYNC, root, position, None, None))
                continue
            for change in changes:
                if change[2] > position and at_or_below(change[1], root):
                    out.append(change)
            if out and out[-1][2] > position:
                position = out[-1][2]
        if out:
            feed.push(out)
        feed.after = after
        feed.pushed = position
