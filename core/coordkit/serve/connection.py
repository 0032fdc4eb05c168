"""What a request handler knows of, and may ask of, the connection its request came on.

Each connection is served by an asyncio task of its own (:mod:`coordkit.serve.listener`), so a
context variable set when the connection opens is that connection's for every handler it runs
(and for the store work they hand to threads, which copy the context).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import attrs

#: The client's address as Kafka shows it (``InetAddress.toString()``: ``/127.0.0.1``), for
#: DescribeGroups' ``client_host``; empty outside a connection.
client_host: ContextVar[str] = ContextVar("client_host", default="")


@attrs.frozen
class KafkaPrincipal:
    """Who a connection authenticated as (Kafka's ``KafkaPrincipal``): ``User:alice``,
    ``User:CN=client,O=example`` from a client certificate, ``User:ANONYMOUS`` without
    authentication."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


#: Kafka's ``KafkaPrincipal.ANONYMOUS``: a PLAINTEXT connection's, or an SSL one's without a
#: client certificate.
ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")

#: The principal of the connection a handler serves (what an authorizer checks): set by the
#: listener when the connection opens (TLS: the client certificate's subject) and by
#: SaslAuthenticate once it succeeds.
principal: ContextVar[KafkaPrincipal] = ContextVar("principal", default=ANONYMOUS)

#: The name of the listener the connection came on (Kafka's ``ListenerName``: ``PLAINTEXT``,
#: ``SASL_SSL``, ...; empty outside a connection): Metadata and FindCoordinator answer each
#: broker's endpoint of that listener.
listener_name: ContextVar[str] = ContextVar("listener_name", default="")


#: What to do when the connection closes (the listener calls each, in order, once it is closed;
#: ``None`` outside a connection): Kafka's share sessions end with their connection.
on_close: ContextVar[list[Callable[[], None]] | None] = ContextVar("on_close", default=None)


def kafka_host(peer: object) -> str:
    """A peer address (``(host, port, ...)``) the way Kafka prints a client's address."""
    if isinstance(peer, tuple) and peer:
        return f"/{peer[0]}"
    return ""


class CloseConnectionError(Exception):
    """Raised by a handler: close the connection instead of answering. Kafka's way of telling
    an acks=0 producer that its produce failed (it reads no answer, so a closed connection is
    the only sign, and it refreshes its metadata)."""
