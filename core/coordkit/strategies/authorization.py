"""Authorization as a strategy kind: who may do what on which resource.

An authorizer factory (registered through ``coordkit_register_authorizers``, named by the
broker config ``authorizer.class.name``) is called once per ``coordkit serve`` process with the
process's metadata store session and its broker configs (by Kafka's names, as text: Kafka hands
``Authorizer.configure`` every broker config too). The :class:`Authorizer` it returns answers
:meth:`Authorizer.authorize` for a principal (``User:alice``) connecting from a host, for a list
of :class:`Action` at once (Kafka's ``Authorizer.authorize``), and is started before the first
request and closed after the last. Keeping the ACLs (where, in what form) is the authorizer's
business; the default one (``kafka``) keeps them in Kafka's ZooKeeper layout
(:mod:`coordkit.kafka.acls`), so coordkit's brokers and Kafka 3.9's share them.

Kafka's class names in ``authorizer.class.name`` (``kafka.security.authorizer.AclAuthorizer``,
``org.apache.kafka.metadata.authorizer.StandardAuthorizer``) name the ``kafka`` authorizer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from coordkit.kafka.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from coordkit.store import MetadataStore

#: The broker config naming the authorizer (empty: none, every request allowed, as Kafka).
AUTHORIZER_CLASS_CONFIG = "authorizer.class.name"
#: Kafka's authorizer classes, and the registered authorizer that plays each.
KAFKA_AUTHORIZER_CLASSES = {
    "kafka.security.authorizer.AclAuthorizer": "kafka",
    "kafka.security.auth.SimpleAclAuthorizer": "kafka",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer": "kafka",
}
#: The principal of a connection that did not authenticate (Kafka's ``KafkaPrincipal.ANONYMOUS``).
ANONYMOUS = "User:ANONYMOUS"


def authorizer_name(class_name: str) -> str | None:
    """The registered authorizer ``authorizer.class.name`` names (``None``: no authorizer)."""
    class_name = class_name.strip()
    if not class_name:
        return None
    return KAFKA_AUTHORIZER_CLASSES.get(class_name, class_name)


@attrs.frozen
class Action:
    """An operation on one resource (Kafka's ``Action``; resources named literally)."""

    operation: AclOperation
    resource_type: ResourceType
    name: str


@runtime_checkable
class Authorizer(Protocol):
    """What a request handler asks (see the module docstring)."""

    def authorize(self, principal: str, host: str, actions: Sequence[Action]) -> list[bool]:
        """Whether ``principal`` connecting from ``host`` may do each of ``actions``."""
        ...

    def start(self) -> None:
        """Read what decisions need, and begin following its changes."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class AuthorizerFactory(Protocol):
    """A registered authorizer: ``factory(store, configs)`` builds one for a process."""

    name: str
    description: str

    def __call__(self, store: MetadataStore, configs: Mapping[str, str]) -> Authorizer: ...


class AuthorizerConfigError(ValueError):
    """An authorizer's config (``super.users``, ...) that it refuses; one line naming it."""
