"""The change stream: every write script appends one entry naming what it changed; each client
reads the stream from the last revision (entry id) it saw and tells its WatchHub.

Entry field ``e`` holds events as newline-separated kind and subject pairs: ``D``, path (the node's
data or existence may have changed), ``C``, path (its children may have changed), ``X``, session id
(that session expired). After a reconnect, reading resumes at the last revision seen; if the
stream was trimmed past it, or reset (a server that lost its data), the feed asks for a full
resync instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit.watches import WatchHub

Revision = tuple[int, int]
START: Revision = (0, 0)
READ_COUNT = 1000


def parse_revision(raw: bytes | str) -> Revision:
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def format_revision(revision: Revision) -> str:
    return f"{revision[0]}-{revision[1]}"


class ChangeFeed:
    """Reads one store's change stream and notifies the hub of watched paths.

    :param on_session_expired: called with a session id found in an ``X`` event.
    """

    def __init__(self, stream_key: str, hub: WatchHub, on_session_expired: Callable[[int], Any]):
        self.stream_key = stream_key
        self._hub = hub
        self._on_session_expired = on_session_expired
        self.revision: Revision = START

    def start_at_end(self, client: Any) -> None:
        """Begin after the newest entry (a new client has nothing to catch up on)."""
        info = self._info(client)
        self.revision = START if info is None else parse_revision(info["last-generated-id"])

    def needs_resync(self, client: Any) -> bool:
        """After a reconnect: can reading resume at :attr:`revision` without missing entries?

        When it cannot (trimmed past, or the stream was reset), the feed moves to the stream's end
        and returns True: the caller must re-read every watched node.
        """
        info = self._info(client)
        if info is None:
            lost = self.revision != START
            self.revision = START
            return lost
        newest = parse_revision(info["last-generated-id"])
        if newest == self.revision:
            return False
        if newest < self.revision:
            self.revision = newest  # reset: the server lost entries this client had seen
            return True
        # Trimming removes entries from the head only: if the oldest entry kept is newer than the
        # last one read, entries in between may be gone (a false alarm costs one resync).
        first = info.get("recorded-first-entry-id")
        if first is None and info.get("first-entry"):
            first = info["first-entry"][0]
        deleted = info.get("max-deleted-entry-id")
        if (
            not info.get("length")
            or (first is not None and parse_revision(first) > self.revision)
            or (deleted is not None and parse_revision(deleted) > self.revision)
        ):
            self.revision = newest
            return True
        return False

    def _info(self, client: Any) -> dict[str, Any] | None:
        import redis.exceptions as rex

        try:
            reply = client.xinfo_stream(self.stream_key)
        except rex.ResponseError as exc:
            if "no such key" in str(exc).lower():
                return None
            raise
        return {k.decode() if isinstance(k, bytes) else k: v for k, v in reply.items()}

    def poll(self, client: Any, block_ms: int) -> int:
        """Wait up to ``block_ms`` for new entries and dispatch them; returns how many were read."""
        reply = client.xread(
            {self.stream_key: format_revision(self.revision)}, count=READ_COUNT, block=block_ms
        )
        if not reply:
            return 0
        entries = reply[0][1]
        self.dispatch(entries)
        return len(entries)

    def dispatch(self, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> None:
        """Notify the hub of every watched path the entries name; report expired sessions."""
        wanted: dict[tuple[bytes, bytes], tuple[str, str]] = {}
        for watch_kind, path in self._hub.watched():
            encoded = path.encode()
            # A node's creation or deletion (a D event) matters to a children watch on it too; the
            # hub turns a data notification into a children re-read as well.
            wanted[(b"D", encoded)] = ("data", path)
            if watch_kind == "children":
                wanted[(b"C", encoded)] = ("children", path)
        changes: list[tuple[str, str]] = []
        for entry_id, fields in entries:
            self.revision = parse_revision(entry_id)
            payload = fields.get(b"e", b"")
            if not wanted and not (payload.startswith(b"X\n") or b"\nX\n" in payload):
                continue
            words = payload.split(b"\n")
            for kind, subject in zip(words[::2], words[1::2], strict=True):
                if kind == b"X":
                    self._on_session_expired(int(subject))
                    continue
                hit = wanted.get((kind, subject))
                if hit is not None:
                    changes.append(hit)
        if changes:
            self._hub.notify_many(changes)
