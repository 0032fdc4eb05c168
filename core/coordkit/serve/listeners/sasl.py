"""A SASL listener's connection until it is authenticated, as Kafka's ``SaslServerAuthenticator``.

The first request may be ApiVersions (answered once) or SaslHandshake; then SaslHandshake naming
an enabled mechanism; then SaslAuthenticate frames carrying the mechanism's tokens (or, after a
v0 handshake, the tokens alone, each size-prefixed: Kafka's raw mode). Anything else before the
exchange completes closes the connection, as Kafka does; so does a mechanism not enabled
(answered UNSUPPORTED_SASL_MECHANISM with the enabled ones first) and a failed exchange
(answered SASL_AUTHENTICATION_FAILED with Kafka's message first). Once complete, the connection's
principal is ``User:<name>`` and its requests go to the dispatcher.

KIP-368 re-authentication, as Kafka's ``SaslServerAuthenticator``, ``KafkaChannel`` and
``SocketServer``: with ``connections.max.reauth.ms`` above 0 for the mechanism, a completed
exchange answers that lifetime (``session_lifetime_ms``); a SaslHandshake on the authenticated
connection then begins a new exchange (at most one a second) which must end with the same
principal ("Cannot change principals ...", SASL_AUTHENTICATION_FAILED, closed) and the same
mechanism (another: the handshake is answered, the next request closes the connection); and a
request other than that handshake once the session is over closes the connection unanswered.

Otherwise, once authenticated, SaslHandshake and SaslAuthenticate reach their handlers here
(:data:`SASL_APIS`), which answer ILLEGAL_SASL_STATE as Kafka's ``KafkaApis`` does; a PLAINTEXT or
SSL listener answers them so from the start.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from coordkit.protocol import APIS, KafkaCodec, Request, messages
from coordkit.serve.classes import nested
from coordkit.serve.connection import KafkaPrincipal, principal
from coordkit.serve.context import BrokerContext
from coordkit.serve.listeners.config import PLAIN
from coordkit.serve.listeners.plain import PlainError, authenticate_plain
from coordkit.serve.listeners.scram import HASHES, ScramError, ScramServer, read_credential
from coordkit.serve.listeners.scram_users import SCRAM_USER_APIS
from coordkit.serve.listeners.security import ListenerSecurity

log = logging.getLogger("coordkit.serve")

Handler = Callable[[BrokerContext, Request], Awaitable[Any]]

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

API_VERSIONS = APIS["ApiVersions"].key
SASL_HANDSHAKE = APIS["SaslHandshake"].key
SASL_AUTHENTICATE = APIS["SaslAuthenticate"].key


class AuthenticationClosedError(Exception):
    """The connection closes (after :attr:`response`, if any): Kafka's ``IllegalSaslState``,
    an unsupported mechanism or failed credentials. The message is for the broker's log and
    holds no secret."""

    def __init__(self, message: str, response: bytes | None = None) -> None:
        super().__init__(message)
        self.response = response


#: Kafka's ``KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS``.
MIN_REAUTH_INTERVAL_SECONDS = 1.0


def failure_message(mechanism: str, reauthenticating: bool = False) -> str:
    """Kafka's answer to invalid credentials (it tells no more: not whether the user exists)."""
    during = "re-authentication" if reauthenticating else "authentication"
    return (
        f"Authentication failed during {during} due to invalid credentials with SASL "
        f"mechanism {mechanism}"
    )


class SaslAuthenticator:
    """One connection's SASL exchange on listener ``security`` of broker ``ctx``."""

    def __init__(
        self,
        ctx: BrokerContext,
        codec: KafkaCodec,
        security: ListenerSecurity,
        api_versions: Callable[[bytes], Awaitable[bytes | None]],
    ) -> None:
        self.ctx = ctx
        self.codec = codec
        self.security = security
        self._api_versions = api_versions
        self._state = "HANDSHAKE_OR_VERSIONS_REQUEST"
        self._mechanism = ""
        self._raw = False
        self._scram: ScramServer | None = None
        self.complete = False
        #: KIP-368: when the session ends (``time.monotonic``; ``None``: never), when the last
        #: re-authentication began, and the mechanism and principal being re-authenticated.
        self._session_end: float | None = None
        self._last_reauthentication = 0.0
        self._reauthenticating: tuple[str, KafkaPrincipal] | None = None

    def takes(self, frame: bytes) -> bool:
        """Whether ``frame`` is the authenticator's to answer: every frame until the exchange
        completes; then a SaslHandshake beginning a re-authentication (a session with a
        lifetime, at most one a second: Kafka's ``KafkaChannel.maybeBeginServerReauthentication``).

        :raises AuthenticationClosedError: the session is over and ``frame`` does not begin a
            re-authentication (Kafka's ``SocketServer`` closes the connection, answering nothing).
        """
        if not self.complete:
            return True
        now = time.monotonic()
        handshake = len(frame) >= 2 and struct.unpack(">h", frame[:2])[0] == SASL_HANDSHAKE
        if (
            handshake
            and self._session_end is not None
            and (
                not self._last_reauthentication
                or now - self._last_reauthentication >= MIN_REAUTH_INTERVAL_SECONDS
            )
        ):
            self._last_reauthentication = now
            self._reauthenticating = (self._mechanism, principal.get())
            self.complete, self._state, self._scram = False, "REAUTH_PROCESS_HANDSHAKE", None
            return True
        if self._session_end is not None and now > self._session_end:
            raise AuthenticationClosedError(
                "the SASL session is over (connections.max.reauth.ms) and the client did not "
                "re-authenticate"
            )
        return False

    async def answer(self, frame: bytes) -> bytes | None:
        """The answer to ``frame`` (a size-less frame; raw mode: a token).

        :raises AuthenticationClosedError: close the connection (after its response).
        """
        if self._state == "REAUTH_BAD_MECHANISM":
            assert self._reauthenticating is not None
            raise AuthenticationClosedError(
                f"SASL mechanism '{self._mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self._reauthenticating[0]}'"
            )
        if self._state == "AUTHENTICATE" and self._raw:
            token = await self._evaluate(frame)
            return struct.pack(">i", len(token)) + token
        if len(frame) < 4:
            raise AuthenticationClosedError("a request too short for a header during SASL")
        (api_key,) = struct.unpack(">h", frame[:2])
        if self._state == "AUTHENTICATE":
            request = self.codec.decode_request(frame)
            if api_key != SASL_AUTHENTICATE:
                # Kafka answers the request's error response first, then closes.
                raise AuthenticationClosedError(
                    f"Unexpected Kafka request of type {_name(api_key)} during SASL "
                    "authentication.",
                    self._encode(request, _illegal_state_response(request)),
                )
            return await self._authenticate(request)
        if api_key == API_VERSIONS and self._state == "HANDSHAKE_OR_VERSIONS_REQUEST":
            self._state = "HANDSHAKE_REQUEST"
            return await self._api_versions(frame)
        if api_key != SASL_HANDSHAKE:
            raise AuthenticationClosedError(
                f"Unexpected Kafka request of type {_name(api_key)} during SASL handshake."
            )
        request = self.codec.decode_request(frame)
        mechanism = request.body.mechanism
        enabled = list(self.security.mechanisms)
        if mechanism not in enabled:
            response = messages.SaslHandshakeResponse(
                error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
            )
            raise AuthenticationClosedError(
                f"Unsupported SASL mechanism {mechanism}", self._encode(request, response)
            )
        self._mechanism = mechanism
        self._raw = request.version == 0
        self._state = "AUTHENTICATE"
        if self._reauthenticating is not None and mechanism != self._reauthenticating[0]:
            self._state = "REAUTH_BAD_MECHANISM"  # answered; the next request closes
        if mechanism in HASHES:
            self._scram = ScramServer(mechanism)
        response = messages.SaslHandshakeResponse(error_code=0, mechanisms=enabled)
        return self._encode(request, response)

    async def _authenticate(self, request: Request) -> bytes:
        Response = messages.SaslAuthenticateResponse
        try:
            token = await self._evaluate(request.body.auth_bytes)
        except AuthenticationClosedError as exc:
            response = Response(error_code=SASL_AUTHENTICATION_FAILED, error_message=str(exc),
                                auth_bytes=b"", session_lifetime_ms=0)  # fmt: skip
            raise AuthenticationClosedError(str(exc), self._encode(request, response)) from None
        # Kafka leaves the error message at its default: empty, not null.
        lifetime = self._session_lifetime_ms() if self.complete else 0
        return self._encode(request, Response(error_code=0, error_message="", auth_bytes=token,
                                              session_lifetime_ms=lifetime))  # fmt: skip

    def _session_lifetime_ms(self) -> int:
        """Kafka's ``calcCompletionTimesAndReturnSessionLifetimeMs`` (credentials here never
        expire): the mechanism's ``connections.max.reauth.ms``; the session ends that long
        after now."""
        lifetime = self.security.max_reauth_ms.get(self._mechanism, 0)
        self._session_end = time.monotonic() + lifetime / 1000 if lifetime > 0 else None
        return lifetime

    async def _evaluate(self, token: bytes) -> bytes:
        """The mechanism's answer to ``token``; on completion the principal is set.

        :raises AuthenticationClosedError: the credentials are refused (Kafka's message).
        """
        mechanism = self._mechanism
        if mechanism == PLAIN:
            try:
                user = authenticate_plain(dict(self.security.plain_users), token)
            except PlainError as exc:
                raise AuthenticationClosedError(str(exc)) from None
            self._done(user)
            if self._raw:
                self._session_lifetime_ms()  # v0's tokens carry no lifetime; the session has one
            return b""
        scram = self._scram
        assert scram is not None
        try:
            if scram.user is None:
                user = scram.username_of(token)
                credential = await self.ctx.blocking(
                    lambda: read_credential(self.ctx.broker.store, user, mechanism)
                )
                return scram.first(token, credential, user)
            answer = scram.final(token)
        except ScramError as exc:
            raise AuthenticationClosedError(
                exc.message or failure_message(mechanism, self._reauthenticating is not None)
            ) from None
        assert scram.user is not None
        self._done(scram.user)
        if self._raw:
            self._session_lifetime_ms()
        return answer

    def _done(self, user: str) -> None:
        """The exchange succeeded for ``user``.

        :raises AuthenticationClosedError: a re-authentication as another principal.
        """
        authenticated = KafkaPrincipal("User", user)
        if self._reauthenticating is not None:
            before = self._reauthenticating[1]
            if authenticated != before:
                raise AuthenticationClosedError(
                    "Cannot change principals during re-authentication from "
                    f"{before.principal_type}.{before.name}: {authenticated.principal_type}."
                    f"{authenticated.name}"
                )
            self._reauthenticating = None
        self.complete = True
        principal.set(authenticated)
        log.debug("broker %s: authenticated User:%s with %s", self.ctx.broker_id, user,
                  self._mechanism)  # fmt: skip

    def _encode(self, request: Request, response: Any) -> bytes:
        return self.codec.encode_response(
            response, version=request.version, correlation_id=request.correlation_id
        )


def _illegal_state_response(request: Request) -> Any:
    """Kafka's ``getErrorResponse`` of ``request`` for ILLEGAL_SASL_STATE: Metadata's names each
    topic asked with the error; other apis' carry it as their top-level error code."""
    response_class = getattr(messages, f"{request.api.name}Response")
    if request.api.name == "Metadata":
        Topic = nested(response_class, "MetadataResponseTopic")
        topics = [
            Topic(name=t.name or "", topic_id=t.topic_id, error_code=ILLEGAL_SASL_STATE,
                  is_internal=False, partitions=[])
            for t in request.body.topics or []
        ]  # fmt: skip
        return response_class(throttle_time_ms=0, topics=topics)
    response = response_class()
    if hasattr(response, "error_code"):
        response.error_code = ILLEGAL_SASL_STATE
    return response


def _name(api_key: int) -> str:
    """Kafka's ``ApiKeys`` constant name (``METADATA``, ``FIND_COORDINATOR``)."""
    for api in APIS.values():
        if api.key == api_key:
            return "".join("_" + c if c.isupper() and i else c for i, c in
                           enumerate(api.name)).upper()  # fmt: skip
    return str(api_key)


async def handle_sasl_handshake(ctx: BrokerContext, request: Request) -> Any:
    """Kafka's ``KafkaApis.handleSaslHandshakeRequest``: outside the exchange, ILLEGAL_SASL_STATE."""
    return messages.SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=[])


async def handle_sasl_authenticate(ctx: BrokerContext, request: Request) -> Any:
    """Kafka's ``KafkaApis.handleSaslAuthenticateRequest``."""
    return messages.SaslAuthenticateResponse(
        error_code=ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )


SASL_APIS: dict[str, tuple[int, int, Handler]] = {
    "SaslHandshake": (0, 1, handle_sasl_handshake),
    "SaslAuthenticate": (0, 2, handle_sasl_authenticate),
    **SCRAM_USER_APIS,  # AlterUserScramCredentials, DescribeUserScramCredentials
}
