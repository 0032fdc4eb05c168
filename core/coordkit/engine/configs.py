"""Dynamic configs in Kafka's ZooKeeper layout, as Kafka 3.9's ``AdminZkClient`` keeps them.

A topic's overrides are ``/config/topics/T``, a broker's ``/config/brokers/N`` and the
cluster-wide broker configs ``/config/brokers/<default>``, each ``{"version":1,"config":{...}}``
with string values; every write is announced by a sequential
``/config/changes/config_change_N`` naming the entity (``topics/T``, ``brokers/N``,
``brokers/<default>``), from which Kafka's brokers (and :class:`coordkit.serve.topic_configs.
TopicConfigs`) learn to read it again. Values are not checked here: the caller checks them
(DescribeConfigs' validators, ``coordkit configs``).

Kafka 4's group configs and client-metrics subscriptions have no ZooKeeper home in Kafka (they
live in KRaft's metadata log); coordkit keeps them in the same layout, ``/config/groups/<group>``
and ``/config/client-metrics/<name>`` (names sanitized as Kafka's ``Sanitizer`` does), without
a change notification (a Kafka 3.9 broker on the same ZooKeeper knows no such entity type);
coordkit's readers watch the nodes (:mod:`coordkit.engine.group_configs`).
"""

from __future__ import annotations

from collections.abc import Mapping

from coordkit.engine.errors import UnknownTopicError
from coordkit.engine.quotas import desanitize, sanitize
from coordkit.engine.topics import TopicAdmin
from coordkit.errors import NoNodeError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicConfig
from coordkit.store import MetadataStore

TOPICS = "topics"
BROKERS = "brokers"
GROUPS = "groups"
CLIENT_METRICS = "client-metrics"
ENTITY_TYPES = (TOPICS, BROKERS, GROUPS, CLIENT_METRICS)
#: Entity types whose changes are not announced under /config/changes (see the module's doc).
_UNANNOUNCED = (GROUPS, CLIENT_METRICS)


class ConfigAdmin:
    """Reads and replaces the configs of topics and brokers on ``store``."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.topics = TopicAdmin(store)

    @staticmethod
    def path(entity_type: str, name: str) -> str:
        """The config node of ``name`` (a topic; a broker id or ``<default>``)."""
        if entity_type == TOPICS:
            return layout.topic_config_path(name)
        if entity_type == BROKERS:
            return layout.broker_config_path(name)
        if entity_type in _UNANNOUNCED:
            return f"{layout.CONFIG}/{entity_type}/{sanitize(name)}"
        raise ValueError(f"entity type {entity_type!r} is not one of {', '.join(ENTITY_TYPES)}")

    def read(self, entity_type: str, name: str) -> dict[str, str]:
        """``name``'s overrides as the node holds them (``{}``: no node).

        :raises UnknownTopicError: a topic that does not exist.
        :raises LayoutError: the node does not decode.
        """
        if entity_type == TOPICS and self.store.exists(layout.topic_path(name)) is None:
            raise UnknownTopicError(f"The topic '{name}' does not exist.")
        path = self.path(entity_type, name)
        try:
            data, _ = self.store.get(path)
        except NoNodeError:
            return {}
        if not data:
            return {}
        return dict(layout.TOPIC_CONFIG.decode(data, path).config)

    def names(self, entity_type: str) -> list[str]:
        """The entities of ``entity_type`` with a config node (groups, client-metrics)."""
        try:
            found = self.store.children(f"{layout.CONFIG}/{entity_type}")
        except NoNodeError:
            return []
        return sorted(desanitize(name) for name in found)

    def write(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        """Replace ``name``'s overrides with ``config`` and announce the change.

        :raises UnknownTopicError: a topic that does not exist.
        """
        if entity_type == TOPICS:
            try:
                self.topics.set_config(name, config)
            except UnknownTopicError:
                raise UnknownTopicError(f"The topic '{name}' does not exist.") from None
            return
        path = self.path(entity_type, name)
        if entity_type in _UNANNOUNCED and not config:
            try:
                self.store.delete(path)  # nothing left: gone, as Kafka's image forgets it
            except NoNodeError:
                pass
            return
        data = layout.TOPIC_CONFIG.encode(TopicConfig(config=dict(config)))
        try:
            self.store.set(path, data)
        except NoNodeError:
            self.store.create(path, data, make_parents=True)
        if entity_type in _UNANNOUNCED:
            return
        self.topics.purge_config_changes()
        self.store.create(
            layout.CONFIG_CHANGE_PREFIX,
            layout.encode_config_change(f"{entity_type}/{name}"),
            sequential=True,
            make_parents=True,
        )
