"""The change stream: every write script appends one entry naming what it changed; each client
reads the stream from the last revision (entry id) it saw and tells its WatchHub.

Entry field ``e`` holds newline-separated events: ``D<path>`` (the node's data or existence may have
changed), ``C<path>`` (its children may have changed), ``X<sid>`` (that session expired). After a
reconnect reading resumes at the last revision seen; if the stream was trimmed past it, or reset
(a server that lost its data), the feed asks for a full resync instead.
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
        deleted = info.get("max-deleted-entry-id")
        trimmed = parse_revision(deleted) if deleted else START
        first = info.get("first-entry")
        if newest < self.revision:
            self.revision = newest  # reset: the server lost entries we had already seen
            return True
        oldest_kept = parse_revision(first[0]) if first else None
        if trimmed > self.revision or (
            deleted is None and oldest_kept is not None and oldest_kept > self.revision
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
        watched = set(self._hub.watched())
        for entry_id, fields in entries:
            self.revision = parse_revision(entry_id)
            payload = fields.get(b"e", b"")
            if not watched and not (payload.startswith(b"X") or b"\nX" in payload):
                continue
            for event in payload.split(b"\n"):
                self._event(event, watched)

    def _event(self, event: bytes, watched: set[tuple[str, str]]) -> None:
        kind = event[:1]
        if kind == b"X":
            self._on_session_expired(int(event[1:]))
            return
        path = event[1:].decode()
        if kind == b"D":
            if ("data", path) in watched:
                self._hub.notify_data(path)
        elif kind == b"C" and ("children", path) in watched:
            self._hub.notify_children(path)
