"""Another network path to a store's servers, standing for a second machine: the suite's multi-host
tests open sessions through it and cut it while the first path keeps working.

The default path is a loopback TCP proxy per ``host:port`` of the store's URL (a different address
the client connects to, its own sockets, cut independently). A backend whose URLs name no host and
port (or that can offer a truer second path: another interface, another DNS name) overrides
:meth:`~coordkit.testing.backends.StoreBackend.another_path`.
"""

from __future__ import annotations

import contextlib

from coordkit.store.urls import StoreURL
from coordkit.testing.servers.proxy import TCPProxy


class NetworkPath:
    """A URL reaching the same store through proxies of this path's own; :meth:`cut` severs this
    path only (sessions on it go SUSPENDED, new connections are refused) until :meth:`restore`."""

    def __init__(self, url: str, proxies: list[TCPProxy]):
        self.url = url
        self.proxies = proxies

    def cut(self) -> None:
        for proxy in self.proxies:
            proxy.cut()

    def restore(self) -> None:
        for proxy in self.proxies:
            proxy.restore()

    def close(self) -> None:
        for proxy in self.proxies:
            with contextlib.suppress(OSError):
                proxy.close()

    def __repr__(self) -> str:
        return f"<NetworkPath via {', '.join(p.address for p in self.proxies)}>"


def proxied_path(url: str) -> NetworkPath:
    """A :class:`NetworkPath` to the servers ``url`` names, one proxy per ``host:port`` (user,
    password, path and parameters kept as given).

    :raises ValueError: ``url`` names no host with a port (nothing to proxy).
    """
    parsed = StoreURL.parse(url)
    if not parsed.hosts or any(port is None for _host, port in parsed.hosts):
        raise ValueError(
            f"{parsed.where}: names no host:port to reach another way; a multi-host backend with "
            "such URLs overrides StoreBackend.another_path"
        )
    proxies: list[TCPProxy] = []
    try:
        for host, port in parsed.hosts:
            assert port is not None
            proxies.append(TCPProxy(host, port))
    except BaseException:
        NetworkPath(url, proxies).close()
        raise
    return NetworkPath(_with_hosts(url, ",".join(p.address for p in proxies)), proxies)


def _with_hosts(url: str, hosts: str) -> str:
    """``url`` with its host list replaced by ``hosts`` (everything else as written)."""
    scheme, rest = url.split("://", 1)
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    userinfo = authority.rsplit("@", 1)[0] + "@" if "@" in authority else ""
    return f"{scheme}://{userinfo}{hosts}{tail}"
