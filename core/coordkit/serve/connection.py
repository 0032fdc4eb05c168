"""What a request handler knows of, and may ask of, the connection its request came on.

Each connection is served by an asyncio task of its own (:mod:`coordkit.serve.listener`), so a
context variable set when the connection opens is that connection's for every handler it runs
(and for the store work they hand to threads, which copy the context).
"""

from __future__ import annotations

from contextvars import ContextVar

#: The client's address as Kafka shows it (``InetAddress.toString()``: ``/127.0.0.1``), for
#: DescribeGroups' ``client_host``; empty outside a connection.
client_host: ContextVar[str] = ContextVar("client_host", default="")


def kafka_host(peer: object) -> str:
    """A peer address (``(host, port, ...)``) the way Kafka prints a client's address."""
    if isinstance(peer, tuple) and peer:
        return f"/{peer[0]}"
    return ""


class CloseConnectionError(Exception):
    """Raised by a handler: close the connection instead of answering. Kafka's way of telling
    an acks=0 producer that its produce failed (it reads no answer, so a closed connection is
    the only sign, and it refreshes its metadata)."""
