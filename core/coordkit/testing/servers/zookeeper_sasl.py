"""SASL for the private ZooKeeper servers: DIGEST-MD5 users, as a Kafka cluster's ZooKeeper has them.

A server started with ``sasl_users`` (:class:`~coordkit.testing.servers.zookeeper_server.
StandaloneZooKeeper`) loads ZooKeeper's ``SASLAuthenticationProvider`` (``authProvider.1``) and a
JAAS file whose ``Server`` section lists the users (``user_NAME="password"`` of
``DigestLoginModule``), given to the JVM by ``-Djava.security.auth.login.config``. Clients
authenticate with a ``Client`` section (:func:`write_client_jaas`): Kafka's brokers through the
same JVM property, coordkit through ``zookeeper://host/chroot?jaas=FILE``. A client that does not
authenticate is still served (ZooKeeper's default), with the rights ``world:anyone`` has.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
JAAS_PROPERTY = "java.security.auth.login.config"


def _quoted(value: str) -> str:
    if any(c in value for c in '"\\\n'):
        raise ValueError("a JAAS value here may hold no quote, backslash or newline")
    return f'"{value}"'


def write_server_jaas(path: Path, users: Mapping[str, str]) -> Path:
    """A JAAS file with a ``Server`` section admitting ``users`` (name: password)."""
    if not users:
        raise ValueError("give at least one SASL user")
    entries = "\n".join(f"    user_{name}={_quoted(secret)}" for name, secret in users.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"Server {{\n  {DIGEST_LOGIN_MODULE} required\n{entries};\n}};\n")
    path.chmod(0o600)
    return path


def write_client_jaas(path: Path, username: str, password: str, section: str = "Client") -> Path:
    """A JAAS file with a ``section`` (``Client``: ZooKeeper's default) logging in as
    ``username``, readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"{section} {{\n  {DIGEST_LOGIN_MODULE} required\n"
        f"    username={_quoted(username)}\n    password={_quoted(password)};\n}};\n"
    )
    path.chmod(0o600)
    return path


def sasl_server_options(jaas: Path) -> tuple[dict[str, str], tuple[str, ...]]:
    """The ``zoo.cfg`` lines and JVM options of a server taking SASL logins from ``jaas``."""
    return {"authProvider.1": SASL_PROVIDER}, (f"-D{JAAS_PROPERTY}={jaas}",)


def kafka_jvm_options(jaas: Path) -> tuple[str, ...]:
    """The JVM option a Kafka broker logs in to ZooKeeper with (the ``Client`` section)."""
    return (f"-D{JAAS_PROPERTY}={jaas}",)
