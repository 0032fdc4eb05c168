"""Key names of one store's namespace on a Redis server.

Every key starts with the hash tag ``{prefix}`` so that all keys of a store fall in one Redis
Cluster slot and each Lua script stays atomic. The layout itself is documented in
``lua/engine.lua``; this module is its Python mirror.
"""

from __future__ import annotations

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

    @property
    def log(self) -> str:
        return self.base + "log"

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
