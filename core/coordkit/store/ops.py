"""The operations a transaction, ``apply`` or ``set_many`` carries (create, set, delete, check)
and the checks every backend makes of them before anything is sent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from coordkit.errors import (
    DataTooLargeError,
)

if TYPE_CHECKING:
    pass

from coordkit.store.data_model import ANY_VERSION, MAX_DATA_SIZE

# -- operations ---------------------------------------------------------------------------------


@attrs.frozen
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@attrs.frozen
class SetData:
    path: str
    data: bytes
    version: int = ANY_VERSION


@attrs.frozen
class Delete:
    path: str
    version: int = ANY_VERSION


@attrs.frozen
class Check:
    path: str
    version: int


Op = Create | SetData | Delete | Check


def check_set_columns(
    paths_: Sequence[str], data: Sequence[bytes], versions: Sequence[int]
) -> None:
    """Refuse :meth:`MetadataStore.set_many` columns of different lengths."""
    if not len(paths_) == len(data) == len(versions):
        raise ValueError(
            f"set_many: {len(paths_)} paths, {len(data)} values and {len(versions)} versions"
        )


def set_many_ops(
    paths_: Sequence[str], data: Sequence[bytes], versions: Sequence[int], checks: Sequence[Check]
) -> list[Op]:
    """The ops of :meth:`MetadataStore.set_many` as one :meth:`~MetadataStore.commit` takes them
    (the checks first)."""
    return [*checks, *map(SetData, paths_, data, versions)]


def check_data(path: str, data: bytes, limit: int = MAX_DATA_SIZE) -> bytes:
    """Validate a node value before any backend sends it."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"{path}: node data must be bytes, got {type(data).__name__}")
    if len(data) > limit:
        raise DataTooLargeError(
            f"value of {len(data):,} bytes exceeds the {limit:,}-byte limit", path=path
        )
    return bytes(data)


def describe_op(op: Op) -> str:
    """A short human description of an op for error messages."""
    match op:
        case Create(path=p, ephemeral=e, sequential=s):
            kind = "ephemeral " if e else ""
            return f"create {kind}{'sequential ' if s else ''}{p}"
        case SetData(path=p, version=v):
            return f"set {p}" + (f" at version {v}" if v != ANY_VERSION else "")
        case Delete(path=p, version=v):
            return f"delete {p}" + (f" at version {v}" if v != ANY_VERSION else "")
        case Check(path=p, version=v):
            return f"check {p} is at version {v}"
    raise TypeError(f"not a store operation: {op!r}")
