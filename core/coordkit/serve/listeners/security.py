"""What one listener's connections need: its protocol, TLS context and SASL mechanisms (the
PLAIN users of its JAAS config, KIP-368's session lifetime), built once at the start from
:class:`SecurityConfigs`."""

from __future__ import annotations

import ssl
from collections.abc import Mapping

import attrs

from coordkit.serve.listeners.config import (
    LISTENER_PREFIX,
    PLAIN,
    PLAINTEXT,
    SASL_PLAINTEXT,
    SASL_SSL,
    SSL,
    ListenerConfig,
    SecurityConfigError,
    SecurityConfigs,
    mechanisms,
)
from coordkit.serve.listeners.plain import plain_users
from coordkit.serve.listeners.tls import server_context


@attrs.frozen
class ListenerSecurity:
    """A listener's security (Kafka's ``ChannelBuilder`` for it)."""

    name: str = PLAINTEXT
    protocol: str = PLAINTEXT
    ssl: ssl.SSLContext | None = None
    #: Kafka's ``sasl.enabled.mechanisms`` of the listener, in its order.
    mechanisms: tuple[str, ...] = ()
    #: PLAIN's users and passwords (its JAAS config).
    plain_users: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    #: KIP-368's ``connections.max.reauth.ms`` of each mechanism (absent or 0: a session does
    #: not expire and is not re-authenticated).
    max_reauth_ms: Mapping[str, int] = attrs.field(factory=dict)

    @property
    def sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)


#: KIP-368: how long an authenticated SASL session lasts before the client must re-authenticate.
MAX_REAUTH_CONFIG = "connections.max.reauth.ms"
_INT64_MAX = 2**63 - 1


def max_reauth_ms(configs: SecurityConfigs, listener: str, mechanism: str) -> int:
    """Kafka's ``connections.max.reauth.ms`` for ``mechanism`` on ``listener``: its
    ``listener.name.<listener>.<mechanism>.`` value, else the listener's, else the broker's (0).

    :raises SecurityConfigError: a value that is not a long of at least 0.
    """
    prefix = f"{LISTENER_PREFIX}{listener.lower()}."
    names = (f"{prefix}{mechanism.lower()}.{MAX_REAUTH_CONFIG}", f"{prefix}{MAX_REAUTH_CONFIG}",
             MAX_REAUTH_CONFIG)  # fmt: skip
    name = next((n for n in names if n in configs.values), None)
    if name is None:
        return 0
    text = configs.values[name]
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if not 0 <= value <= _INT64_MAX:
        raise SecurityConfigError(
            f"--config {name}={text}: not a number of milliseconds (a long, 0 or more)"
        )
    return value


def listener_security(configs: SecurityConfigs, listener: ListenerConfig) -> ListenerSecurity:
    """``listener``'s security, its files read.

    :raises SecurityConfigError: a setting is missing or does not load.
    """
    name = listener.name
    context = server_context(configs, name) if listener.protocol in (SSL, SASL_SSL) else None
    enabled = mechanisms(configs, name) if listener.protocol in (SASL_PLAINTEXT, SASL_SSL) else ()
    users: dict[str, str] = {}
    if PLAIN in enabled:
        config_name = f"listener.name.{name.lower()}.plain.sasl.jaas.config"
        jaas = configs.values.get(config_name)
        if jaas is None:
            raise SecurityConfigError(
                f"--config {config_name}: listener {name} enables PLAIN but has no JAAS config "
                'of its users (PlainLoginModule required user_NAME="PASSWORD";)'
            )
        users = plain_users(config_name, jaas)
    reauth = {m: max_reauth_ms(configs, name, m) for m in enabled}
    return ListenerSecurity(name, listener.protocol, context, enabled, users, reauth)
