"""A blocking connection from one broker to another, speaking Kafka's protocol: the controller's
requests to brokers (:mod:`coordkit.serve.control_plane.channel`) and a broker's ControlledShutdown to
the controller (:mod:`coordkit.serve.control_plane.client`); :class:`BrokerConnections` keeps one
to each broker a part talks to (a transaction coordinator's markers, a leader's verifications).
One request at a time, each answered before the next; the versions are chosen from the peer's
ApiVersions. The connection is opened by the process's
:class:`~coordkit.serve.control_plane.connector.BrokerConnector` (TLS and SASL as the inter-broker
listener asks)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from coordkit.errors import CoordkitError
from coordkit.kafka import layout
from coordkit.protocol import APIS, KafkaCodec, messages
from coordkit.serve.control_plane.connector import BrokerConnector
from coordkit.store import MetadataStore

SOCKET_TIMEOUT = 30.0


class UnservedVersionError(Exception):
    """The peer does not speak a version of an api that this side builds."""


class BrokerConnection:
    """One connection to the broker at ``address`` (``OSError`` or ``ProtocolError`` when it
    fails: the caller closes it and connects again)."""

    def __init__(self, address: tuple[str, int], client_id: str,
                 timeout: float = SOCKET_TIMEOUT,
                 connector: BrokerConnector | None = None) -> None:  # fmt: skip
        self.address = address
        self.client_id = client_id
        self._sock = (connector or BrokerConnector()).connect(address, timeout)
        self._codec = KafkaCodec()
        self._correlation = 0
        answer = self.call(messages.ApiVersionsRequest(), 0)
        #: The peer's version range of each api it answers, by api key.
        self.ranges: dict[int, tuple[int, int]] = {
            entry.api_key: (entry.min_version, entry.max_version) for entry in answer.api_keys
        }

    def versions(self, wanted: Mapping[str, tuple[int, int]]) -> dict[str, int]:
        """The highest version of each api both sides speak, from ``wanted``'s (lowest, highest).

        :raises UnservedVersionError: the peer speaks none of an api's versions.
        """
        chosen = {}
        for api, (lowest, highest) in wanted.items():
            span = self.ranges.get(APIS[api].key)
            if span is None or span[1] < lowest or span[0] > highest:
                theirs = "not at all" if span is None else f"v{span[0]}-{span[1]}"
                raise UnservedVersionError(
                    f"{self.address[0]}:{self.address[1]} answers {api} {theirs}; "
                    f"v{lowest}-{highest} is needed"
                )
            chosen[api] = min(highest, span[1])
        return chosen

    def call(self, request: Any, version: int) -> Any:
        """Send ``request`` at ``version``; its answer."""
        self._correlation += 1
        api = type(request).KAFKA_NAME.removesuffix("Request")
        frame = self._codec.encode_request(request, version=version,
                                           correlation_id=self._correlation,
                                           client_id=self.client_id)  # fmt: skip
        self._sock.sendall(frame)
        size = int.from_bytes(self._exactly(4), "big", signed=True)
        got, answer = self._codec.decode_response(api, version, self._exactly(size))
        if got != self._correlation:
            raise OSError(f"{api} answered with correlation id {got}, not {self._correlation}")
        return answer

    def _exactly(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self._sock.recv(count - len(data))
            if not chunk:
                raise OSError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self._sock.close()


class BrokerConnections:
    """One connection per broker id, opened at its first use (to the inter-broker endpoint of
    the broker's registration in ``store``) and used by one call at a time; a call that fails
    drops its connection, so the next one connects again. What a coordinator keeps to the
    leaders it writes markers to, and a leader to the coordinators it asks to verify
    transactions."""

    def __init__(self, client_id: str, connector: BrokerConnector, store: MetadataStore) -> None:
        self.client_id = client_id
        self._connector = connector
        self._store = store
        self._connections: dict[int, BrokerConnection] = {}
        self._locks: dict[int, threading.Lock] = {}
        self._guard = threading.Lock()

    def call(self, broker_id: int, request: Any, versions: tuple[int, int]) -> Any:
        """``request`` to broker ``broker_id`` at the highest of ``versions`` both speak, and
        its answer (blocking).

        :raises UnservedVersionError: the broker speaks none of ``versions`` (the connection is
            kept).
        :raises OSError, ProtocolError: the call failed (or the broker's registration is not
            readable); the connection is dropped.
        """
        api = type(request).KAFKA_NAME.removesuffix("Request")
        with self._guard:
            lock = self._locks.setdefault(broker_id, threading.Lock())
        with lock:
            try:
                connection = self._connection(broker_id)
                return connection.call(request, connection.versions({api: versions})[api])
            except UnservedVersionError:
                raise
            except BaseException:
                self.drop(broker_id)
                raise

    def _connection(self, broker_id: int) -> BrokerConnection:
        connection = self._connections.get(broker_id)
        if connection is None:
            connection = BrokerConnection(self._address(broker_id), self.client_id,
                                          connector=self._connector)  # fmt: skip
            self._connections[broker_id] = connection
        return connection

    def _address(self, broker_id: int) -> tuple[str, int]:
        path = layout.broker_path(broker_id)
        try:
            data, _ = self._store.get(path)
            return self._connector.address_of(layout.BROKER.decode(data, path))
        except CoordkitError as exc:
            raise OSError(f"broker {broker_id}'s registration is not readable: {exc}") from None

    def drop(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        for broker_id in list(self._connections):
            self.drop(broker_id)
