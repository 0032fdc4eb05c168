"""kazoo's exceptions as coordkit's store errors: the same types every backend raises.

Messages name the node and what was attempted; they never contain credentials (kazoo's exceptions
carry none, and nothing here adds the URL's user info).
"""

from __future__ import annotations

from kazoo import exceptions as kz
from kazoo.handlers.threading import KazooTimeoutError

from coordkit.errors import (
    AuthFailedError,
    BadVersionError,
    ConnectionLossError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
)
from coordkit.store import ANY_VERSION, Check, Create, Delete, Op, SetData, paths

#: Transaction results that only say "another op failed".
ROLLED_BACK = (kz.RolledBackError, kz.RuntimeInconsistency)
#: The request may or may not have been applied; only the connection is known to be gone.
_CONNECTION_ERRORS = (
    kz.ConnectionLoss,
    kz.ConnectionDropped,
    kz.OperationTimeoutError,
    KazooTimeoutError,
)


def _parent_of(path: str, sequential: bool) -> str:
    if sequential and path.endswith("/"):
        return path.rstrip("/") or "/"
    return paths.parent(path) if path != "/" else "/"


def translate(
    exc: BaseException,
    *,
    path: str | None,
    action: str,
    version: int = ANY_VERSION,
    sequential: bool = False,
    closing: bool = False,
) -> StoreError:
    """The coordkit error for kazoo's ``exc`` raised while doing ``action`` (create, get, set,
    delete, check, children, exists, commit) on ``path``."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, kz.ConnectionClosedError) or (
        closing and isinstance(exc, _CONNECTION_ERRORS)
    ):
        return StoreClosedError("store client is closed", path=path)
    if isinstance(exc, kz.NoNodeError):
        if action == "create" and path is not None:
            return NoNodeError(f"parent {_parent_of(path, sequential)} does not exist", path=path)
        return NoNodeError("no node", path=path)
    if isinstance(exc, kz.NodeExistsError):
        return NodeExistsError("node already exists", path=path)
    if isinstance(exc, kz.BadVersionError):
        expected = (
            f"expected version {version}" if version != ANY_VERSION else "version check failed"
        )
        return BadVersionError(f"{expected}, node is at another version", path=path)
    if isinstance(exc, kz.NotEmptyError):
        return NotEmptyError("node has children", path=path)
    if isinstance(exc, kz.NoChildrenForEphemeralsError):
        parent = _parent_of(path, sequential) if path else "the parent"
        return NoChildrenForEphemeralsError(f"parent {parent} is ephemeral", path=path)
    if isinstance(exc, kz.NoAuthError):
        return NoAuthError(
            f"not authorised to {action}: the node's ACL refuses this client's credentials",
            path=path,
        )
    if isinstance(exc, kz.AuthFailedError):
        return AuthFailedError("ZooKeeper refused the client's credentials", path=path)
    if isinstance(exc, kz.SessionExpiredError):
        return SessionExpiredError(
            "the ZooKeeper session expired; its ephemeral nodes are gone", path=path
        )
    if isinstance(exc, _CONNECTION_ERRORS):
        return ConnectionLossError(
            f"lost the connection to ZooKeeper during {action}; the outcome is unknown", path=path
        )
    if isinstance(exc, kz.ZookeeperError):
        return StoreError(f"ZooKeeper refused {action}: {type(exc).__name__}", path=path)
    return StoreError(f"{action} failed: {type(exc).__name__}: {exc}", path=path)


def translate_op(exc: BaseException, op: Op, *, closing: bool = False) -> StoreError:
    """The coordkit error for ``exc`` raised by one store operation."""
    match op:
        case Create(path=path, sequential=sequential):
            return translate(
                exc, path=path, action="create", sequential=sequential, closing=closing
            )
        case SetData(path=path, version=version):
            return translate(exc, path=path, action="set", version=version, closing=closing)
        case Delete(path=path, version=version):
            return translate(exc, path=path, action="delete", version=version, closing=closing)
        case Check(path=path, version=version):
            return translate(exc, path=path, action="check", version=version, closing=closing)
    raise TypeError(f"not a store operation: {op!r}")


def first_failure(results: list[object]) -> int | None:
    """Index of the op that made a multi fail (the others only report a rollback)."""
    for index, result in enumerate(results):
        if isinstance(result, BaseException) and not isinstance(result, ROLLED_BACK):
            return index
    return None
