"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ``ScramSaslServer``, with
credentials in Kafka 3.9's ZooKeeper layout.

A user's credentials are ``/config/users/<user>`` (the name URL-encoded as Kafka's
``Sanitizer``), ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,
server_key=...,iterations=4096"}}``; each write is announced by a ``/config/changes`` notification
naming ``users/<user>``, as Kafka's ``AdminZkClient`` does. The server reads the node at each
authentication, so a user created or changed by Kafka's tools (or another coordkit process)
logs in at once; Kafka's brokers follow the notifications.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import unicodedata

import attrs

from coordkit.engine.quotas import sanitize
from coordkit.errors import NoNodeError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicConfig
from coordkit.store import MetadataStore

USERS = "users"
CONFIG_USERS = "/config/users"
#: Kafka's ``ScramMechanism``: hash, and the fewest iterations each accepts.
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramError(Exception):
    """The exchange failed; ``message`` is what the client is told (Kafka's: the generic
    invalid-credentials line unless Kafka tells more)."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or "")
        self.message = message


@attrs.frozen
class ScramCredential:
    """Kafka's ``ScramCredential``: what the server keeps instead of the password."""

    salt: bytes = attrs.field(repr=False)
    stored_key: bytes = attrs.field(repr=False)
    server_key: bytes = attrs.field(repr=False)
    iterations: int

    def to_text(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString``."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")  # fmt: skip

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """Kafka's ``credentialFromString``.

        :raises ValueError: not four ``key=value`` fields of salt, keys and iterations.
        """
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        if set(fields) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError("not salt, stored_key, server_key and iterations")
        decode = base64.b64decode
        return cls(decode(fields["salt"]), decode(fields["stored_key"]),
                   decode(fields["server_key"]), int(fields["iterations"]))  # fmt: skip


def _hmac(digest: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, digest).digest()


def new_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """The credential of ``password`` (Kafka's ``ScramFormatter.generateCredential``)."""
    digest = HASHES[mechanism]
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(digest, _normalize(password), salt, iterations)
    client_key = _hmac(digest, salted, b"Client Key")
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = _hmac(digest, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def _normalize(text: str) -> bytes:
    return unicodedata.normalize("NFKC", text).encode()


def user_path(user: str) -> str:
    """``/config/users/<user>``, the name as Kafka's ``Sanitizer.sanitize`` writes it (``~`` as
    ``%7E``, as Java's URLEncoder)."""
    return f"{CONFIG_USERS}/{sanitize(user)}"


def read_user_configs(store: MetadataStore, user: str) -> dict[str, str]:
    """``user``'s config node (``{}``: none)."""
    path = user_path(user)
    try:
        data, _ = store.get(path)
    except NoNodeError:
        return {}
    return dict(layout.TOPIC_CONFIG.decode(data, path).config)


def credential_iterations(store: MetadataStore, user: str) -> dict[str, int]:
    """``user``'s SCRAM mechanisms and each one's iterations, in Kafka's order (a credential
    that does not parse is left out), as DescribeUserScramCredentials and kafka-configs tell
    them: never more of a credential than that."""
    config = read_user_configs(store, user)
    found: dict[str, int] = {}
    for mechanism in HASHES:
        if mechanism in config:
            try:
                found[mechanism] = ScramCredential.from_text(config[mechanism]).iterations
            except ValueError:
                continue
    return found


def read_credential(store: MetadataStore, user: str, mechanism: str) -> ScramCredential | None:
    """``user``'s credential for ``mechanism`` (``None``: none, or one that does not parse)."""
    text = read_user_configs(store, user).get(mechanism)
    if text is None:
        return None
    try:
        return ScramCredential.from_text(text)
    except ValueError:
        return None


def write_user_configs(store: MetadataStore, user: str, config: dict[str, str]) -> None:
    """Replace ``user``'s config node and announce it (``users/<user>``), as Kafka 3.9's
    ``AdminZkClient.changeConfigs`` does."""
    path = user_path(user)
    data = layout.TOPIC_CONFIG.encode(TopicConfig(config=dict(config)))
    try:
        store.set(path, data)
    except NoNodeError:
        store.create(path, data, make_parents=True)
    store.create(
        layout.CONFIG_CHANGE_PREFIX,
        layout.encode_config_change(f"{USERS}/{sanitize(user)}"),
        sequential=True,
        make_parents=True,
    )


#: Kafka's ``ScramMessages.ClientFirstMessage`` (gs2 header ``n,,`` or ``n,a=<authzid>,``).
_CLIENT_FIRST = re.compile(
    r"^n,(?:a=(?P<authzid>[^,]*))?,(?:m=[^,]*,)?n=(?P<name>[^,]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    r"(?P<extensions>(?:,[A-Za-z]+=[^,]*)*)$"
)
_CLIENT_FINAL = re.compile(
    r"^c=(?P<binding>[^,]*),r=(?P<nonce>[^,]*)(?:,[A-Za-z]+=[^,]*)*,p=(?P<proof>[^,]*)$"
)


def _username(sasl_name: str) -> str:
    """RFC 5802's ``saslname``: ``=2C`` is a comma, ``=3D`` an equals sign."""
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange (Kafka's ``ScramSaslServer``): client-first → server-first,
    client-final → server-final; :attr:`user` once complete."""

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self.digest = HASHES[mechanism]
        self.user: str | None = None
        self.complete = False
        self._first_bare = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None

    def first(self, token: bytes, credential: ScramCredential | None, username: str) -> bytes:
        """The server-first message for client-first ``token``, with ``username``'s
        ``credential`` (looked up by the caller from :meth:`username_of`)."""
        match = _CLIENT_FIRST.match(token.decode(errors="replace"))
        assert match is not None  # username_of checked it
        if credential is None:
            raise ScramError()
        authzid = match.group("authzid")
        if authzid and authzid != username:
            raise ScramError("Authentication failed: Client requested an authorization id that "
                             "is different from username")  # fmt: skip
        if credential.iterations < MIN_ITERATIONS:
            raise ScramError()
        self._credential = credential
        self.user = username
        nonce = match.group("nonce") + base64.b64encode(secrets.token_bytes(24)).decode()
        salt = base64.b64encode(credential.salt).decode()
        self._first_bare = token.decode().split(",", 2)[2]
        self._server_first = f"r={nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    @staticmethod
    def username_of(token: bytes) -> str:
        """The user a client-first message names.

        :raises ScramError: the message is not a client-first message.
        """
        match = _CLIENT_FIRST.match(token.decode(errors="replace"))
        if match is None:
            raise ScramError()
        return _username(match.group("name"))

    def final(self, token: bytes) -> bytes:
        """The server-final message (its signature) for client-final ``token``."""
        credential = self._credential
        match = _CLIENT_FINAL.match(token.decode(errors="replace"))
        if credential is None or match is None:
            raise ScramError()
        server_nonce = self._server_first.split(",", 1)[0][2:]
        if match.group("nonce") != server_nonce:
            raise ScramError()
        without_proof = token.decode().rsplit(",p=", 1)[0]
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(match.group("proof"), validate=True)
        except ValueError:
            raise ScramError() from None
        signature = _hmac(self.digest, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(),
                                   credential.stored_key):  # fmt: skip
            raise ScramError()
        server_signature = _hmac(self.digest, credential.server_key, auth_message)
        self.complete = True
        self._credential = None
        return b"v=" + base64.b64encode(server_signature)
