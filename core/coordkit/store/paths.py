"""ZooKeeper path rules, shared by every store backend so they reject the same paths."""

from __future__ import annotations

import re
from collections.abc import Sequence

from coordkit.errors import InvalidPathError

ROOT = "/"
SEQUENCE_DIGITS = 10  # ZooKeeper appends %010d to sequential node names
#: Characters ZooKeeper refuses in a path (``PathUtils.validatePath``); one search in C instead of
#: a Python loop per character (every store write validates its path).
_REFUSED = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff]")


#: Plain ASCII names without ``.``/``..`` components are valid by the rules below: such a path is
#: accepted by one match (a controller validates 100,000s of state paths in one write); anything
#: else (unicode, odd characters, a trailing ``/``) goes through the full check.
_PLAIN = re.compile(r"(?:/(?!\.\.?(?:/|$))[A-Za-z0-9_.:@=+,\-]+)+")
#: Plain paths joined by newlines (which no plain path holds): :func:`all_plain`'s one match.
_LINE_NAME = r"/(?!\.\.?(?:/|\n|\Z))[A-Za-z0-9_.:@=+,\-]+"
_PLAIN_LINES = re.compile(f"(?:{_LINE_NAME})+(?:\\n(?:{_LINE_NAME})+)*")


def all_plain(paths: Sequence[str]) -> bool:
    """Whether every path passes :func:`validate` by its fast rule (plain ASCII names, no ``.``
    or ``..``), checked by one match over them all; False says only that some path needs
    :func:`validate` to tell (a batch writer then validates them one by one)."""
    if not paths:
        return True
    try:
        joined = "\n".join(paths)
    except TypeError:
        return False
    return joined.count("\n") == len(paths) - 1 and _PLAIN_LINES.fullmatch(joined) is not None


def validate(path: str, *, sequential: bool = False) -> str:
    """Return ``path`` if it is a valid absolute node path, else raise :class:`InvalidPathError`.

    A sequential create may end in ``/`` (the sequence number becomes the whole name), as in
    ZooKeeper.
    """
    if path.__class__ is str and _PLAIN.fullmatch(path) is not None:
        return path
    if not isinstance(path, str):
        raise InvalidPathError(f"path must be a string, got {type(path).__name__}", path=repr(path))
    if not path.startswith("/"):
        raise InvalidPathError("path must start with '/'", path=path)
    if path == ROOT:
        return path
    body = path[1:-1] if sequential and path.endswith("/") else path[1:]
    if path.endswith("/") and not sequential:
        raise InvalidPathError("path must not end with '/'", path=path)
    for part in body.split("/"):
        if part == "":
            raise InvalidPathError("empty path component ('//')", path=path)
        if part in (".", ".."):
            raise InvalidPathError(f"relative path component {part!r}", path=path)
    refused = _REFUSED.search(body)
    if refused is not None:
        code = ord(refused.group())
        if code <= 0x009F:
            raise InvalidPathError(f"control character U+{code:04X} in path", path=path)
        raise InvalidPathError(f"character U+{code:04X} not allowed in path", path=path)
    return path


def parent(path: str) -> str:
    """The parent of ``path`` (``/`` for top-level nodes)."""
    if path == ROOT:
        raise InvalidPathError("the root node has no parent", path=path)
    head = path.rsplit("/", 1)[0]
    return head or ROOT


def basename(path: str) -> str:
    return path.rsplit("/", 1)[1]


def join(base: str, *names: str) -> str:
    out = base.rstrip("/")
    for name in names:
        out = f"{out}/{name}"
    return out or ROOT


def ancestors(path: str) -> list[str]:
    """Proper ancestors of ``path`` from the top, excluding ``/``: ``/a/b/c`` → ``[/a, /a/b]``."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def sequential_name(prefix_path: str, counter: int) -> str:
    return f"{prefix_path}{counter:0{SEQUENCE_DIGITS}d}"


def numeric_name(name: str) -> int | None:
    """The number a node name such as a broker id or partition stands for, or ``None``.

    Only ASCII decimal digits count: ``str.isdigit`` also accepts ``"²"`` and other Unicode digits
    that ``int()`` then refuses; leading zeros are refused too (``"01"`` is not partition 1).
    """
    if not name or not name.isascii() or not name.isdigit():
        return None
    if len(name) > 1 and name[0] == "0":
        return None
    return int(name)
