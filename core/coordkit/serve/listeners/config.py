"""Kafka's listener and security broker configs, as ``coordkit serve --config`` takes them.

``listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9093`` names each listener (a listener's name
is its security protocol, or any name that ``listener.security.protocol.map`` maps to one), its
host (empty: every interface) and port; with several brokers in one process, broker ``i`` of
the process listens on each port plus ``i`` (0: any free port). ``advertised.listeners`` gives
the host and port registered in ``/brokers/ids/N`` and answered in Metadata (Kafka's default:
the listener's own). Every ``ssl.*`` and ``sasl.*`` setting may be given for one listener with
Kafka's prefix ``listener.name.<listener, lower case>.``, which wins over the unprefixed one.

Secrets (passwords, private keys, JAAS configs) never appear in a message: a bad one is named by
its config only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import attrs

from coordkit.serve.binding import Address, ServeError

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)

LISTENER_PREFIX = "listener.name."

#: The security configs (Kafka's names) taken, each either alone or under a listener's prefix.
SECURITY_CONFIGS = frozenset(
    {
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.client.auth",
        "ssl.endpoint.identification.algorithm",
        "connections.max.reauth.ms",
    }
)
#: Configs whose values are secrets: Kafka's PASSWORD type (and JAAS configs, which hold them).
SECRET_CONFIGS = frozenset(
    {
        "sasl.jaas.config",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.truststore.password",
    }
)
CLIENT_AUTH = ("none", "requested", "required")
_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/\[\]]*):([0-9]+)$")


class SecurityConfigError(ServeError):
    """A listener or security config is missing, contradicts another or has a bad value."""


def is_security_config(name: str) -> bool:
    """Whether ``name`` is a listener or security config (``listener.name.<l>.x`` included)."""
    return name in SECURITY_CONFIGS or name.startswith(LISTENER_PREFIX)


def is_secret(name: str) -> bool:
    """Whether ``name``'s value is a secret (never shown): a password, a key, a JAAS config."""
    return name.rsplit(".sasl.", 1)[-1] in {"jaas.config"} or any(
        name == secret or name.endswith("." + secret) for secret in SECRET_CONFIGS
    )


@attrs.frozen
class ListenerConfig:
    """One of ``listeners``: its name, security protocol, where it binds and what it
    advertises (``port`` 0: any free port)."""

    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None

    def advertised(self, bound: Address) -> Address:
        """The address registered for this listener when it is bound at ``bound``."""
        return Address(self.advertised_host or bound.host, self.advertised_port or bound.port)


@attrs.frozen
class SecurityConfigs:
    """The listeners and the security configs given (values as given; secrets kept out of
    ``repr``)."""

    listeners: tuple[ListenerConfig, ...]
    inter_broker_listener: str
    values: Mapping[str, str] = attrs.field(factory=dict, repr=False)

    def value(self, listener: str, name: str, default: str | None = None) -> str | None:
        """``name`` for ``listener``: its prefixed value, else the unprefixed one."""
        prefixed = f"{LISTENER_PREFIX}{listener.lower()}.{name}"
        return self.values.get(prefixed, self.values.get(name, default))

    def listener(self, name: str) -> ListenerConfig:
        return next(lsn for lsn in self.listeners if lsn.name == name)

    def authenticates(self, listener: ListenerConfig) -> bool:
        """Whether ``listener`` authenticates its clients (SASL, or TLS client certificates
        required)."""
        return listener.protocol in (SASL_PLAINTEXT, SASL_SSL) or (
            listener.protocol == SSL and self.value(listener.name, "ssl.client.auth") == "required"
        )


def _shown(name: str, text: str) -> str:
    return f"{name}=<hidden>" if is_secret(name) else f"{name}={text}"


def _listeners(name: str, text: str) -> list[tuple[str, str, int]]:
    found = []
    for item in (part.strip() for part in text.split(",")):
        match = _LISTENER.match(item)
        if match is None:
            raise SecurityConfigError(
                f"--config {name}={text}: {item!r} is not NAME://HOST:PORT (e.g. SASL_SSL://:9093)"
            )
        host = match.group(2).strip("[]")
        port = int(match.group(3))
        if port > 65_535:
            raise SecurityConfigError(f"--config {name}={text}: port {port} is beyond 65535")
        found.append((match.group(1), host, port))
    names = [n for n, _, _ in found]
    if len(set(names)) != len(names):
        raise SecurityConfigError(f"--config {name}={text}: a listener name is given twice")
    return found


def _protocol_map(text: str) -> dict[str, str]:
    mapping = {}
    for item in (part.strip() for part in text.split(",") if part.strip()):
        listener, sep, protocol = item.partition(":")
        if not sep or protocol.strip() not in PROTOCOLS:
            raise SecurityConfigError(
                f"--config listener.security.protocol.map: {item!r} is not NAME:PROTOCOL "
                f"(a protocol of {', '.join(PROTOCOLS)})"
            )
        mapping[listener.strip()] = protocol.strip()
    return mapping


def parse_security_configs(
    words: Iterable[tuple[str, str]], host: str, port: int
) -> SecurityConfigs:
    """The listeners and security configs of ``words`` (``(name, value)`` pairs, the last for
    a name winning); without ``listeners``, one PLAINTEXT listener on ``host:port`` (the
    ``--host`` and ``--port`` options).

    :raises SecurityConfigError: one line naming the config and what is wrong (never a
        secret's value).
    """
    values = dict(words)
    for name, text in values.items():
        if not is_security_config(name):
            raise SecurityConfigError(f"--config {name}: not a listener or security config")
        if name.endswith("ssl.client.auth") and text not in CLIENT_AUTH:
            raise SecurityConfigError(
                f"--config {_shown(name, text)}: not one of {', '.join(CLIENT_AUTH)}"
            )
        if name.endswith("sasl.enabled.mechanisms"):
            for mechanism in (m.strip() for m in text.split(",") if m.strip()):
                if mechanism not in MECHANISMS:
                    raise SecurityConfigError(
                        f"--config {name}={text}: {mechanism} is not served (coordkit serves "
                        f"{', '.join(MECHANISMS)})"
                    )
        for typed in ("ssl.keystore.type", "ssl.truststore.type"):
            if name.endswith(typed) and text.upper() != "PEM":
                raise SecurityConfigError(
                    f"--config {name}={text}: coordkit serve reads PEM only (Kafka's "
                    "ssl.keystore.type=PEM)"
                )
    mapping = {p: p for p in PROTOCOLS}
    if "listener.security.protocol.map" in values:
        mapping = _protocol_map(values["listener.security.protocol.map"])
    given = _listeners("listeners", values["listeners"]) if "listeners" in values else None
    listed = given if given is not None else [(PLAINTEXT, host, port)]
    advertised: dict[str, tuple[str | None, int | None]] = {}
    if "advertised.listeners" in values:
        for name, told_host, told_port in _listeners(
            "advertised.listeners", values["advertised.listeners"]
        ):
            advertised[name] = (told_host, told_port)
    listeners = []
    for name, l_host, l_port in listed:
        protocol = mapping.get(name)
        if protocol is None:
            raise SecurityConfigError(
                f"--config listeners: listener {name} has no security protocol (name it after "
                "one, or map it in listener.security.protocol.map)"
            )
        if protocol != name:
            # The registration's listener_security_protocol_map names each listener after its
            # protocol (coordkit.kafka.layout): other names are not registered right yet.
            raise SecurityConfigError(
                f"--config listeners: listener {name} is not named after its security protocol "
                f"{protocol} (coordkit serve names each listener after its protocol so far)"
            )
        a_host, a_port = advertised.pop(name, (None, None))
        listeners.append(
            ListenerConfig(name, protocol, l_host, l_port, a_host or None, a_port or None)
        )
    if advertised:
        raise SecurityConfigError(
            f"--config advertised.listeners: {', '.join(advertised)} is not one of listeners"
        )
    inter_broker = values.get("inter.broker.listener.name")
    if inter_broker is None:
        protocol = values.get("security.inter.broker.protocol", PLAINTEXT)
        inter_broker = next((lsn.name for lsn in listeners if lsn.protocol == protocol), "")
        if not inter_broker:
            raise SecurityConfigError(
                f"--config security.inter.broker.protocol={protocol}: no listener of that "
                "protocol (set inter.broker.listener.name to one of listeners)"
            )
    elif inter_broker not in {lsn.name for lsn in listeners}:
        raise SecurityConfigError(
            f"--config inter.broker.listener.name={inter_broker}: not one of listeners"
        )
    configs = SecurityConfigs(tuple(listeners), inter_broker, values)
    for lsn in listeners:
        if lsn.protocol in (SASL_PLAINTEXT, SASL_SSL) and not mechanisms(configs, lsn.name):
            raise SecurityConfigError(
                f"--config sasl.enabled.mechanisms: listener {lsn.name} enables no mechanism "
                f"coordkit serves (Kafka's default GSSAPI is not; give {', '.join(MECHANISMS)})"
            )
    inter_broker_protocol = configs.listener(inter_broker).protocol
    if inter_broker_protocol in (SASL_PLAINTEXT, SASL_SSL):
        # Kafka's check at its start (its default GSSAPI is not served here).
        login = values.get("sasl.mechanism.inter.broker.protocol")
        if login not in mechanisms(configs, inter_broker):
            raise SecurityConfigError(
                f"--config sasl.mechanism.inter.broker.protocol={login or ''}: the "
                f"inter-broker listener {inter_broker} is {inter_broker_protocol}; give one of "
                f"its sasl.enabled.mechanisms ({', '.join(mechanisms(configs, inter_broker))}) "
                "for the brokers' own logins"
            )
    return configs


def mechanisms(configs: SecurityConfigs, listener: str) -> tuple[str, ...]:
    """The SASL mechanisms ``listener`` enables (Kafka's ``sasl.enabled.mechanisms``)."""
    text = configs.value(listener, "sasl.enabled.mechanisms", "") or ""
    return tuple(m.strip() for m in text.split(",") if m.strip() in MECHANISMS)
