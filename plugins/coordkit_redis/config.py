"""``redis://`` / ``rediss://`` URLs → connection settings, and what the server guarantees.

``redis://[:password@|user:password@]host:port/db?prefix=NAME&session_timeout=10`` with optional
``socket_timeout``, ``connect_timeout`` (seconds), ``stream_maxlen`` (entries kept per
change-stream shard, approximately; 256 shards) and ``tree_maxlen`` (transactions the tree stream
of change feeds keeps, approximately, while a feed is open: a feed resumes exactly within them);
``rediss://`` adds TLS with ``ssl_ca_certs``,
``ssl_certfile``, ``ssl_keyfile``, ``ssl_cert_reqs`` (none, optional, required) and
``ssl_check_hostname`` (true/false).

Numbers go through :func:`coordkit.store.urls.parse_seconds` / :func:`~coordkit.store.urls.parse_int`:
durations 0.001 to 86400 seconds, ``stream_maxlen`` and ``tree_maxlen`` 1 to 100,000,000, the database 0 to
2,147,483,647; anything else is an :class:`~coordkit.errors.InvalidURLError` naming the parameter,
the value and the range.
"""

from __future__ import annotations

from typing import Any

import attrs

from coordkit.errors import InvalidURLError
from coordkit.store import StoreCharacteristics
from coordkit.store.urls import StoreURL, parse_int, parse_seconds
from coordkit_redis.keys import DEFAULT_PREFIX, check_prefix

DEFAULT_PORT = 6379
DEFAULT_SESSION_TIMEOUT = 10.0
DEFAULT_SOCKET_TIMEOUT = 10.0
DEFAULT_CONNECT_TIMEOUT = 5.0
#: Per shard: a client falls this far behind in a shard it reads before it must resync.
DEFAULT_STREAM_MAXLEN = 1_000
#: Transactions the tree stream keeps: how far back a change feed resumes exactly (about 200 bytes
#: each plus the data written).
DEFAULT_TREE_MAXLEN = 100_000
MAX_STREAM_MAXLEN = 100_000_000
#: Redis takes the database index as a C int.
MAX_DB = 2**31 - 1

NUMBER_PARAMS = ("session_timeout", "socket_timeout", "connect_timeout")
SSL_PARAMS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "ssl_check_hostname")
PARAMS = ("prefix", "stream_maxlen", "tree_maxlen", *NUMBER_PARAMS, *SSL_PARAMS)
CERT_REQS = ("none", "optional", "required")


@attrs.frozen(repr=False)
class RedisConfig:
    host: str
    port: int
    db: int
    username: str | None
    password: str | None = attrs.field(eq=False)
    prefix: str
    session_timeout: float
    socket_timeout: float
    connect_timeout: float
    stream_maxlen: int
    tls: bool
    ssl: tuple[tuple[str, Any], ...] = ()
    tree_maxlen: int = DEFAULT_TREE_MAXLEN

    @classmethod
    def from_url(cls, url: StoreURL, options: dict[str, Any]) -> RedisConfig:
        where = url.where
        if url.scheme not in ("redis", "rediss"):
            raise InvalidURLError(f"{where}: expected redis:// or rediss://")
        if len(url.hosts) > 1:
            raise InvalidURLError(f"{where}: give one host (the Redis primary)")
        host, port = url.hosts[0] if url.hosts else ("localhost", None)
        params = url.params
        unknown = sorted(set(params) - set(PARAMS))
        if unknown:
            raise InvalidURLError(
                f"{where}: unknown parameter(s) {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(PARAMS)}"
            )
        tls = url.scheme == "rediss"
        ssl_given = [name for name in SSL_PARAMS if name in params]
        if ssl_given and not tls:
            raise InvalidURLError(f"{where}: {', '.join(ssl_given)} need rediss:// (TLS)")
        settings: dict[str, Any] = {**params}
        unknown_options = sorted(set(options) - set(PARAMS))
        if unknown_options:
            raise TypeError(f"redis store: unknown option(s) {', '.join(unknown_options)}")
        settings.update(options)
        return cls(
            host=host or "localhost",
            port=port or DEFAULT_PORT,
            db=_db(url, where),
            username=url.username,
            password=url.password,
            prefix=check_prefix(str(settings.get("prefix", DEFAULT_PREFIX))),
            session_timeout=_seconds(settings, "session_timeout", DEFAULT_SESSION_TIMEOUT, where),
            socket_timeout=_seconds(settings, "socket_timeout", DEFAULT_SOCKET_TIMEOUT, where),
            connect_timeout=_seconds(settings, "connect_timeout", DEFAULT_CONNECT_TIMEOUT, where),
            stream_maxlen=_count(settings, "stream_maxlen", DEFAULT_STREAM_MAXLEN, where),
            tls=tls,
            ssl=_ssl(settings, where) if tls else (),
            tree_maxlen=_count(settings, "tree_maxlen", DEFAULT_TREE_MAXLEN, where),
        )

    def connection_settings(self, *, socket_timeout: float | None = None) -> dict[str, Any]:
        """Where and how to connect: redis-py ``Redis(...)`` keyword arguments that are plain
        values (:meth:`connection_kwargs` adds the redis-py objects)."""
        settings: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "db": self.db,
            "username": self.username,
            "password": self.password,
            "socket_timeout": socket_timeout or self.socket_timeout,
            "socket_connect_timeout": self.connect_timeout,
            "decode_responses": False,
            # RESP2 keeps reply shapes the same on every redis-py version the extra allows.
            "protocol": 2,
        }
        if self.tls:
            settings["ssl"] = True
            settings.update(self.ssl)
        return settings

    def connection_kwargs(self, *, socket_timeout: float | None = None) -> dict[str, Any]:
        """redis-py ``Redis(...)`` keyword arguments. No retries: a write whose outcome is unknown
        must surface as ConnectionLossError, never be sent twice."""
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        kwargs = self.connection_settings(socket_timeout=socket_timeout)
        kwargs["retry"] = Retry(NoBackoff(), 0)
        kwargs.update(_without_maintenance_notifications())
        return kwargs

    def __repr__(self) -> str:
        auth = f"{self.username or ''}:***@" if self.password else ""
        return f"RedisConfig({auth}{self.host}:{self.port}/{self.db} prefix={self.prefix!r})"


def _without_maintenance_notifications() -> dict[str, Any]:
    """redis-py 7+ may negotiate push notifications for managed services; they need RESP3 and
    skip the pool's stale-connection check, so they are turned off where the option exists."""
    try:
        from redis.maint_notifications import MaintNotificationsConfig
    except ImportError:
        return {}
    return {"maint_notifications_config": MaintNotificationsConfig(enabled=False)}


def _db(url: StoreURL, where: str) -> int:
    text = url.path.strip("/")
    if not text:
        return 0
    if not (text.isascii() and text.isdigit()):
        raise InvalidURLError(
            f"{where}: the path must be a database number (0 to {MAX_DB}), got {text!r}"
        )
    return parse_int(where, "database", text, low=0, high=MAX_DB)


def _seconds(settings: dict[str, Any], name: str, default: float, where: str) -> float:
    raw = settings.get(name)
    return default if raw is None else parse_seconds(where, name, raw)


def _count(settings: dict[str, Any], name: str, default: int, where: str) -> int:
    raw = settings.get(name)
    return default if raw is None else parse_int(where, name, raw, low=1, high=MAX_STREAM_MAXLEN)


def _ssl(settings: dict[str, Any], where: str) -> tuple[tuple[str, Any], ...]:
    out: list[tuple[str, Any]] = []
    for name in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile"):
        if name in settings:
            out.append((name, str(settings[name])))
    if "ssl_cert_reqs" in settings:
        reqs = str(settings["ssl_cert_reqs"]).lower()
        if reqs not in CERT_REQS:
            raise InvalidURLError(f"{where}: ssl_cert_reqs must be one of {', '.join(CERT_REQS)}")
        out.append(("ssl_cert_reqs", reqs))
    if "ssl_check_hostname" in settings:
        flag = str(settings["ssl_check_hostname"]).lower()
        if flag not in ("true", "false", "1", "0", "yes", "no"):
            raise InvalidURLError(f"{where}: ssl_check_hostname must be true or false")
        out.append(("ssl_check_hostname", flag in ("true", "1", "yes")))
    elif dict(out).get("ssl_cert_reqs") == "none":
        out.append(("ssl_check_hostname", False))  # nothing is verified, not even the name
    return tuple(out)


# -- what the server guarantees ------------------------------------------------------------------

LINEARIZABLE_NOTE = (
    "writes are linearizable on a single Redis primary (every compound write is one atomic Lua "
    "script); with replicas and failover, asynchronous replication can lose acknowledged writes"
)


def probe_characteristics(client: Any) -> StoreCharacteristics:
    """Ask the server how it persists (CONFIG GET); durable only with AOF + fsync on every write."""
    import redis.exceptions as rex

    try:
        aof = _config_value(client, "appendonly")
        fsync = _config_value(client, "appendfsync")
    except rex.ResponseError as exc:
        durable = False
        persistence = (
            f"not durable as far as coordkit can tell: CONFIG GET was refused ({exc}), so "
            "appendonly/appendfsync could not be checked"
        )
    else:
        durable = aof == "yes" and fsync == "always"
        if durable:
            persistence = "durable: appendonly yes with appendfsync always"
        else:
            persistence = (
                f"not durable: appendonly {aof or '?'}, appendfsync {fsync or '?'} (acknowledged "
                "writes can be lost in a crash; durability needs appendonly yes + appendfsync always)"
            )
    return StoreCharacteristics(
        linearizable_writes=True,
        durable=durable,
        shared_across_processes=True,
        ordered_change_feed=True,
        change_feed_history=True,
        multi_host=True,
        notes=f"{LINEARIZABLE_NOTE}; {persistence}",
    )


def _config_value(client: Any, name: str) -> str:
    reply = client.config_get(name)
    value = reply.get(name, reply.get(name.encode(), b""))
    return value.decode() if isinstance(value, bytes) else str(value)
