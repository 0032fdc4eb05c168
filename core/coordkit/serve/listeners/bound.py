"""Every listener of every broker of the process, bound: sockets first, all or none (a port in
use is refused before anything reaches the store), the inter-broker listener first.

Broker ``i`` of the process (in the order given) listens on each listener's port plus ``i``
(0: any free port), and registers each listener's advertised address (Kafka's ``endpoints``:
``SASL_SSL://host:port``)."""

from __future__ import annotations

import socket
from collections.abc import Sequence

import attrs

from coordkit.kafka.model import BrokerInfo
from coordkit.serve.binding import Address, advertised_host, bind
from coordkit.serve.connection import listener_name
from coordkit.serve.listeners.config import ListenerConfig, SecurityConfigs
from coordkit.serve.listeners.security import ListenerSecurity, listener_security


@attrs.define
class BoundListener:
    """One listener's sockets, one per broker of the process."""

    config: ListenerConfig
    security: ListenerSecurity
    sockets: dict[int, socket.socket]

    def address(self, broker_id: int) -> Address:
        """Where broker ``broker_id``'s clients are told to connect on this listener."""
        port = int(self.sockets[broker_id].getsockname()[1])
        return self.config.advertised(Address(advertised_host(self.config.host), port))

    def endpoint(self, broker_id: int) -> str:
        return f"{self.config.name}://{self.address(broker_id)}"


def bind_listeners(configs: SecurityConfigs, broker_ids: Sequence[int]) -> list[BoundListener]:
    """The bound listeners, the inter-broker one first.

    :raises SecurityConfigError: a listener's TLS or SASL settings do not load.
    :raises ServeError: an address does not resolve or a port is taken.
    """
    securities = [(lsn, listener_security(configs, lsn)) for lsn in configs.listeners]
    securities.sort(key=lambda pair: pair[0].name != configs.inter_broker_listener)
    bound: list[BoundListener] = []
    try:
        for lsn, security in securities:
            ports = [0 if lsn.port == 0 else lsn.port + i for i, _ in enumerate(broker_ids)]
            sockets = bind(lsn.host, ports)
            bound.append(BoundListener(lsn, security, dict(zip(broker_ids, sockets, strict=True))))
    except BaseException:
        for listener in bound:
            for sock in listener.sockets.values():
                sock.close()
        raise
    return bound


def endpoint_of(endpoints: Sequence[str], listener: str) -> tuple[str, int] | None:
    """The host and port of ``listener`` among a registration's ``endpoints``
    (``NAME://host:port``); ``None``: the broker has no such listener."""
    prefix = f"{listener}://"
    for endpoint in endpoints:
        if endpoint.startswith(prefix):
            host, _, port = endpoint[len(prefix) :].rpartition(":")
            return host.strip("[]"), int(port)
    return None


def as_listener_sees(info: BrokerInfo) -> BrokerInfo:
    """``info`` with the host and port of its endpoint of the listener the current request came
    on (Kafka answers each client its listener's endpoints); unchanged outside a connection or
    when the broker has no such listener."""
    listener = listener_name.get()
    found = endpoint_of(info.endpoints, listener) if listener else None
    if found is None:
        return info
    return attrs.evolve(info, host=found[0], port=found[1])
