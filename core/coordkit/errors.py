"""Error types. Store errors are the same types from every backend, so callers never branch on one."""

from __future__ import annotations


class CoordkitError(Exception):
    """Base of every error coordkit raises on purpose."""


# -- store errors -----------------------------------------------------------------------------


class StoreError(CoordkitError):
    """A metadata store operation failed.

    :param path: the node the failure concerns, when there is one.
    :param op_index: for transactions and bulk calls, the index of the operation that failed.
    """

    def __init__(self, message: str, *, path: str | None = None, op_index: int | None = None):
        self.message = message
        self.path = path
        self.op_index = op_index
        super().__init__(message)

    def __str__(self) -> str:
        # ``op_index`` is for the caller that sent the ops; a failed transaction's message already
        # names its op ("[transaction op 2: set /a]"), and a bulk read's index means nothing to
        # anyone reading the error.
        if self.path is not None:
            return f"{self.path}: {self.message}"
        return self.message

    def __reduce__(self) -> tuple[object, ...]:
        # Keep keyword-only fields when pickled (Spark ships errors between processes).
        return (_rebuild_store_error, (type(self), self.message, self.path, self.op_index))


def _rebuild_store_error(
    cls: type[StoreError], message: str, path: str | None, op_index: int | None
) -> StoreError:
    return cls(message, path=path, op_index=op_index)


class NoNodeError(StoreError):
    """The node (or, for a create, its parent) does not exist."""


class NodeExistsError(StoreError):
    """A node already exists at the path."""


class BadVersionError(StoreError):
    """A version-checked write or check found another version."""


class NotEmptyError(StoreError):
    """A non-recursive delete of a node that has children."""


class NoChildrenForEphemeralsError(StoreError):
    """Ephemeral nodes cannot have children (as in ZooKeeper)."""


class InvalidPathError(StoreError, ValueError):
    """The path breaks ZooKeeper's path rules."""


class DataTooLargeError(StoreError, ValueError):
    """The node value is larger than the store accepts."""


class SessionExpiredError(StoreError):
    """The session ended; its ephemeral nodes are gone."""


class ConnectionLossError(StoreError):
    """The client is not connected; the outcome of an in-flight write is unknown."""


class NoAuthError(StoreError):
    """The credentials in use may not perform this operation on the node."""


class AuthFailedError(StoreError):
    """The server refused the credentials."""


class StoreClosedError(StoreError):
    """The store client was closed."""


class UnsupportedError(StoreError):
    """The backend lacks a characteristic the caller requires."""


# -- plugin and configuration errors ----------------------------------------------------------


class PluginError(CoordkitError):
    """A plugin could not be loaded, or registered something inconsistent."""


class UnknownNameError(PluginError, LookupError):
    """A strategy, store scheme or lab component was asked for by a name nobody registered."""

    def __init__(self, kind: str, name: str, available: list[str]):
        self.kind = kind
        self.name = name
        self.available = sorted(available)
        listing = ", ".join(self.available) if self.available else "none registered"
        super().__init__(f"unknown {kind} {name!r}; available: {listing}")


class DuplicateNameError(PluginError):
    """Two plugins registered the same name for the same kind of component."""


class MissingDependencyError(CoordkitError, ImportError):
    """An optional client library is not installed."""


class InvalidURLError(CoordkitError, ValueError):
    """A store URL could not be parsed."""


class LayoutError(CoordkitError, ValueError):
    """A znode value does not match Kafka's schema for its path.

    :param path: the znode path.
    :param field: the offending JSON field, when one is to blame.
    """

    def __init__(self, path: str, reason: str, *, field: str | None = None):
        self.path = path
        self.field = field
        self.reason = reason
        where = f" field {field!r}:" if field else ""
        super().__init__(f"{path}:{where} {reason}")

    @property
    def detail(self) -> str:
        """What is wrong, without the path (for reports that print the path themselves)."""
        return f"field {self.field!r}: {self.reason}" if self.field else self.reason

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_layout_error, (self.path, self.reason, self.field))


def _rebuild_layout_error(path: str, reason: str, field: str | None) -> LayoutError:
    return LayoutError(path, reason, field=field)


class AssignmentInputError(CoordkitError, ValueError):
    """Assignor input is inconsistent; the message names the field."""
