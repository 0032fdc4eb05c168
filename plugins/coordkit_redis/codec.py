"""Between store calls and script words: path checks, op encoding, reply decoding.

Ops travel to ``lua/ops.lua`` as four words each (kind, path, data, arg); replies come back as a
created path, a stat array, ``1``, or an error triple ``[code, path, message]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from coordkit import paths
from coordkit.errors import (
    BadVersionError,
    InvalidPathError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    StoreError,
)
from coordkit.store import ANY_VERSION, Check, Create, Delete, Op, SetData, Stat, check_data

# Plain ASCII names without '.'/'..' components are valid by coordkit.paths' rules; anything else
# (unicode, odd characters, trailing '/') goes through the full check, which is the reference.
_PLAIN_PATH = re.compile(r"(?:/(?!\.\.?(?:/|$))[A-Za-z0-9_.:@=+,\-]+)+")

ERRORS: dict[bytes, type[StoreError]] = {
    b"NONODE": NoNodeError,
    b"NODEEXISTS": NodeExistsError,
    b"BADVERSION": BadVersionError,
    b"NOTEMPTY": NotEmptyError,
    b"EPHEMERALPARENT": NoChildrenForEphemeralsError,
    b"INVALIDPATH": InvalidPathError,
    b"SESSION": SessionExpiredError,
}

Words = tuple[str, str, bytes, str]


def check_path(path: str, *, sequential: bool = False) -> str:
    """Validate ``path`` exactly as :func:`coordkit.paths.validate` does (fast for plain paths)."""
    if type(path) is str and _PLAIN_PATH.fullmatch(path):
        return path
    return paths.validate(path, sequential=sequential)


def check_creatable(path: str, sequential: bool) -> None:
    """The root is never created (as in the memory store, it has no parent)."""
    if path == paths.ROOT and not sequential:
        paths.parent(path)


def create_words(
    path: str, data: bytes, ephemeral: bool, sequential: bool, make_parents: bool = False
) -> Words:
    flags = ("e" if ephemeral else "") + ("s" if sequential else "") + ("p" if make_parents else "")
    return ("c", path, data, flags)


def encode_op(op: Op) -> Words:
    """Validate one op (path, value) and encode it; raises the same errors as the memory store."""
    match op:
        case Create(path=path, data=data, ephemeral=ephemeral, sequential=sequential):
            check_path(path, sequential=sequential)
            data = check_data(path, data)
            check_creatable(path, sequential)
            return create_words(path, data, ephemeral, sequential)
        case SetData(path=path, data=data, version=version):
            check_path(path)
            return ("s", path, check_data(path, data), str(int(version)))
        case Delete(path=path, version=version):
            check_path(path)
            return ("d", path, b"", str(int(version)))
        case Check(path=path, version=version):
            check_path(path)
            return ("k", path, b"", str(int(version)))
    raise TypeError(f"not a store operation: {op!r}")


def error_from(reply: Sequence[Any], op_index: int | None = None) -> StoreError:
    """A store error from a script's ``[code, path, message]`` triple."""
    code, path, message = reply[0], reply[1], reply[2]
    cls = ERRORS.get(code, StoreError)
    return cls(message.decode(errors="replace"), path=path.decode() or None, op_index=op_index)


def is_error(reply: Any) -> bool:
    return type(reply) is list and len(reply) == 3 and type(reply[0]) is bytes


def stat_from_list(v: Sequence[Any]) -> Stat:
    """From ``[cz, mz, pz, ct, mt, v, cv, owner, data length, nc]`` (ints, or digit strings)."""
    return Stat(
        czxid=int(v[0]),
        mzxid=int(v[1]),
        pzxid=int(v[2]),
        ctime=int(v[3]),
        mtime=int(v[4]),
        version=int(v[5]),
        cversion=int(v[6]),
        aversion=0,
        ephemeral_owner=int(v[7]),
        data_length=int(v[8]),
        num_children=int(v[9]),
    )


def stat_from_script(v: Sequence[Any]) -> Stat:
    """From stat.lua / children.lua: the HMGET fields (cz..nc) then the data length."""
    return Stat(
        czxid=int(v[0]),
        mzxid=int(v[1]),
        pzxid=int(v[2]),
        ctime=int(v[3]),
        mtime=int(v[4]),
        version=int(v[5]),
        cversion=int(v[6]),
        aversion=0,
        ephemeral_owner=int(v[7]),
        data_length=int(v[9]),
        num_children=int(v[8]),
    )


def node_from_hash(h: Mapping[bytes, bytes]) -> tuple[bytes, Stat]:
    """A node's value and stat from its hash (HGETALL)."""
    data = h[b"d"]
    return data, Stat(
        czxid=int(h[b"cz"]),
        mzxid=int(h[b"mz"]),
        pzxid=int(h[b"pz"]),
        ctime=int(h[b"ct"]),
        mtime=int(h[b"mt"]),
        version=int(h[b"v"]),
        cversion=int(h[b"cv"]),
        aversion=0,
        ephemeral_owner=int(h[b"eo"]),
        data_length=len(data),
        num_children=int(h[b"nc"]),
    )


def result_of(kind: str, reply: Any) -> Any:
    """A successful op's result as the store returns it."""
    if kind == "c":
        return reply.decode()
    if kind == "s":
        return stat_from_list(reply)
    return None


__all__ = [
    "ANY_VERSION",
    "check_creatable",
    "check_path",
    "create_words",
    "encode_op",
    "error_from",
    "is_error",
    "node_from_hash",
    "result_of",
    "stat_from_list",
    "stat_from_script",
]
