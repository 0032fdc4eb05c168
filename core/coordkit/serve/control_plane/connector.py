"""Every connection a broker opens to another broker, on the inter-broker listener (Kafka's
client-side ``ChannelBuilder`` for ``inter.broker.listener.name``): the controller's requests,
ControlledShutdown, a follower's fetches, a forwarded election.

The peer is reached at its registration's endpoint of the inter-broker listener
(``SASL_SSL://host:port`` in ``/brokers/ids/N``, or the endpoint an UpdateMetadata named); over
SSL and SASL_SSL the connection is TLS, the peer's certificate checked against the truststore
(:func:`~coordkit.serve.listeners.tls.client_context`); over SASL_PLAINTEXT and SASL_SSL the broker
logs in with ``sasl.mechanism.inter.broker.protocol`` and the username and password of the
listener's JAAS config for that mechanism
(``listener.name.<listener>.<mechanism>.sasl.jaas.config``) before its first request. A refused
login or certificate is an ``OSError``, as a lost connection: the caller tries again later, and
the refusal is logged once per peer and reason (never a secret: the peer's message only).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
import threading
from collections.abc import Generator, Sequence
from typing import Any

import attrs

from coordkit.kafka.model import BrokerInfo
from coordkit.protocol import KafkaCodec
from coordkit.serve.listeners.bound import endpoint_of
from coordkit.serve.listeners.config import (
    PLAIN,
    PLAINTEXT,
    SASL_PLAINTEXT,
    SASL_SSL,
    SSL,
    SecurityConfigError,
    SecurityConfigs,
)
from coordkit.serve.listeners.plain import PLAIN_LOGIN_MODULE, jaas_options
from coordkit.serve.listeners.sasl_client import SaslClientError, SaslCredentials, sasl_exchange
from coordkit.serve.listeners.tls import client_context

log = logging.getLogger("coordkit.serve")

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CLIENT_ID = "coordkit-broker-login"
_SIZE = struct.Struct(">i")


@attrs.frozen
class BrokerConnector:
    """How this process's brokers connect to other brokers: the inter-broker listener's name and
    protocol, its client TLS context and the brokers' SASL login (none: PLAINTEXT)."""

    listener: str = PLAINTEXT
    protocol: str = PLAINTEXT
    tls: ssl.SSLContext | None = None
    credentials: SaslCredentials | None = None
    _refusals: set[tuple[Any, str]] = attrs.field(factory=set, init=False, eq=False, repr=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, eq=False, repr=False)

    # -- where ------------------------------------------------------------------------------

    def address(self, endpoints: Sequence[str], host: str | None, port: int) -> tuple[str, int]:
        """The peer's endpoint of the inter-broker listener among its ``endpoints``
        (``NAME://host:port``); a registration without endpoints: its ``host`` and ``port``."""
        found = endpoint_of(endpoints, self.listener)
        if found is not None:
            return found
        return host or "", port

    def address_of(self, info: BrokerInfo) -> tuple[str, int]:
        """Where the broker registered as ``info`` is reached by its brokers' peers."""
        return self.address(info.endpoints, info.host, info.port)

    # -- connecting -------------------------------------------------------------------------

    def connect(self, address: tuple[str, int], timeout: float) -> socket.socket:
        """A blocking socket to ``address``, TLS and logged in as the listener asks.

        :raises OSError: not reached, or the certificate or the login refused.
        """
        sock = socket.create_connection(address, timeout=timeout)
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=address[0])
            if self.credentials is not None:
                _drive_blocking(sock, sasl_exchange(self.credentials))
        except OSError as exc:
            sock.close()
            self._refused(address, exc)
            raise
        return sock

    async def open(
        self, address: tuple[str, int], timeout: float
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """asyncio streams to ``address``, TLS and logged in as the listener asks.

        :raises OSError: not reached, or the certificate or the login refused.
        """
        host, port = address
        try:
            streams = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=self.tls,
                                        server_hostname=host if self.tls is not None else None),
                timeout,
            )  # fmt: skip
        except ssl.SSLError as exc:  # the peer's certificate refused, or ours
            self._refused(address, exc)
            raise
        try:
            if self.credentials is not None:
                await asyncio.wait_for(
                    _drive_async(*streams, sasl_exchange(self.credentials)), timeout
                )
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
            streams[1].close()
            if isinstance(exc, OSError):
                self._refused(address, exc)
                raise
            raise OSError(f"the SASL login to {host}:{port} did not complete: {exc!r}") from None
        return streams

    def _refused(self, address: tuple[str, int], exc: OSError) -> None:
        """A refused login or certificate is logged once per peer and reason (a lost
        connection is the caller's to report)."""
        if not isinstance(exc, SaslClientError | ssl.SSLError):
            return
        key = (address, str(exc))
        with self._lock:
            if key in self._refusals:
                return
            self._refusals.add(key)
        log.warning("inter-broker connection to %s:%s on listener %s refused: %s", *address,
                    self.listener, exc)  # fmt: skip


def _frame(codec: KafkaCodec, body: Any, version: int, correlation: int) -> bytes:
    return codec.encode_request(body, version=version, correlation_id=correlation,
                                client_id=CLIENT_ID)  # fmt: skip


def _answer(codec: KafkaCodec, body: Any, version: int, frame: bytes, correlation: int) -> Any:
    api = type(body).KAFKA_NAME.removesuffix("Request")
    got, answer = codec.decode_response(api, version, frame)
    if got != correlation:
        raise OSError(f"{api} answered with correlation id {got}, not {correlation}")
    return answer


def _drive_blocking(sock: socket.socket, exchange: Generator[Any, Any, None]) -> None:
    codec = KafkaCodec()
    correlation = 0
    answer: Any = None
    while True:
        try:
            body, version = exchange.send(answer)
        except StopIteration:
            return
        correlation += 1
        sock.sendall(_frame(codec, body, version, correlation))
        (size,) = _SIZE.unpack(_exactly(sock, _SIZE.size))
        answer = _answer(codec, body, version, _exactly(sock, size), correlation)


def _exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise SaslClientError("the broker closed the connection during the SASL login")
        data += chunk
    return bytes(data)


async def _drive_async(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       exchange: Generator[Any, Any, None]) -> None:  # fmt: skip
    codec = KafkaCodec()
    correlation = 0
    answer: Any = None
    while True:
        try:
            body, version = exchange.send(answer)
        except StopIteration:
            return
        correlation += 1
        writer.write(_frame(codec, body, version, correlation))
        await writer.drain()
        try:
            (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
            frame = await reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise SaslClientError(
                "the broker closed the connection during the SASL login"
            ) from None
        answer = _answer(codec, body, version, frame, correlation)


def broker_connector(configs: SecurityConfigs) -> BrokerConnector:
    """The connector of ``configs``'s inter-broker listener, its files and login read.

    :raises SecurityConfigError: a TLS file does not load, or the login is not configured.
    """
    listener = configs.listener(configs.inter_broker_listener)
    name, protocol = listener.name, listener.protocol
    tls = client_context(configs, name) if protocol in (SSL, SASL_SSL) else None
    credentials = None
    if protocol in (SASL_PLAINTEXT, SASL_SSL):
        mechanism = configs.values["sasl.mechanism.inter.broker.protocol"]  # checked at parse
        credentials = _login(configs, name, mechanism)
    return BrokerConnector(name, protocol, tls, credentials)


def _login(configs: SecurityConfigs, listener: str, mechanism: str) -> SaslCredentials:
    """The brokers' own login: the username and password of the listener's JAAS config for
    ``mechanism`` (Kafka's ``listener.name.<l>.<mechanism>.sasl.jaas.config``)."""
    config_name = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = configs.values.get(config_name)
    module = PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE
    if text is None:
        raise SecurityConfigError(
            f"--config {config_name}: the inter-broker listener {listener} logs in with "
            f'{mechanism} and needs the brokers\' own login ({module} required username="..." '
            'password="...";)'
        )
    found_module, options = jaas_options(config_name, text)
    if found_module != module:
        raise SecurityConfigError(f"--config {config_name}: {mechanism} needs {module}")
    if not options.get("username") or not options.get("password"):
        raise SecurityConfigError(
            f"--config {config_name}: the inter-broker login needs username and password "
            "options (the brokers' own credentials)"
        )
    return SaslCredentials(mechanism, options["username"], options["password"])
