"""How the store's operations become ZooKeeper requests, and replies become the store's values.

Checks run before anything is sent: ZooKeeper closes the connection on a packet larger than its
``jute.maxbuffer``, so an oversized transaction is refused here with a message saying why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kazoo.protocol import serialization as proto
from kazoo.protocol.states import ZnodeStat

from coordkit.errors import DataTooLargeError, InvalidPathError, StoreError
from coordkit.store import Check, Create, Delete, Op, SetData, Stat, check_data, paths

#: ZooKeeper's default jute.maxbuffer (0xfffff) bounds a whole request, a multi-op included.
MAX_REQUEST_BYTES = 0xFFFFF
#: Framing allowance per op in a multi (header, version, flags, ACL), rounded up.
OP_OVERHEAD = 128

_FLAG_EPHEMERAL = 1
_FLAG_SEQUENTIAL = 2


def to_stat(stat: ZnodeStat) -> Stat:
    return Stat(
        czxid=stat.czxid,
        mzxid=stat.mzxid,
        pzxid=stat.pzxid,
        ctime=stat.ctime,
        mtime=stat.mtime,
        version=stat.version,
        cversion=stat.cversion,
        aversion=stat.aversion,
        ephemeral_owner=stat.ephemeralOwner,
        data_length=stat.dataLength,
        num_children=stat.numChildren,
    )


def validate_op(op: Op) -> None:
    """Refuse what ZooKeeper would refuse (or choke on) before it is sent."""
    if not isinstance(op, Create | SetData | Delete | Check):
        raise TypeError(f"not a store operation: {op!r}")
    paths.validate(op.path, sequential=isinstance(op, Create) and op.sequential)
    if isinstance(op, Create | SetData):
        check_data(op.path, op.data)
    if op.path == "/":
        if isinstance(op, Create):
            raise InvalidPathError("the root node has no parent", path=op.path)
        if isinstance(op, Delete):
            raise StoreError("the root node cannot be deleted", path=op.path)


def check_transaction_size(ops: Sequence[Op]) -> None:
    """Refuse a transaction larger than ZooKeeper's request limit."""
    size = sum(len(op.path) + len(getattr(op, "data", b"")) + OP_OVERHEAD for op in ops)
    if size > MAX_REQUEST_BYTES:
        raise DataTooLargeError(
            f"a transaction of {len(ops)} ops and about {size:,} bytes exceeds ZooKeeper's "
            f"{MAX_REQUEST_BYTES:,}-byte request limit (jute.maxbuffer)",
            path=ops[0].path,
        )


def wire_op(op: Op, full: Callable[[str], str], acl: Callable[[str], Any]) -> Any:
    """The kazoo request for ``op`` (``full`` maps a path into the chroot; ``acl`` gives a new
    node's ACL by its path inside the chroot)."""
    match op:
        case Create(path=path, data=data, ephemeral=ephemeral, sequential=sequential):
            flags = (_FLAG_EPHEMERAL if ephemeral else 0) | (_FLAG_SEQUENTIAL if sequential else 0)
            return proto.Create(full(path), bytes(data), acl(path), flags)
        case SetData(path=path, data=data, version=version):
            return proto.SetData(full(path), bytes(data), version)
        case Delete(path=path, version=version):
            return proto.Delete(full(path), version)
        case Check(path=path, version=version):
            return proto.CheckVersion(full(path), version)
    raise TypeError(f"not a store operation: {op!r}")


def op_result(op: Op, value: Any, relative: Callable[[str], str]) -> Any:
    """What the store returns for ``op``: the created path (outside the chroot), a set's stat."""
    match op:
        case Create():
            return relative(value)
        case SetData():
            return to_stat(value)
    return None
