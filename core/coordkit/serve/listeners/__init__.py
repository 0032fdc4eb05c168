"""Kafka's listeners on ``coordkit serve``: each broker listens on every listener of
``listeners`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), TLS from PEM files, SASL PLAIN and
SCRAM (credentials in ``/config/users/<user>`` as Kafka 3.9 writes them)."""

from coordkit.serve.listeners.config import (
    ListenerConfig,
    SecurityConfigError,
    SecurityConfigs,
    is_security_config,
    parse_security_configs,
)
from coordkit.serve.listeners.security import ListenerSecurity, listener_security

__all__ = [
    "ListenerConfig",
    "ListenerSecurity",
    "SecurityConfigError",
    "SecurityConfigs",
    "is_security_config",
    "listener_security",
    "parse_security_configs",
]
