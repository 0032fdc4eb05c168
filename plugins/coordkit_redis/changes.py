"""The change feed: stream shards by directory, so a client reads what it watches and no more.

Every write script appends what it changed to the store's change streams (``lua/engine.lua``).
Events are ``D``, path (the node's data or existence may have changed), ``C``, path (its children
may have changed) and ``X``, session id (that session expired). They are filed by *directory*: a
``D`` event under the node's parent, a ``C`` event under the node itself, and a directory's events
go to one of :data:`~coordkit_redis.keys.SHARDS` streams, chosen by a hash of its path
(:func:`~coordkit_redis.keys.shard_number`). ``X`` events have a stream of their own.

Why directories: a data watch on ``/a/b`` needs ``D /a/b`` (directory ``/a``), a children watch on
``/a`` needs ``C /a`` (directory ``/a``) and ``D /a`` (directory ``/``). So a client follows only
the few shards covering its watches (:meth:`ChangeFeed.follow`, told by the hub when a path gains
its first watch), and writes elsewhere cost it nothing unless their directory hashes to a shard it
reads. Siblings share a directory, so a bulk write under a few parents touches a few shards: a
script appends one entry per shard it touched (at most :data:`~coordkit_redis.keys.SHARDS`).
Before, every client read every entry: 20,000 owner-node writes were 2 million entries read by
100 legacy consumers watching three paths each.

Positions. Each followed stream has its own position (the last entry id read, and that entry's
number ``n``: a stream's entries are numbered 1, 2, ...). A newly followed shard starts at its
newest entry, read *before* the hub's first read of the watched node, so no change after that read
is missed. After a reconnect, reading resumes at each position; a shard trimmed past its position
(``stream_maxlen`` entries are kept per shard) or reset (a server that lost its data) moves to its
end and the caller re-reads every watched node (a full resync). A reader that falls that far
behind while connected (a write storm in a directory it watches) finds a gap in the numbers of
what it reads next: a full resync too.

Global revisions. Every entry carries ``z``, the zxid of the last transaction in it: the store's
global revision, the same counter whatever the shard. Change feeds (``watch_tree``) need one total
order with each op's state, and a subtree's directories hash to any shard, so they read a global
stream instead, which scripts write only while a feed subscriber is registered (so a store without
one pays nothing): :mod:`coordkit_redis.treefeed`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from coordkit.store.watches import WatchHub
from coordkit_redis.keys import KeySpace

Revision = tuple[int, int]
START: Revision = (0, 0)
#: Entries per stream and read.
READ_COUNT = 1000
#: Up to this many watched (kind, path) keys, entries are searched for them rather than parsed.
SEARCHED = 32

Entry = tuple[bytes, dict[bytes, bytes]]
#: Where a client stands in a stream: the last entry id read, and that entry's number (None: not
#: known, e.g. written by an older client; then gaps are not looked for until the next entry).
Position = tuple[Revision, int | None]


def parse_revision(raw: bytes | str) -> Revision:
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def format_revision(revision: Revision) -> str:
    return f"{revision[0]}-{revision[1]}"


class ChangeFeed:
    """The streams one client follows, where it stands in each, and the dispatch of what it reads.

    Thread-safe: :meth:`follow` runs on whichever thread adds a watch, :meth:`poll` and the resync
    check on the client's reader thread.

    :param on_session_expired: called with a session id found in an ``X`` event.
    :param sessions: follow the stream of expired sessions (a client holding a session does).
    """

    def __init__(
        self,
        keys: KeySpace,
        hub: WatchHub,
        on_session_expired: Callable[[int], Any],
        *,
        sessions: bool = True,
    ):
        self.keys = keys
        self._hub = hub
        self._on_session_expired = on_session_expired
        self._fixed = (keys.expiries,) if sessions else ()
        self._positions: dict[str, Position] = {}
        self._lock = threading.Lock()
        self._prune = False
        self._repair = False
        self._added = threading.Event()
        #: Stream entries read so far (what following the feed has cost this client).
        self.entries_read = 0

    # -- which streams
    @property
    def positions(self) -> dict[str, Revision]:
        """A copy of the followed streams and the last entry id read in each."""
        with self._lock:
            return {key: revision for key, (revision, _n) in self._positions.items()}

    def wanted_streams(self) -> set[str]:
        """The streams the hub's watches need right now (plus the expiries stream)."""
        wanted = set(self._fixed)
        for kind, path in self._hub.watched():
            wanted.update(self.keys.watch_streams(kind, path))
        return wanted

    def start(self, client: Any) -> None:
        """Follow the fixed streams from their newest entry (a new client has nothing to catch up
        on), and whatever the hub already watches."""
        self._add(client, self.wanted_streams())

    def follow(self, client: Any, kind: str, path: str) -> bool:
        """A watch of ``kind`` on ``path`` was added or removed (the hub is the truth). On an
        addition, start following the shards it needs that no watch needed before, at their
        newest entry; call this before the watch's first read. True if new streams were added
        (the reader should pick them up now)."""
        if not self._hub.is_watched(kind, path):
            with self._lock:
                self._prune = True  # dropped by the reader: it decides under the lock
            return False
        return self._add(client, self.keys.watch_streams(kind, path))

    def _add(self, client: Any, streams: Iterable[str]) -> bool:
        with self._lock:
            missing = [key for key in streams if key not in self._positions]
        if not missing:
            return False
        newest = newest_entries(client, missing)
        with self._lock:
            for key, position in newest.items():
                # A racing follow of the same stream keeps the older position: both are safe.
                current = self._positions.get(key)
                if current is None or position[0] < current[0]:
                    self._positions[key] = position
        self._added.set()
        return True

    def follow_failed(self) -> None:
        """:meth:`follow` could not reach the server: :meth:`repair` must catch up."""
        with self._lock:
            self._repair = True

    def repair(self, client: Any) -> bool:
        """After a failed :meth:`follow`: follow every stream the watches need, from its newest
        entry. True if streams were added: changes since the watches' first reads may be missed,
        so the caller re-reads every watched node."""
        with self._lock:
            if not self._repair:
                return False
            self._repair = False
        try:
            return self._add(client, self.wanted_streams())
        except BaseException:
            self.follow_failed()
            raise

    def _snapshot(self) -> dict[str, Position]:
        """The positions to read from; drops streams no watch needs any more."""
        with self._lock:
            if self._prune:
                self._prune = False
                wanted = self.wanted_streams()
                for key in [k for k in self._positions if k not in wanted]:
                    del self._positions[key]
            return dict(self._positions)

    def _advance(self, key: str, position: Position) -> None:
        with self._lock:
            current = self._positions.get(key)
            if current is not None and position[0] > current[0]:
                self._positions[key] = position

    # -- after a reconnect
    def needs_resync(self, client: Any) -> bool:
        """Can reading resume at every position without missing entries?

        For every stream where it cannot (trimmed past, or the stream was reset), the position
        moves to the stream's end and True is returned: the caller must re-read every watched
        node. A false alarm costs one resync.
        """
        positions = self._snapshot()
        if not positions:
            return False
        pipe = client.pipeline(transaction=False)
        for key in positions:
            pipe.xinfo_stream(key)
        replies = pipe.execute(raise_on_error=False)
        lost = False
        for (key, (revision, _n)), reply in zip(positions.items(), replies, strict=True):
            if isinstance(reply, Exception):
                if "no such key" not in str(reply).lower():
                    raise reply
                info = None
            else:
                info = {k.decode() if isinstance(k, bytes) else k: v for k, v in reply.items()}
            moved, newest = _resume_point(info, revision)
            if moved:
                lost = True
                last = info.get("last-entry") if info else None
                number = _number(last[1]) if last else (None if info else 0)
                with self._lock:
                    if key in self._positions:
                        self._positions[key] = (newest, number)
        return lost

    # -- reading
    def poll(self, client: Any, block_ms: int) -> tuple[int, bool]:
        """Wait up to ``block_ms`` for new entries in the followed streams and dispatch them.

        Returns how many were read (0 also when nothing is followed: then it only waits), and
        whether entries were missed (a stream was trimmed past its position since the last read):
        then the caller must re-read every watched node.
        """
        positions = self._snapshot()
        if not positions:
            self._added.wait(block_ms / 1000)
            self._added.clear()
            return 0, False
        reply = client.xread(
            {key: format_revision(revision) for key, (revision, _n) in positions.items()},
            count=READ_COUNT,
            block=block_ms,
        )
        if not reply:
            return 0, False
        read: list[Entry] = []
        missed = False
        for raw_key, entries in reply:
            read.extend(entries)
            key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
            known = positions.get(key, (START, None))[1]
            first = _number(entries[0][1])
            # Entries of one read are consecutive (trimming removes the oldest only): the first
            # one's number tells whether any were lost since the position.
            if known is not None and first is not None and first != known + 1:
                missed = True
        self.entries_read += len(read)
        self.dispatch(read)
        for raw_key, entries in reply:
            key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
            last_id, last_fields = entries[-1]
            self._advance(key, (parse_revision(last_id), _number(last_fields)))
        return len(read), missed

    def dispatch(self, entries: list[Entry]) -> None:
        """Notify the hub of every watched path the entries name; report expired sessions."""
        wanted: dict[bytes, tuple[str, str]] = {}
        for watch_kind, path in self._hub.watched():
            encoded = path.encode()
            # A node's creation or deletion (a D event) matters to a children watch on it too; the
            # hub turns a data notification into a children re-read as well.
            wanted[b"\nD\n" + encoded + b"\n"] = ("data", path)
            if watch_kind == "children":
                wanted[b"\nC\n" + encoded + b"\n"] = ("children", path)
        changes: list[tuple[str, str]] = []
        for _entry_id, fields in entries:
            payload = fields.get(b"e", b"")
            if payload.startswith(b"X\n"):
                words = payload.split(b"\n")
                for kind, subject in zip(words[::2], words[1::2], strict=True):
                    if kind == b"X":
                        self._on_session_expired(int(subject))
            elif len(wanted) <= SEARCHED:
                # A shard entry names many paths, most of them siblings nobody here watches: look
                # for the few watched ones (a search in C) instead of walking every word. Paths
                # start with '/', kinds are one letter: "\nD\n/a\n" matches only event "D /a".
                framed = b"\n" + payload + b"\n"
                changes.extend(hit for key, hit in wanted.items() if key in framed)
            else:
                words = payload.split(b"\n")
                for kind, subject in zip(words[::2], words[1::2], strict=True):
                    hit = wanted.get(b"\n" + kind + b"\n" + subject + b"\n")
                    if hit is not None:
                        changes.append(hit)
        if changes:
            self._hub.notify_many(changes)


def newest_entries(client: Any, keys: list[str]) -> dict[str, Position]:
    """The position of each stream's newest entry (:data:`START`, number 0 for a missing stream:
    its first entry will be number 1). Trimming only removes old entries, so the newest entry is
    the newest ever written."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.xrevrange(key, "+", "-", count=1)
    replies = pipe.execute()
    return {
        key: (parse_revision(reply[0][0]), _number(reply[0][1])) if reply else (START, 0)
        for key, reply in zip(keys, replies, strict=True)
    }


def _number(fields: Any) -> int | None:
    """An entry's number in its stream (field ``n``), None if it has none."""
    raw = fields.get(b"n") if isinstance(fields, dict) else None
    return int(raw) if raw is not None else None


def _resume_point(info: dict[str, Any] | None, revision: Revision) -> tuple[bool, Revision]:
    """(entries may have been missed, the stream's newest id) for a stream read up to
    ``revision``; ``info`` is XINFO STREAM's reply, None for a missing stream."""
    if info is None:
        return revision != START, START  # gone: the server lost entries this client had seen
    newest = parse_revision(info["last-generated-id"])
    if newest == revision:
        return False, newest
    if newest < revision:
        return True, newest  # reset: the server lost entries this client had seen
    # Trimming removes entries from the head only: if the oldest entry kept is newer than the
    # last one read, entries in between may be gone.
    first = info.get("recorded-first-entry-id")
    if first is None and info.get("first-entry"):
        first = info["first-entry"][0]
    deleted = info.get("max-deleted-entry-id")
    if (
        not info.get("length")
        or (first is not None and parse_revision(first) > revision)
        or (deleted is not None and parse_revision(deleted) > revision)
    ):
        return True, newest
    return False, newest
