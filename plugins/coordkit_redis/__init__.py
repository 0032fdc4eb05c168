"""The Redis metadata store: ZooKeeper's data model emulated on a Redis server with redis-py.

``redis://[:password@|user:password@]host:port/db?prefix=NAME&session_timeout=10`` and
``rediss://`` (TLS). Node records are hashes with ZooKeeper's version counters, children are sets,
every compound write is one atomic Lua script, sessions are keys with a TTL renewed by a heartbeat
on a thread and connection of its own, ephemeral nodes are indexed by session and reaped when it
expires, and change streams sharded by directory feed the watches (a client reads the shards of
what it watches); one more stream, written only while a change feed is open, feeds ``watch_tree``.
All keys of one store share the hash tag ``{prefix}``, so the scripts stay atomic on Redis Cluster.
redis-py is imported only when a store is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordkit import hookimpl
from coordkit.errors import MissingDependencyError
from coordkit.store.urls import StoreURL

if TYPE_CHECKING:
    from coordkit_redis.store import RedisStore

__all__ = ["expire_session", "open_redis_store", "reap_expired_sessions"]

INSTALL_HINT = "pip install coordkit[redis]"


def _require_redis() -> None:
    try:
        import redis  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            f"the redis:// store needs the redis-py client, which is not installed: {INSTALL_HINT}"
        ) from None


def open_redis_store(url: StoreURL, *, read_only: bool = False, **options: Any) -> RedisStore:
    """Open ``redis://`` or ``rediss://``; options (override the URL's query): ``prefix``,
    ``session_timeout``, ``socket_timeout``, ``connect_timeout``, ``stream_maxlen``, ``tree_maxlen``;
    ``read_only`` opens no session and writes nothing (a prefix without a root is an error)."""
    _require_redis()
    from coordkit_redis.config import RedisConfig
    from coordkit_redis.store import RedisStore

    return RedisStore(url, RedisConfig.from_url(url, dict(options)), read_only=read_only)


def reap_expired_sessions(client: Any, prefix: str) -> int:
    """Expire every overdue session of the store ``prefix`` (any client may do this); returns how
    many were reaped. ``client`` is a redis-py client (bytes responses)."""
    _require_redis()
    from coordkit_redis.config import DEFAULT_STREAM_MAXLEN
    from coordkit_redis.keys import KeySpace
    from coordkit_redis.scripts import SCRIPTS

    keys = KeySpace(prefix)
    client.execute_command("SCRIPT", "LOAD", SCRIPTS.reap.source)
    reply = client.execute_command(
        "EVALSHA", SCRIPTS.reap.sha, 1, keys.zxid, keys.base, str(DEFAULT_STREAM_MAXLEN)
    )
    return int(reply)


def expire_session(client: Any, prefix: str, session_id: int) -> None:
    """End ``session_id`` as a TTL expiry would: its key goes, its deadline passes, a reaper runs
    (its ephemerals are deleted; the owner sees LOST, then a new session)."""
    _require_redis()
    from coordkit_redis.keys import KeySpace

    keys = KeySpace(prefix)
    client.delete(keys.session(session_id))
    client.zadd(keys.deadlines, {str(session_id): 0})
    reap_expired_sessions(client, prefix)


@hookimpl
def coordkit_register_stores(register: Any) -> None:
    register("redis", open_redis_store)
    register("rediss", open_redis_store)
