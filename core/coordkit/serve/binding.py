"""Where ``coordkit serve`` listens: its sockets, bound all or none before anything reaches the
store, and the host it tells clients (Kafka's ``listeners`` and ``advertised.listeners``)."""

from __future__ import annotations

import socket
from collections.abc import Sequence

import attrs

from coordkit.errors import CoordkitError

WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


class ServeError(CoordkitError):
    """The server cannot start as asked (a port in use, an address that does not resolve)."""


@attrs.frozen
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def bind(host: str, ports: Sequence[int]) -> list[socket.socket]:
    """Listening sockets on ``host`` at ``ports`` (0: any free port); all or none.

    :raises ServeError: an address does not resolve or a port is taken.
    """
    bound: list[socket.socket] = []
    try:
        for port in ports:
            try:
                infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                           flags=socket.AI_PASSIVE)  # fmt: skip
            except socket.gaierror as exc:
                raise ServeError(f"--host {host!r}: {exc.strerror}") from None
            family, kind, proto, _, sockaddr = infos[0]
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(sockaddr)
            except OSError as exc:
                raise ServeError(
                    f"cannot listen on {Address(host, port)}: {exc.strerror}"
                ) from None
            sock.listen(128)
            sock.setblocking(False)
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound


def advertised_host(host: str) -> str:
    """The host clients are told to connect to: the bind address, or this machine's name when
    bound to every interface."""
    return socket.getfqdn() if host in WILDCARD_HOSTS else host
