"""The client side of SASL, for a broker's own connections to other brokers (Kafka's
``SaslClientAuthenticator`` with its ``PlainSaslClient`` and ``ScramSaslClient``).

The exchange is written once, without input or output: :func:`sasl_exchange` is a generator
that yields each request (SaslHandshake v1, then SaslAuthenticate v1 frames carrying the
mechanism's tokens) and is sent each answer, so that the blocking connections of the
controller's channel and the asyncio ones of the replica fetcher drive the same steps. A refusal
raises :class:`SaslClientError` (an ``OSError``: the callers close the connection and try
again later, as Kafka's network client does) with the server's message, never a secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import unicodedata
from collections.abc import Generator
from typing import Any

import attrs

from coordkit.protocol import messages
from coordkit.serve.listeners.config import PLAIN
from coordkit.serve.listeners.scram import HASHES, MIN_ITERATIONS

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 1

#: A request to send at a version; the driver sends its answer back into the exchange.
Step = tuple[Any, int]


class SaslClientError(OSError):
    """The peer refused the exchange, or answered something the mechanism does not accept."""


@attrs.frozen
class SaslCredentials:
    """The broker's own SASL login on the inter-broker listener (Kafka's
    ``sasl.mechanism.inter.broker.protocol`` and the username/password of the listener's JAAS
    config for that mechanism)."""

    mechanism: str
    username: str
    password: str = attrs.field(repr=False)


def sasl_exchange(credentials: SaslCredentials) -> Generator[Step, Any, None]:
    """The SASL exchange of ``credentials``: yields each request, is sent each answer;
    returns once authenticated.

    :raises SaslClientError: the mechanism is not enabled there, or the login is refused.
    """
    mechanism = credentials.mechanism
    handshake = yield messages.SaslHandshakeRequest(mechanism=mechanism), HANDSHAKE_VERSION
    if handshake.error_code:
        raise SaslClientError(
            f"SASL mechanism {mechanism} refused (error {handshake.error_code}; the broker "
            f"enables {', '.join(handshake.mechanisms) or 'none'})"
        )
    if mechanism == PLAIN:
        token = f"\x00{credentials.username}\x00{credentials.password}".encode()
        yield from _authenticate(token)
        return
    scram = ScramClient(mechanism, credentials.username, credentials.password)
    server_first = yield from _authenticate(scram.first())
    server_final = yield from _authenticate(scram.final(server_first))
    scram.verify(server_final)


def _authenticate(token: bytes) -> Generator[Step, Any, bytes]:
    answer = yield messages.SaslAuthenticateRequest(auth_bytes=token), AUTHENTICATE_VERSION
    if answer.error_code:
        raise SaslClientError(
            f"SASL authentication failed (error {answer.error_code}): {answer.error_message}"
        )
    return bytes(answer.auth_bytes or b"")


def _hmac(digest: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, digest).digest()


def _sasl_name(user: str) -> str:
    """RFC 5802's ``saslname``: a comma is ``=2C``, an equals sign ``=3D``."""
    return user.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """One SCRAM exchange (RFC 5802, as Kafka's ``ScramSaslClient``): client-first, then
    client-final for the server-first message, then the server's signature checked."""

    GS2_HEADER = "n,,"

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism")
        self.digest = HASHES[mechanism]
        self._password = password
        self._nonce = base64.b64encode(secrets.token_bytes(24)).decode()
        self._first_bare = f"n={_sasl_name(username)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return (self.GS2_HEADER + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final message (the proof of the password) for ``server_first``.

        :raises SaslClientError: the server-first message is not one, names another nonce, or
            too few iterations (Kafka's client refuses fewer than 4096).
        """
        text = server_first.decode(errors="replace")
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        except (KeyError, ValueError):
            raise SaslClientError("SCRAM: not a server-first message") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslClientError("SCRAM: the server's nonce does not extend the client's")
        if iterations < MIN_ITERATIONS:
            raise SaslClientError(f"SCRAM: {iterations} iterations, fewer than {MIN_ITERATIONS}")
        normalized = unicodedata.normalize("NFKC", self._password).encode()
        salted = hashlib.pbkdf2_hmac(self.digest, normalized, salt, iterations)
        client_key = _hmac(self.digest, salted, b"Client Key")
        stored_key = hashlib.new(self.digest, client_key).digest()
        binding = base64.b64encode(self.GS2_HEADER.encode()).decode()
        without_proof = f"c={binding},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = _hmac(self.digest, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = _hmac(self.digest, salted, b"Server Key")
        self._server_signature = _hmac(self.digest, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """Check the server's signature (a server that does not know the password cannot make
        it).

        :raises SaslClientError: an error from the server, or a wrong signature.
        """
        text = server_final.decode(errors="replace")
        if text.startswith("e="):
            raise SaslClientError(f"SCRAM: the server answered {text[2:]!r}")
        try:
            told = base64.b64decode(text.removeprefix("v="), validate=True)
        except ValueError:
            raise SaslClientError("SCRAM: not a server-final message") from None
        if not text.startswith("v=") or not hmac.compare_digest(told, self._server_signature):
            raise SaslClientError("SCRAM: the server's signature does not match")
