"""redis-py exceptions → coordkit store errors (the same types every backend raises).

Messages come from redis-py and the server, never from the connection settings, so they carry no
credentials; the store adds only the node path.
"""

from __future__ import annotations

from coordkit.errors import (
    AuthFailedError,
    ConnectionLossError,
    NoAuthError,
    StoreError,
)


def is_connection_failure(exc: BaseException) -> bool:
    """A lost or unreachable server (not an authentication problem)."""
    import redis.exceptions as rex

    if isinstance(exc, rex.AuthenticationError | rex.AuthorizationError):
        return False
    if isinstance(exc, ValueError):
        # redis-py reading a socket another thread closed (the store's close(), or the session
        # keeper dropping a failed connection) raises "I/O operation on closed file".
        return "closed file" in str(exc)
    return isinstance(exc, rex.ConnectionError | rex.TimeoutError | OSError)


def translate(exc: BaseException, path: str | None = None) -> StoreError:
    """The store error for a redis-py (or socket) exception."""
    import redis.exceptions as rex

    text = str(exc)
    upper = text.upper()
    if isinstance(exc, rex.AuthenticationError):
        if "NOAUTH" in upper or "AUTHENTICATION REQUIRED" in upper or "AUTHENTICATED" in upper:
            return NoAuthError(f"the server requires authentication: {text}", path=path)
        return AuthFailedError(f"the server refused the credentials: {text}", path=path)
    if (
        isinstance(exc, rex.AuthorizationError | rex.NoPermissionError)
        or "NOPERM" in upper
        or "CAN'T RUN THIS COMMAND" in upper  # an ACL refusal inside a script
    ):
        return NoAuthError(f"the Redis user may not do this: {text}", path=path)
    if "NOAUTH" in upper:
        return NoAuthError(f"the server requires authentication: {text}", path=path)
    if "WRONGPASS" in upper:
        return AuthFailedError(f"the server refused the credentials: {text}", path=path)
    if is_connection_failure(exc):
        return ConnectionLossError(f"lost the connection to the Redis server: {text}", path=path)
    if isinstance(exc, rex.ReadOnlyError):
        return ConnectionLossError(f"the server is a read-only replica: {text}", path=path)
    return StoreError(f"Redis error: {text}", path=path)
