"""TLS for SSL and SASL_SSL listeners from Kafka's PEM settings, and the principal of a client
certificate as Kafka names it.

Kafka's ``ssl.keystore.type=PEM`` gives the broker's key and certificate chain either as one
file (``ssl.keystore.location``, the key encrypted with ``ssl.key.password`` or not) or inline
(``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``); the CA certificates that client
certificates are checked against come from ``ssl.truststore.location`` or inline
``ssl.truststore.certificates``. ``ssl.client.auth``: ``required`` refuses a client without a
certificate the truststore vouches for, ``requested`` takes one if offered, ``none`` asks for
none.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable
from typing import Any

from coordkit.serve.connection import ANONYMOUS, KafkaPrincipal
from coordkit.serve.listeners.config import SecurityConfigError, SecurityConfigs

#: Python's names of a subject's attributes → the keywords of Java's
#: ``X500Principal.getName()`` (RFC 2253), which Kafka's default principal builder uses.
RFC2253_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(configs: SecurityConfigs, listener: str) -> ssl.SSLContext:
    """The TLS context of ``listener``'s connections.

    :raises SecurityConfigError: a setting is missing or a file does not load (named by its
        config, never with a secret's value).
    """

    def value(name: str) -> str | None:
        return configs.value(listener, name)

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    password = value("ssl.key.password") or value("ssl.keystore.password")
    location, chain, key = (
        value("ssl.keystore.location"),
        value("ssl.keystore.certificate.chain"),
        value("ssl.keystore.key"),
    )
    if location:
        _load(f"ssl.keystore.location={location}",
              lambda: context.load_cert_chain(location, password=password))  # fmt: skip
    elif chain and key:
        _load_inline(context, chain, key, password)
    else:
        raise SecurityConfigError(
            f"--config listener {listener}: TLS needs ssl.keystore.location (a PEM file of the "
            "key and its certificate chain), or ssl.keystore.certificate.chain and "
            "ssl.keystore.key"
        )
    client_auth = value("ssl.client.auth") or "none"
    context.verify_mode = _VERIFY[client_auth]
    truststore, inline = value("ssl.truststore.location"), value("ssl.truststore.certificates")
    if truststore:
        _load(f"ssl.truststore.location={truststore}",
              lambda: context.load_verify_locations(cafile=truststore))  # fmt: skip
    elif inline:
        _load("ssl.truststore.certificates", lambda: context.load_verify_locations(cadata=inline))
    elif client_auth != "none":
        raise SecurityConfigError(
            f"--config ssl.client.auth={client_auth}: listener {listener} has no truststore "
            "to check client certificates against (ssl.truststore.location)"
        )
    return context


def _load(what: str, call: Callable[[], None]) -> None:
    try:
        call()
    except FileNotFoundError as exc:
        raise SecurityConfigError(f"--config {what}: {exc.strerror}") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise SecurityConfigError(f"--config {what}: does not load ({reason})") from None


def _load_inline(context: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """Python loads keys from files only: the inline PEM goes through a file readable by this
    user alone, removed at once."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key.strip() + "\n" + chain.strip() + "\n")
        _load("ssl.keystore.certificate.chain and ssl.keystore.key",
              lambda: context.load_cert_chain(path, password=password))  # fmt: skip
    finally:
        os.unlink(path)


def certificate_principal(peercert: Any) -> KafkaPrincipal:
    """The principal of a verified client certificate (``ssl.SSLObject.getpeercert()``) as
    Kafka's default builder names it: ``User:`` and the subject in RFC 2253 (most specific
    attribute first: ``CN=client,OU=eng,O=example``); no certificate: ``User:ANONYMOUS``."""
    if not peercert or "subject" not in peercert:
        return ANONYMOUS
    parts = []
    for rdn in reversed(peercert["subject"]):
        parts.append(
            "+".join(f"{RFC2253_KEYWORDS.get(name, name)}={_escape(text)}" for name, text in rdn)
        )
    return KafkaPrincipal("User", ",".join(parts))


def _escape(text: str) -> str:
    """RFC 2253's escaping of an attribute value."""
    escaped = "".join("\\" + c if c in ',+"\\<>;' else c for c in text)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def client_context(configs: SecurityConfigs, listener: str) -> ssl.SSLContext:
    """The TLS context of this broker's own connections to other brokers' ``listener`` (the
    inter-broker one), as Kafka's client side of its ``SslFactory``: the peer's certificate is
    checked against ``ssl.truststore.*`` (none given: the system's CAs), its host name too unless
    ``ssl.endpoint.identification.algorithm`` is empty, and the broker's keystore, when it has
    one, is offered as its client certificate (for a listener with ``ssl.client.auth``).

    :raises SecurityConfigError: a file does not load (named by its config, never a secret).
    """

    def value(name: str) -> str | None:
        return configs.value(listener, name)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    truststore, inline = value("ssl.truststore.location"), value("ssl.truststore.certificates")
    if truststore:
        _load(f"ssl.truststore.location={truststore}",
              lambda: context.load_verify_locations(cafile=truststore))  # fmt: skip
    elif inline:
        _load("ssl.truststore.certificates", lambda: context.load_verify_locations(cadata=inline))
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    password = value("ssl.key.password") or value("ssl.keystore.password")
    location, chain, key = (
        value("ssl.keystore.location"),
        value("ssl.keystore.certificate.chain"),
        value("ssl.keystore.key"),
    )
    if location:
        _load(f"ssl.keystore.location={location}",
              lambda: context.load_cert_chain(location, password=password))  # fmt: skip
    elif chain and key:
        _load_inline(context, chain, key, password)
    # Kafka's default algorithm is https (the host name checked); an empty one checks none.
    algorithm = value("ssl.endpoint.identification.algorithm")
    context.check_hostname = algorithm is None or algorithm.strip() != ""
    return context
