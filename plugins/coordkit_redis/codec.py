"""Between store calls and script words: path checks, op encoding, reply decoding.

Ops travel to ``lua/ops.lua`` as four words each (kind, path, data, arg); its reply is one string
with a line per op (see the script). ``lua/read.lua`` answers bulk reads with one framed string.
Compact replies matter: redis-py parses RESP in Python, one element at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
from coordkit.store import Check, Create, Delete, Op, SetData, Stat, check_data, paths

ERRORS: dict[bytes, type[StoreError]] = {
    b"NONODE": NoNodeError,
    b"NODEEXISTS": NodeExistsError,
    b"BADVERSION": BadVersionError,
    b"NOTEMPTY": NotEmptyError,
    b"EPHEMERALPARENT": NoChildrenForEphemeralsError,
    b"INVALIDPATH": InvalidPathError,
    b"SESSION": SessionExpiredError,
}

#: One op as script words: kind, path, data, arg.
Words = tuple[str, str, bytes, str]
SESSION_EXPIRED = b"!session"


def check_path(path: str, *, sequential: bool = False) -> str:
    """Validate ``path`` (:func:`coordkit.store.paths.validate`)."""
    return paths.validate(path, sequential=sequential)


def check_creatable(path: str, sequential: bool) -> None:
    """The root is never created (as in the memory store: it has no parent)."""
    if path == paths.ROOT and not sequential:
        paths.parent(path)


def create_words(
    path: str, data: bytes, ephemeral: bool, sequential: bool, make_parents: bool = False
) -> Words:
    flags = ("e" if ephemeral else "") + ("s" if sequential else "") + ("p" if make_parents else "")
    return ("c", path, data, flags)


def encode_op(op: Op) -> Words:
    """Validate one op (path, value) and encode it; raises the same errors as the memory store."""
    if isinstance(op, Create):
        path = check_path(op.path, sequential=op.sequential)
        data = check_data(path, op.data)
        check_creatable(path, op.sequential)
        return create_words(path, data, op.ephemeral, op.sequential)
    if isinstance(op, SetData):
        path = check_path(op.path)
        return ("s", path, check_data(path, op.data), str(int(op.version)))
    if isinstance(op, Delete):
        return ("d", check_path(op.path), b"", str(int(op.version)))
    if isinstance(op, Check):
        return ("k", check_path(op.path), b"", str(int(op.version)))
    raise TypeError(f"not a store operation: {op!r}")


def pack_command(args: Sequence[bytes | str]) -> bytes:
    """One RESP command (redis-py's packer encodes argument by argument in Python; bulk calls
    carry thousands of arguments)."""
    out = [b"*%d\r\n" % len(args)]
    append = out.append
    for arg in args:
        raw = arg.encode() if isinstance(arg, str) else arg
        append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(out)


def error_from(line: bytes, op_index: int | None = None) -> StoreError:
    """A store error from ``<code>\\t<path>\\t<message>``."""
    code, path, message = line.split(b"\t", 2)
    cls = ERRORS.get(code, StoreError)
    return cls(message.decode(errors="replace"), path=path.decode() or None, op_index=op_index)


def multi_error(reply: bytes) -> StoreError:
    """The error of a failed multi: ``!<index>\\t<code>\\t<path>\\t<message>``."""
    index, rest = reply[1:].split(b"\t", 1)
    return error_from(rest, int(index))


def stat_from_text(text: bytes) -> Stat:
    """From ``czxid,mzxid,pzxid,ctime,mtime,version,cversion,owner,data length,children``."""
    fields = list(map(int, text.split(b",")))
    fields.insert(7, 0)  # aversion: ACLs are not emulated
    return Stat(*fields)


def result_of(line: bytes, op_index: int | None = None) -> Any:
    """One op's line of an ops.lua reply: its result, or the error instance."""
    tag = line[:1]
    if tag == b"P":
        return line[1:].decode()
    if tag == b"S":
        return stat_from_text(line[1:])
    if tag == b"K":
        return None
    if tag == b"E":
        return error_from(line[1:], op_index)
    return StoreError(f"unexpected reply from the ops script: {line[:80]!r}", op_index=op_index)


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


def nodes_from_blob(blob: bytes) -> list[tuple[bytes, Stat] | None]:
    """Decode read.lua's reply: one entry per path it answered (``None`` where a node is missing);
    it may answer fewer paths than it was asked for (its byte budget)."""
    out: list[tuple[bytes, Stat] | None] = []
    end = blob.index(b"\n")
    count = int(blob[:end])
    pos = end + 1
    find = blob.find
    for _ in range(count):
        end = find(b"\n", pos)
        header = blob[pos:end]
        pos = end + 1
        if header == b"-":
            out.append(None)
            continue
        stat = stat_from_text(header)
        data = blob[pos : pos + stat.data_length]
        pos += stat.data_length
        out.append((data, stat))
    return out
