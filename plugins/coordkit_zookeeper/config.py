"""What a ``zookeeper://`` URL asks for, checked before any connection is attempted.

``zookeeper://[user:pass@]host[:port][,host[:port]...][/chroot][?param=value&...]``

Parameters (all optional):

``auth``
    How ``user:pass@`` authenticates: ``digest`` (ZooKeeper's digest scheme, the default) or
    ``sasl`` (SASL DIGEST-MD5, the identity a Kafka broker's JAAS ``Client`` section gives).
``jaas``
    A JAAS file whose ``Client`` section (``jaas_section=NAME`` for another, as ZooKeeper's
    ``zookeeper.sasl.clientconfig``) holds a ``DigestLoginModule`` user and password: SASL
    DIGEST-MD5 with them, the file a Kafka broker is given by
    ``-Djava.security.auth.login.config``; not with ``user:pass@``.
``set_acl``
    The ACLs of the nodes the store creates, as Kafka's ``zookeeper.set.acl``
    (``ZkData.defaultAcls``): ``true`` gives the authenticated identity every permission and
    everyone else read, but on Kafka's sensitive paths (``/config/users``, ``/config/brokers``,
    ``/delegation_token/tokens``: credentials), which no one else may read; ``false`` leaves nodes
    open to everyone. Default: ``true`` when the URL authenticates (digest or SASL), ``false``
    otherwise; ``true`` without credentials is refused.

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
_AUTH_PARAMS = ("auth", "jaas", "jaas_section", "set_acl")
KNOWN_PARAMS = frozenset((*_NUMBER_PARAMS, "tls", *_TLS_PARAMS, "multi_read", *_AUTH_PARAMS))
#: Options accepted by the store factory besides the URL's parameters.
KNOWN_OPTIONS = frozenset(
    (*_NUMBER_PARAMS, "keyfile_password", "batched_io", "multi_read", "set_acl")
)
#: ``auth=`` values: how ``user:pass@`` authenticates.
AUTH_DIGEST = "digest"
AUTH_SASL = "sasl"
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
    #: Authenticate with SASL DIGEST-MD5 instead of the digest scheme.
    sasl: bool = False
    #: Kafka's zookeeper.set.acl: creator-all and world-read ACLs (none on sensitive paths).
    set_acl: bool = False

    @property
    def host_string(self) -> str:
        """kazoo's ``hosts`` argument: ``h1:p1,h2:p2`` followed by the chroot."""
        return (
            ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.hosts) + self.chroot
        )

    @property
    def authenticated(self) -> bool:
        return self.username is not None and self.password is not None

    @property
    def digest_credential(self) -> str | None:
        """``user:password`` for ZooKeeper's digest scheme, or ``None`` without credentials or
        with SASL."""
        if self.username is None or self.password is None or self.sasl:
            return None
        return f"{self.username}:{self.password}"

    @property
    def secrets(self) -> tuple[str, ...]:
        """Strings that must never be logged."""
        out = [s for s in (self.digest_credential, self.password) if s]
        if self.username and self.password:
            out.append(f"{self.username}:{self.password}")
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
        params = url.params
        unknown = set(params) - KNOWN_PARAMS
        if unknown:
            raise InvalidURLError(
                f"{where}: unknown parameter(s) {', '.join(map(repr, sorted(unknown)))}; "
                f"known: {', '.join(sorted(KNOWN_PARAMS))}"
            )
        username, password, sasl = _credentials(url, params)
        set_acl = _set_acl(where, options.get("set_acl", params.get("set_acl")), username)
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
            sasl=sasl,
            set_acl=set_acl,
        )


def _credentials(url: StoreURL, params: dict[str, str]) -> tuple[str | None, str | None, bool]:
    """The user, password and whether they go by SASL, from ``user:pass@`` or a JAAS file."""
    where = url.where
    username, password = url.username, url.password
    auth = params.get("auth", "").lower() or None
    if auth not in (None, AUTH_DIGEST, AUTH_SASL):
        raise InvalidURLError(f"{where}: auth={params['auth']!r}: give digest or sasl")
    jaas, section = params.get("jaas"), params.get("jaas_section")
    if section is not None and jaas is None:
        raise InvalidURLError(f"{where}: jaas_section given without jaas=FILE")
    if jaas is not None:
        if username is not None or password is not None:
            raise InvalidURLError(
                f"{where}: give the credentials once: user:pass@ or jaas=FILE, not both"
            )
        if auth == AUTH_DIGEST:
            raise InvalidURLError(f"{where}: jaas=FILE authenticates with SASL, not auth=digest")
        from coordkit_zookeeper.jaas import DEFAULT_SECTION, JaasError, read_digest_login

        try:
            login = read_digest_login(jaas, section or DEFAULT_SECTION)
        except JaasError as exc:
            raise InvalidURLError(f"{where}: {exc}") from None
        return login.username, login.password, True
    if (username is None) != (password is None):
        raise InvalidURLError(
            f"{where}: authentication needs both a user name and a password (user:pass@)"
        )
    if username is not None and ":" in username:
        raise InvalidURLError(f"{where}: the user name must not contain ':'")
    if auth is not None and username is None:
        raise InvalidURLError(f"{where}: auth={auth} needs user:pass@ (or jaas=FILE for SASL)")
    return username, password, auth == AUTH_SASL


def _set_acl(where: str, value: Any, username: str | None) -> bool:
    if value is None:
        return username is not None
    secure = value if isinstance(value, bool) else _flag(where, "set_acl", str(value), False)
    if secure and username is None:
        # Kafka refuses zookeeper.set.acl=true without ZooKeeper authentication the same way.
        raise InvalidURLError(
            f"{where}: set_acl=true needs an authenticated identity to own the nodes "
            "(user:pass@, or jaas=FILE for SASL)"
        )
    return secure


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
