"""Store URLs: ``memory://name``, ``zookeeper://[user:pass@]h1:p1,h2:p2/chroot``,
``redis://[:pass@]host:port/db`` and ``rediss://``. Credentials never appear in ``repr`` or errors."""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote

import attrs

from coordkit.errors import InvalidURLError


@attrs.frozen(repr=False)
class StoreURL:
    scheme: str
    hosts: tuple[tuple[str, int | None], ...] = ()
    path: str = ""
    username: str | None = None
    password: str | None = attrs.field(default=None, eq=False)
    query: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, url: str) -> StoreURL:
        if not isinstance(url, str) or "://" not in url:
            raise InvalidURLError(
                f"store URL {_redact_raw(str(url))!r} has no scheme; expected e.g. "
                "memory://name, zookeeper://host:2181/chroot or redis://host:6379/0"
            )
        scheme, rest = url.split("://", 1)
        scheme = scheme.lower()
        if not scheme.isidentifier():
            raise InvalidURLError(f"store URL scheme {scheme!r} is not valid")
        query_text = ""
        if "?" in rest:
            rest, query_text = rest.split("?", 1)
        netloc, slash, path = rest.partition("/")
        path = slash + path if slash else ""
        username = password = None
        if "@" in netloc:
            userinfo, netloc = netloc.rsplit("@", 1)
            user, colon, secret = userinfo.partition(":")
            username = unquote(user) or None
            password = unquote(secret) if colon else None
        hosts: list[tuple[str, int | None]] = []
        for item in filter(None, netloc.split(",")):
            hosts.append(_parse_host(item, scheme))
        query = tuple(parse_qsl(query_text, keep_blank_values=True))
        return cls(scheme, tuple(hosts), unquote(path), username, password, query)

    @property
    def params(self) -> dict[str, str]:
        return dict(self.query)

    @property
    def host_string(self) -> str:
        return ",".join(h if p is None else f"{h}:{p}" for h, p in self.hosts)

    def redacted(self) -> str:
        """The URL with the password replaced by ``***``."""
        auth = ""
        if self.username or self.password:
            auth = (self.username or "") + (":***" if self.password else "") + "@"
        query = "&".join(f"{k}={v}" for k, v in self.query)
        return f"{self.scheme}://{auth}{self.host_string}{self.path}" + (
            f"?{query}" if query else ""
        )

    def __repr__(self) -> str:
        return f"StoreURL({self.redacted()!r})"

    __str__ = redacted


def _parse_host(item: str, scheme: str) -> tuple[str, int | None]:
    if item.startswith("["):  # IPv6 literal
        host, _, port_text = item[1:].partition("]")
        port_text = port_text.lstrip(":")
    else:
        host, _, port_text = item.partition(":")
    if not port_text:
        return host, None
    try:
        port = int(port_text)
    except ValueError:
        raise InvalidURLError(
            f"{scheme} URL: port {port_text!r} of host {host!r} is not a number"
        ) from None
    if not 0 < port < 65536:
        raise InvalidURLError(f"{scheme} URL: port {port} of host {host!r} is out of range")
    return host, port


def _redact_raw(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
    return url
