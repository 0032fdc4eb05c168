""":meth:`~coordkit.store.MetadataStore.set_many` on the wire: one multi of checks and sets,
encoded straight from the columns and its reply read with numpy.

kazoo builds a request object per op and reads a reply into a ``ZnodeStat`` per op, and the store
turns each into ops and :class:`~coordkit.store.Stat` objects: about 10 µs a write in this process
before the connection thread's own work, when a controlled shutdown at 2,000,000 partitions writes
1,333,334 states (issue 16). The bytes are the same as kazoo's ``Transaction`` of
``CheckVersion`` and ``SetData`` requests (the tests compare them); a reply where every op
succeeded has a fixed layout (a check's header, then a header and a stat per set), read as one
numpy record array. Any other reply (a failed op) is read by kazoo's own code, so errors are
reported exactly as :meth:`~coordkit.store.MetadataStore.commit` reports them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from kazoo.protocol import serialization as proto

from coordkit.store import Check, StatColumns, set_many_ops
from coordkit_zookeeper.errors import translate
from coordkit_zookeeper.requests import (
    MAX_REQUEST_BYTES,
    OP_OVERHEAD,
    check_transaction_size,
    to_stat,
)

if TYPE_CHECKING:
    from coordkit_zookeeper.session import ZooKeeperSession

_MULTI = proto.Transaction.type
_CHECK = proto.CheckVersion.type
_SET = proto.SetData.type
#: A multi op's header (type, done, err) and the length of the path that follows it.
_HEAD_AND_LENGTH = struct.Struct(">iBii")
_INT = struct.Struct(">i")
_END = struct.Struct(">iBi").pack(-1, 1, -1)
_CHECK_REPLY = struct.Struct(">iBi").pack(_CHECK, 0, 0)
#: A set op's packer by (path bytes, data bytes): see :func:`encode`.
_SET_STRUCTS: dict[tuple[int, int], Callable[..., bytes]] = {}
_SET_STRUCTS_MAX = 4096

#: ZooKeeper's Stat as serialized (kazoo's ``stat_struct``), named as coordkit's Stat.
_STAT = [
    ("czxid", ">i8"),
    ("mzxid", ">i8"),
    ("ctime", ">i8"),
    ("mtime", ">i8"),
    ("version", ">i4"),
    ("cversion", ">i4"),
    ("aversion", ">i4"),
    ("ephemeral_owner", ">i8"),
    ("data_length", ">i4"),
    ("num_children", ">i4"),
    ("pzxid", ">i8"),
]
_STAT_FIELDS = [name for name, _ in _STAT]
#: A set's reply in a successful multi: its header, then the stat.
SET_REPLY = np.dtype([("type", ">i4"), ("done", "u1"), ("err", ">i4"), *_STAT])


def encode(
    check_paths: Sequence[str],
    check_versions: Sequence[int],
    set_paths: Sequence[str],
    data: Sequence[bytes],
    versions: Sequence[int],
) -> bytes:
    """The body of a multi request: the checks, then the sets, then the end marker."""
    parts: list[bytes] = []
    append = parts.append
    head = _HEAD_AND_LENGTH.pack
    pack_int = _INT.pack
    for path, version in zip(check_paths, check_versions, strict=True):
        raw = path.encode()
        append(head(_CHECK, 0, -1, len(raw)))
        append(raw)
        append(pack_int(version))
    structs = _SET_STRUCTS
    for path, given, version in zip(set_paths, data, versions, strict=True):
        raw = path.encode()
        # Bytes-like values (as the store accepts) as bytes: struct packs bytes only.
        value = given if given.__class__ is bytes else bytes(given)
        key = (len(raw), len(value))
        pack = structs.get(key)
        if pack is None:
            if len(structs) >= _SET_STRUCTS_MAX:
                structs.clear()
            # One pack per set (header, path, data, version): a batch has few distinct lengths.
            pack = structs[key] = struct.Struct(f">iBii{key[0]}si{key[1]}si").pack
        append(pack(_SET, 0, -1, key[0], raw, key[1], value, version))
    append(_END)
    return b"".join(parts)


class SetManyRequest:
    """A multi of version checks and sets, in kazoo's request protocol (``type``,
    ``serialize``, ``deserialize``), so it goes down the session's own pipeline."""

    type = _MULTI
    __slots__ = ("body", "checks", "sets")

    def __init__(
        self,
        check_paths: Sequence[str],
        check_versions: Sequence[int],
        set_paths: Sequence[str],
        data: Sequence[bytes],
        versions: Sequence[int],
    ):
        self.checks = len(check_paths)
        self.sets = len(set_paths)
        self.body = encode(check_paths, check_versions, set_paths, data, versions)

    def serialize(self) -> bytes:
        return self.body

    def deserialize(self, buffer: bytes, offset: int) -> list[Any]:
        """``[StatColumns]`` of the sets when every op succeeded, else kazoo's reading of the
        reply (one result or exception per op). A list either way: kazoo walks a multi's
        results after this to take its chroot off created paths."""
        checks_end = offset + self.checks * len(_CHECK_REPLY)
        sets_end = checks_end + self.sets * SET_REPLY.itemsize
        if (
            len(buffer) >= sets_end + len(_END)
            and buffer[sets_end : sets_end + len(_END)] == _END
            and buffer[offset:checks_end] == _CHECK_REPLY * self.checks
        ):
            rows = np.frombuffer(buffer, SET_REPLY, self.sets, checks_end)
            if self.sets == 0 or (
                bool((rows["type"] == _SET).all())
                and not rows["done"].any()
                and not rows["err"].any()
            ):
                return [StatColumns({name: rows[name].tolist() for name in _STAT_FIELDS})]
        results: list[Any] = proto.Transaction.deserialize(buffer, offset)
        return results

    def __repr__(self) -> str:
        return f"SetManyRequest({self.checks} checks, {self.sets} sets, {len(self.body):,} bytes)"


def send_set_many(
    session: ZooKeeperSession,
    paths_: Sequence[str],
    data: Sequence[bytes],
    versions: Sequence[int],
    checks: Sequence[Check],
) -> StatColumns:
    """Send a checked :meth:`~coordkit.store.MetadataStore.set_many` as one SetMany request:
    the stats of the sets, or the error of the op that failed the multi."""
    # As check_transaction_size counts.
    size = sum(len(c.path) + OP_OVERHEAD for c in checks)
    size += sum(map(len, paths_)) + sum(map(len, data)) + OP_OVERHEAD * len(paths_)
    if not paths_ and not checks:
        return StatColumns.of(())
    if size > MAX_REQUEST_BYTES:
        check_transaction_size(set_many_ops(paths_, data, versions, checks))
    full = session._full
    request = SetManyRequest(
        [full(c.path) for c in checks],
        [c.version for c in checks],
        [full(p) for p in paths_] if session._chroot else paths_,
        data,
        versions,
    )
    (reply,) = session._run([request], "commit")
    if isinstance(reply, BaseException):
        raise translate(reply, path=None, action="commit", closing=session._closing)
    if len(reply) == 1 and isinstance(reply[0], StatColumns):
        return reply[0]
    session._raise_failed_op(reply, set_many_ops(paths_, data, versions, checks), tag=True)
    return StatColumns.of(to_stat(stat) for stat in reply[len(checks) :])
