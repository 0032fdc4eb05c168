"""Key names of one store's namespace on a Redis server.

Every key starts with the hash tag ``{prefix}`` so that all keys of a store fall in one Redis
Cluster slot and each Lua script stays atomic. The layout itself is documented in
``lua/engine.lua``; this module is its Python mirror, change-stream shards included (see
:mod:`coordkit_redis.changes` for why the stream is sharded by directory).
"""

from __future__ import annotations

import hashlib
import re

import attrs

from coordkit.errors import InvalidURLError

DEFAULT_PREFIX = "coordkit"
# Braces would break the hash tag; whitespace and control characters make keys unreadable.
_PREFIX = re.compile(r"^[A-Za-z0-9_.:@/+=\-]{1,200}$")


def check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise InvalidURLError(
            f"redis store prefix {prefix!r} is not valid: use 1-200 characters from "
            "letters, digits and _ . : @ / + = - (no braces: the prefix is the cluster hash tag)"
        )
    return prefix


#: Change-stream shards per store. Fixed: every client of a store must route events the same way
#: (the shard is the first two hex digits of the directory's SHA-1, as ``engine.lua`` computes it).
SHARDS = 256


def shard_number(directory: str) -> int:
    """The change-stream shard holding the events of ``directory``'s entries."""
    return int(hashlib.sha1(directory.encode(), usedforsecurity=False).hexdigest()[:2], 16)


def event_directory(kind: str, path: str) -> str:
    """The directory an event is filed under: a node's data event (``D``) under its parent (the
    root's under itself), a children event (``C``) under the node itself."""
    if kind == "C" or path == "/":
        return path
    head = path.rsplit("/", 1)[0]
    return head or "/"


@attrs.frozen
class KeySpace:
    """The keys of the store named ``prefix``."""

    prefix: str = attrs.field(validator=lambda _i, _a, value: check_prefix(value))
    base: str = attrs.field(init=False)

    @base.default
    def _base(self) -> str:
        return "{" + self.prefix + "}:"

    @property
    def zxid(self) -> str:
        """The global transaction counter; also the key every script names for cluster routing."""
        return self.base + "zxid"

    def shard(self, number: int) -> str:
        """Change-stream shard ``number`` (0 to :data:`SHARDS` - 1)."""
        return f"{self.base}log:{number:02x}"

    def shard_of(self, directory: str) -> str:
        return self.shard(shard_number(directory))

    def watch_streams(self, kind: str, path: str) -> tuple[str, ...]:
        """The shards a watch of ``kind`` (``data`` or ``children``) on ``path`` reads: a data
        watch needs the node's ``D`` events, a children watch its ``C`` events too."""
        data = self.shard_of(event_directory("D", path))
        if kind == "data":
            return (data,)
        children = self.shard_of(event_directory("C", path))
        return (data,) if children == data else (data, children)

    @property
    def expiries(self) -> str:
        """The stream of expired session ids (every client with a session reads it)."""
        return self.base + "expiries"

    @property
    def sequences(self) -> str:
        """Hash: each change stream's name (``log:xx``, ``expiries``) -> entries appended so far;
        entry field ``n`` is its number, so a reader finds entries trimmed before it read them."""
        return self.base + "logseq"

    @property
    def tree(self) -> str:
        """The tree stream of change feeds, written while a subscriber is registered (see
        :mod:`coordkit_redis.treefeed`)."""
        return self.base + "tree"

    @property
    def tree_subscribers(self) -> str:
        """Sorted set: tree subscriber id -> the deadline (server ms) of its lease."""
        return self.base + "tree:subs"

    @property
    def deadlines(self) -> str:
        return self.base + "deadlines"

    def node(self, path: str) -> str:
        return self.base + "n:" + path

    def children(self, path: str) -> str:
        return self.base + "c:" + path

    def session(self, session_id: int) -> str:
        return f"{self.base}s:{session_id}"

    def ephemerals(self, session_id: int) -> str:
        return f"{self.base}e:{session_id}"
