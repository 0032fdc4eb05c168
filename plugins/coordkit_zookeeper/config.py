"""What a ``zookeeper://`` URL asks for, checked before any connection is attempted.

``zookeeper://[user:pass@]host[:port][,host[:port]...][/chroot][?param=value&...]``

Parameters (all optional):

``session_timeout``
    Seconds the server keeps the session (and its ephemeral nodes) alive without hearing from the
    client; the server clamps it to its own ``minSessionTimeout``/``maxSessionTimeout``. Default 10.
``connect_timeout``
    Seconds :func:`open_store` waits for the first session before it fails with one
    ``ConnectionLossError`` naming the timeout and the last connection error. Default 5.
``request_timeout``
    Longest wait for any one reply before the call fails with ``ConnectionLossError``. Default: the
    session timeout plus 2 s (the client drops a silent connection after 2/3 of the session
    timeout, which fails every outstanding request sooner).
``tls``
    ``true`` to connect with TLS (ZooKeeper's ``secureClientPort``). With it:
    ``ca`` (CA bundle that signed the server certificate; default: the system's trust store),
    ``cert`` and ``key`` (client certificate and key, for servers with ``ssl.clientAuth``),
    ``verify`` (``false`` skips certificate verification; default ``true``),
    ``check_hostname`` (``true`` also matches the server's name; default ``false``, as ZooKeeper
    certificates often name no host). A password for an encrypted key is an open option
    (``keyfile_password=``), never a URL parameter, because URLs end up in logs.
``multi_read``
    Bulk reads (``get_many``) as ZooKeeper 3.6+'s ``multiRead`` requests, a thousand reads each:
    ``auto`` (default) probes the server once and falls back to pipelined ``getData`` if it does
    not answer; ``true`` always; ``false`` never.

Durations accept 0.001 to 86400 seconds; anything else (``abc``, ``inf``, ``nan``, ``0``, ``-1``,
``1e400``) is an :class:`~coordkit.errors.InvalidURLError` naming the parameter, the value and
that range (see :func:`coordkit.store.urls.parse_seconds`).
"""

from __future__ import annotations

from typing import Any

import attrs

from coordkit.errors import InvalidPathError, InvalidURLError
from coordkit.store import paths
from coordkit.store.urls import StoreURL, parse_seconds

DEFAULT_PORT = 2181
DEFAULT_SESSION_TIMEOUT = 10.0
#: Short: a mistyped host or a stopped server should fail a command in seconds (kazoo itself would
#: retry forever).
DEFAULT_CONNECT_TIMEOUT = 5.0
#: Headroom over the session timeout for a reply before a call gives up.
REQUEST_TIMEOUT_MARGIN = 2.0

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_NUMBER_PARAMS = ("session_timeout", "connect_timeout", "request_timeout")
_TLS_PARAMS = ("ca", "cert", "key", "verify", "check_hostname")
KNOWN_PARAMS = frozenset((*_NUMBER_PARAMS, "tls", *_TLS_PARAMS, "multi_read"))
#: Options accepted by the store factory besides the URL's parameters.
KNOWN_OPTIONS = frozenset((*_NUMBER_PARAMS, "keyfile_password", "batched_io", "multi_read"))
#: ``multi_read`` values: ``None`` means probe the server.
_MULTI_READ_AUTO = "auto"


@attrs.frozen(repr=False)
class TLSConfig:
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    verify: bool = True
    check_hostname: bool = False
    key_password: str | None = attrs.field(default=None, eq=False)

    def __repr__(self) -> str:
        return (
            f"TLSConfig(ca={self.ca!r}, cert={self.cert!r}, key={self.key!r}, verify={self.verify})"
        )


@attrs.frozen(repr=False)
class ZooKeeperConfig:
    """A parsed ``zookeeper://`` URL plus open options. ``repr`` never shows the password."""

    url: StoreURL
    hosts: tuple[tuple[str, int], ...]
    chroot: str
    username: str | None = None
    password: str | None = attrs.field(default=None, eq=False)
    session_timeout: float = DEFAULT_SESSION_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    request_timeout: float = DEFAULT_SESSION_TIMEOUT + REQUEST_TIMEOUT_MARGIN
    tls: TLSConfig | None = None
    batched_io: bool = True
    #: Use multiRead for bulk reads: True, False, or None to probe the server first.
    multi_read: bool | None = None

    @property
    def host_string(self) -> str:
        """kazoo's ``hosts`` argument: ``h1:p1,h2:p2`` followed by the chroot."""
        return (
            ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.hosts) + self.chroot
        )

    @property
    def digest_credential(self) -> str | None:
        """``user:password`` for ZooKeeper's digest scheme, or ``None`` without credentials."""
        if self.username is None or self.password is None:
            return None
        return f"{self.username}:{self.password}"

    @property
    def secrets(self) -> tuple[str, ...]:
        """Strings that must never be logged."""
        out = [s for s in (self.digest_credential, self.password) if s]
        if self.tls is not None and self.tls.key_password:
            out.append(self.tls.key_password)
        return tuple(out)

    def __repr__(self) -> str:
        return f"ZooKeeperConfig({self.url.redacted()!r})"

    @classmethod
    def from_url(cls, url: StoreURL, **options: Any) -> ZooKeeperConfig:
        where = url.where
        unknown_options = set(options) - KNOWN_OPTIONS
        if unknown_options:
            raise TypeError(
                f"zookeeper store: unknown option(s) {', '.join(sorted(unknown_options))}"
            )
        if not url.hosts:
            raise InvalidURLError(
                f"{where}: no host; expected zookeeper://host:2181[,host:port...]/chroot"
            )
        hosts = tuple((host, DEFAULT_PORT if port is None else port) for host, port in url.hosts)
        if any(not host for host, _ in hosts):
            raise InvalidURLError(f"{where}: empty host name")
        chroot = _chroot(url.path, where)
        username, password = url.username, url.password
        if (username is None) != (password is None):
            raise InvalidURLError(
                f"{where}: digest authentication needs both a user name and a password (user:pass@)"
            )
        if username is not None and ":" in username:
            raise InvalidURLError(f"{where}: the user name must not contain ':'")
        params = url.params
        unknown = set(params) - KNOWN_PARAMS
        if unknown:
            raise InvalidURLError(
                f"{where}: unknown parameter(s) {', '.join(map(repr, sorted(unknown)))}; "
                f"known: {', '.join(sorted(KNOWN_PARAMS))}"
            )
        numbers = {
            name: _seconds(where, name, options.get(name, params.get(name)))
            for name in _NUMBER_PARAMS
        }
        session_timeout = numbers["session_timeout"] or DEFAULT_SESSION_TIMEOUT
        connect_timeout = numbers["connect_timeout"] or DEFAULT_CONNECT_TIMEOUT
        request_timeout = numbers["request_timeout"] or session_timeout + REQUEST_TIMEOUT_MARGIN
        tls = _tls(where, params, options.get("keyfile_password"))
        return cls(
            url=url,
            hosts=hosts,
            chroot=chroot,
            username=username,
            password=password,
            session_timeout=session_timeout,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            tls=tls,
            batched_io=bool(options.get("batched_io", True)),
            multi_read=_multi_read(where, options.get("multi_read", params.get("multi_read"))),
        )


def _chroot(path: str, where: str) -> str:
    if path in ("", "/"):
        return ""
    try:
        paths.validate(path)
    except InvalidPathError as exc:
        raise InvalidURLError(
            f"{where}: chroot {path!r} is not a valid node path: {exc.message}"
        ) from None
    return path


def _seconds(where: str, name: str, value: Any) -> float | None:
    return None if value is None else parse_seconds(where, name, value)


def _flag(where: str, name: str, value: str | None, default: bool) -> bool:
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise InvalidURLError(f"{where}: {name}={value!r} is not a boolean (true/false)")


def _multi_read(where: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if str(value).lower() == _MULTI_READ_AUTO:
        return None
    return _flag(where, "multi_read", str(value), True)


def _tls(where: str, params: dict[str, str], key_password: str | None) -> TLSConfig | None:
    enabled = _flag(where, "tls", params.get("tls"), False)
    given = [name for name in _TLS_PARAMS if name in params]
    if not enabled:
        if given:
            raise InvalidURLError(f"{where}: {', '.join(given)} given without tls=true")
        if key_password is not None:
            raise TypeError("zookeeper store: keyfile_password given without tls=true in the URL")
        return None
    cert, key = params.get("cert"), params.get("key")
    if (cert is None) != (key is None):
        raise InvalidURLError(f"{where}: a client certificate needs both cert= and key=")
    verify = _flag(where, "verify", params.get("verify"), True)
    check_hostname = _flag(where, "check_hostname", params.get("check_hostname"), False)
    if check_hostname and not verify:
        raise InvalidURLError(f"{where}: check_hostname=true needs verify=true")
    return TLSConfig(
        ca=params.get("ca"),
        cert=cert,
        key=key,
        verify=verify,
        check_hostname=check_hostname,
        key_password=key_password,
    )
