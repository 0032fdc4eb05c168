"""Client quotas in Kafka 3.9's ZooKeeper layout, as its ``ZkAdminManager`` and ``AdminZkClient``
keep them.

An entity is a user, a client id, a user's client id or an IP address, each by name or the
default (``<default>``):

* ``/config/users/<user>`` and ``/config/users/<user>/clients/<client-id>``;
* ``/config/clients/<client-id>``; ``/config/ips/<ip>``;

each ``{"version":1,"config":{...}}`` with Kafka's text of the values (a LONG or INT quota as a
whole number, a DOUBLE as Java's ``Double.toString``), and each change announced by
``/config/changes/config_change_N`` naming the entity path (``users/alice/clients/c1``). Names
are written as Kafka's ``Sanitizer`` writes them. A user's node also holds its SCRAM credentials
(:mod:`coordkit.serve.listeners.scram`): a quota change keeps every other key of the node, as
Kafka's ``AdminZkClient.changeConfigs`` does. A node left with no config and no children is
deleted, with the parents Kafka's ``tryCleanQuotaNodes`` deletes.

Values are not checked here: the caller checks them (AlterClientQuotas, ``coordkit configs``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from decimal import Decimal
from urllib.parse import quote, unquote

import attrs

from coordkit.errors import BadVersionError, LayoutError, NodeExistsError, NoNodeError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicConfig
from coordkit.store import MetadataStore

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
#: ZooKeeper's name of the default entity (Kafka's ``ZooKeeperInternals.DEFAULT_STRING``).
DEFAULT = "<default>"
CONFIG_USERS = "/config/users"
CONFIG_CLIENTS = "/config/clients"
CONFIG_IPS = "/config/ips"

#: The quotas of users and client ids (Kafka's ``QuotaConfig.userAndClientQuotaConfigs``) and of
#: IP addresses (``ipConfigs``), with their ``ConfigDef`` types.
CLIENT_QUOTA_TYPES: Mapping[str, str] = {
    "producer_byte_rate": "long",
    "consumer_byte_rate": "long",
    "request_percentage": "double",
    "controller_mutation_rate": "double",
}
IP_QUOTA_TYPES: Mapping[str, str] = {"connection_creation_rate": "int"}

_WRITE_ATTEMPTS = 10


@attrs.frozen
class ClientQuotaEntity:
    """Kafka's ``ClientQuotaEntity``: entity type → name (``None``: the default), by type."""

    entries: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, **names: str | None) -> ClientQuotaEntity:
        """``of(user="alice", client_id=None)``: keyword ``client_id`` is ``client-id``."""
        return cls(tuple(sorted((k.replace("_", "-"), v) for k, v in names.items())))

    def get(self, entity_type: str) -> str | None:
        return dict(self.entries)[entity_type]

    def types(self) -> frozenset[str]:
        return frozenset(t for t, _ in self.entries)

    def __str__(self) -> str:
        named = ", ".join(f"{t}={'null' if n is None else n}" for t, n in self.entries)
        return f"ClientQuotaEntity(entries={{{named}}})"


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encoded, ``*`` as ``%2A``, ``~`` as ``%7E``."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote(name)


def _zk_name(name: str | None) -> str:
    return DEFAULT if name is None else sanitize(name)


def _from_zk(name: str) -> str | None:
    return None if name == DEFAULT else desanitize(name)


def entity_path(entity: ClientQuotaEntity) -> str:
    """The entity path under ``/config`` (``users/alice/clients/c1``), as change
    notifications name it.

    :raises ValueError: an entity Kafka does not keep (an IP with a user or client id; none).
    """
    types = entity.types()
    if types == {USER}:
        return f"users/{_zk_name(entity.get(USER))}"
    if types == {USER, CLIENT_ID}:
        return f"users/{_zk_name(entity.get(USER))}/clients/{_zk_name(entity.get(CLIENT_ID))}"
    if types == {CLIENT_ID}:
        return f"clients/{_zk_name(entity.get(CLIENT_ID))}"
    if types == {IP}:
        return f"ips/{_zk_name(entity.get(IP))}"
    raise ValueError(f"no quota entity of types {sorted(types)}")


def quota_types(entity: ClientQuotaEntity) -> Mapping[str, str]:
    """The quotas ``entity`` may have, with their types."""
    return IP_QUOTA_TYPES if IP in entity.types() else CLIENT_QUOTA_TYPES


def java_double_text(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (``12.5``, ``100.0``, ``1.0E10``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else f"{text}.0"
    _, digits, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits))
    mantissa = f"{shown[0]}.{shown[1:] or '0'}"
    return f"{'-' if value < 0 else ''}{mantissa}E{exponent + len(shown) - 1}"


def quota_text(quota_type: str, value: float) -> str:
    """A quota as Kafka 3.9 writes it in ZooKeeper: whole numbers for LONG and INT."""
    if quota_type in ("long", "int"):
        return str(int(value + 1e-6))
    return java_double_text(value)


def encode_properties(config: Mapping[str, str]) -> bytes:
    """A config node as Kafka 3.9's ``ConfigEntityZNode.encode`` writes it (its keys in Kafka's
    order: :func:`coordkit.kafka.properties.properties_order`)."""
    return layout.TOPIC_CONFIG.encode(TopicConfig(config=dict(config)))


def _decode(data: bytes | None, path: str) -> dict[str, str]:
    if not data:
        return {}  # a parent Kafka created on the way to a child has no config
    return dict(layout.TOPIC_CONFIG.decode(data, path).config)


class ClientQuotas:
    """Reads and changes the client quotas of Kafka's ZooKeeper layout on ``store``."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def _node(self, path: str) -> dict[str, str]:
        try:
            data, _ = self.store.get(path)
        except NoNodeError:
            return {}
        return _decode(data, path)

    def read(self, entity: ClientQuotaEntity) -> dict[str, float]:
        """``entity``'s quotas (``{}``: none); a value that is not a number is left out.

        :raises LayoutError: the node does not decode.
        """
        return _quotas(entity, self._node(f"{layout.CONFIG}/{entity_path(entity)}"))

    def read_all(self) -> dict[ClientQuotaEntity, dict[str, float]]:
        """Every entity with at least one quota (a user with SCRAM credentials only has none).

        :raises LayoutError: a node does not decode.
        """
        found: dict[ClientQuotaEntity, dict[str, float]] = {}
        for entity, path in self._entities():
            quotas = _quotas(entity, self._node(path))
            if quotas:
                found[entity] = quotas
        return found

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.store.children(path))
        except NoNodeError:
            return []

    def _entities(self) -> Iterator[tuple[ClientQuotaEntity, str]]:
        for user in self._children(CONFIG_USERS):
            name = _from_zk(user)
            yield ClientQuotaEntity.of(user=name), f"{CONFIG_USERS}/{user}"
            clients = f"{CONFIG_USERS}/{user}/clients"
            for client in self._children(clients):
                yield (ClientQuotaEntity.of(user=name, client_id=_from_zk(client)),
                       f"{clients}/{client}")  # fmt: skip
        for client in self._children(CONFIG_CLIENTS):
            yield ClientQuotaEntity.of(client_id=_from_zk(client)), f"{CONFIG_CLIENTS}/{client}"
        for ip in self._children(CONFIG_IPS):
            yield ClientQuotaEntity.of(ip=_from_zk(ip)), f"{CONFIG_IPS}/{ip}"

    def alter(self, entity: ClientQuotaEntity, changes: Mapping[str, float | None]) -> bool:
        """Set (a number) or remove (``None``) ``entity``'s quotas, keeping the node's other keys;
        ``False`` if nothing changed (nothing is written then).

        :raises ValueError: an entity Kafka does not keep, or a quota it may not have.
        """
        relative = entity_path(entity)
        path = f"{layout.CONFIG}/{relative}"
        types = quota_types(entity)
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                data, stat = self.store.get(path)
                current, version = _decode(data, path), stat.version
            except NoNodeError:
                current, version = {}, None
            except LayoutError:
                current, version = {}, self.store.get(path)[1].version  # replaced whole
            updated = dict(current)
            for key, value in changes.items():
                if value is None:
                    updated.pop(key, None)
                elif key not in types:
                    raise ValueError(f"{key} is not a quota of {entity}")
                else:
                    updated[key] = quota_text(types[key], value)
            if updated == current:
                return False
            try:
                self._write(relative, path, updated, version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                if attempt == _WRITE_ATTEMPTS - 1:
                    raise
                continue
            return True
        return False  # pragma: no cover (the loop returns or raises)

    def _write(self, relative: str, path: str, config: dict[str, str], version: int | None
               ) -> None:  # fmt: skip
        if not config and version is not None and not self._children(path):
            self._clean(relative, path)
        elif not config and version is None:
            pass  # removing from a node that is not there: only the notification
        else:
            data = encode_properties(config)
            if version is None:
                self.store.create(path, data, make_parents=True)
            else:
                self.store.set(path, data, version)
        self.store.create(
            layout.CONFIG_CHANGE_PREFIX,
            layout.encode_config_change(relative),
            sequential=True,
            make_parents=True,
        )

    def _clean(self, relative: str, path: str) -> None:
        """Kafka's ``tryCleanQuotaNodes``: the empty node, and for a user's client id its
        ``clients`` node if it was the only one, and the user's if that has no config left."""
        doomed = path
        parts = relative.split("/")
        if parts[0] == "users" and len(parts) == 4:
            clients = f"{CONFIG_USERS}/{parts[1]}/clients"
            if self._children(clients) == [parts[3]]:
                doomed = clients
                user = f"{CONFIG_USERS}/{parts[1]}"
                if not self._node(user) and self._children(user) == ["clients"]:
                    doomed = user
        self.store.delete(doomed, recursive=True)


def _quotas(entity: ClientQuotaEntity, config: Mapping[str, str]) -> dict[str, float]:
    found = {}
    for key, text in config.items():
        if key in quota_types(entity):
            try:
                found[key] = float(text)
            except ValueError:
                continue
    return found
