"""SASL PLAIN (RFC 4616) as Kafka's ``PlainSaslServer``, with the users of Kafka's JAAS config
(``listener.name.<l>.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.
PlainLoginModule required user_alice="alice-secret";``: one ``user_<name>`` option per user)."""

from __future__ import annotations

import hmac
import re

from coordkit.serve.listeners.config import SecurityConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


class PlainError(Exception):
    """Authentication failed; the message is Kafka's (it names no secret)."""


def jaas_options(config_name: str, text: str) -> tuple[str, dict[str, str]]:
    """The login module and options of a one-module JAAS config (Kafka's ``JaasConfig``).

    :raises SecurityConfigError: it does not parse (named by ``config_name`` only: it holds
        passwords).
    """
    head = re.match(r"\s*([A-Za-z0-9_.$]+)\s+([a-z]+)", text)
    if head is None or head.group(2) not in _FLAGS:
        raise SecurityConfigError(
            f"--config {config_name}: not a JAAS config (LoginModuleClass required "
            'key="value" ...;)'
        )
    options: dict[str, str] = {}
    rest = text[head.end() :]
    while True:
        match = _OPTION.match(rest)
        if match is None:
            break
        quoted = match.group(2)
        options[match.group(1)] = (
            re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else match.group(3)
        )
        rest = rest[match.end() :]
    if rest.strip() != ";":
        raise SecurityConfigError(
            f"--config {config_name}: not a JAAS config (it must end with one ';' after the "
            "options)"
        )
    return head.group(1), options


def plain_users(config_name: str, text: str) -> dict[str, str]:
    """User → password of a PlainLoginModule JAAS config."""
    module, options = jaas_options(config_name, text)
    if module != PLAIN_LOGIN_MODULE:
        raise SecurityConfigError(f"--config {config_name}: the PLAIN mechanism needs "
                                  f"{PLAIN_LOGIN_MODULE}")  # fmt: skip
    return {name[5:]: value for name, value in options.items() if name.startswith("user_")}


def authenticate_plain(users: dict[str, str], token: bytes) -> str:
    """The user a PLAIN ``token`` (``authzid NUL user NUL password``) authenticates.

    :raises PlainError: Kafka's message for the failure.
    """
    parts = token.decode(errors="replace").split("\x00")
    if len(parts) != 3:
        raise PlainError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
    authzid, user, password = parts
    if not user:
        raise PlainError("Authentication failed: username not specified")
    if not password:
        raise PlainError("Authentication failed: password not specified")
    expected = users.get(user)
    if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
        raise PlainError("Authentication failed: Invalid username or password")
    if authzid and authzid != user:
        raise PlainError("Authentication failed: Client requested an authorization id that is "
                         "different from username")  # fmt: skip
    return user
