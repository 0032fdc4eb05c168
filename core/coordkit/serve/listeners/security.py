"""What one listener's connections need: its protocol, TLS context and SASL mechanisms (the
PLAIN users of its JAAS config), built once at the start from :class:`SecurityConfigs`."""

from __future__ import annotations

import ssl
from collections.abc import Mapping

import attrs

from coordkit.serve.listeners.config import (
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

    @property
    def sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)


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
    return ListenerSecurity(name, listener.protocol, context, enabled, users)
