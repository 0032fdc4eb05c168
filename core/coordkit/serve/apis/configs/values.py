"""A config's value, source and synonyms as Kafka's ``ConfigHelper`` works them out.

A broker config's synonyms are its value from each source in Kafka's order of precedence: the
broker's own dynamic configs (``/config/brokers/N``), the cluster's (``/config/brokers/
<default>``), the configs the broker started with (``--config``), the defaults; within each
source, the synonyms in Kafka's order (``log.retention.ms``, ``.minutes``, ``.hours``). Kafka
then drops the entries before the first of the config's own name (``dropWhile``), so a config
whose own name is set nowhere has none; its value and source are the first entry's.

A topic config's synonyms are its override (``TOPIC_CONFIG``), then its first broker synonym's.
Topics are described from the cluster-wide dynamic broker configs, the static ones and the
defaults, which is what the data plane applies (:class:`~coordkit.serve.topic_configs.
TopicConfigs` follows ``/config/brokers/<default>``); a broker's own dynamic configs
(``/config/brokers/N``) are stored and described for the broker but not applied to its topics.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from coordkit.serve.config_catalogue import (
    BROKER_KEYS,
    TOPIC_KEYS,
    InvalidConfigValueError,
    KafkaConfigKey,
    broker_synonyms,
)

# Kafka's ConfigResource.Type ids.
TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
CLIENT_METRICS = 16
GROUP = 32
RESOURCE_TYPES = {TOPIC: "TOPIC", BROKER: "BROKER", BROKER_LOGGER: "BROKER_LOGGER",
                  CLIENT_METRICS: "CLIENT_METRICS", GROUP: "GROUP"}  # fmt: skip
# Kafka's ConfigSource ids.
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


@attrs.frozen
class Entry:
    """One value of a config from one source (a DescribeConfigs synonym)."""

    name: str
    value: str | None
    source: int


@attrs.frozen
class BrokerSources:
    """The broker configs of each source, by Kafka's names, as text."""

    dynamic: Mapping[str, str] = attrs.field(factory=dict)
    dynamic_default: Mapping[str, str] = attrs.field(factory=dict)
    static: Mapping[str, str] = attrs.field(factory=dict)

    def synonyms(self, name: str) -> list[Entry]:
        """``name``'s synonyms, Kafka's ``configSynonyms(name, brokerSynonyms(name))``."""
        group = broker_synonyms(name)
        found = [
            Entry(synonym, values[synonym], source)
            for source, values in (
                (DYNAMIC_BROKER_CONFIG, self.dynamic),
                (DYNAMIC_DEFAULT_BROKER_CONFIG, self.dynamic_default),
                (STATIC_BROKER_CONFIG, self.static),
            )
            for synonym in group
            if synonym in values
        ]
        for synonym in group:
            key = BROKER_KEYS.get(synonym)
            if key is not None and key.default is not None:
                found.append(Entry(synonym, key.default, DEFAULT_CONFIG))
        first = next((i for i, e in enumerate(found) if e.name == name), len(found))
        return found[first:]

    def value(self, name: str) -> str | None:
        """The broker's value of ``name`` (its synonyms' first), ``None`` if set nowhere."""
        for entry in self.synonyms(name):
            return entry.value
        return None


def canonical(key: KafkaConfigKey, text: str) -> str:
    """``text`` as Kafka writes the value back (``" 5 "`` → ``5``); as given if it does not
    parse (a value another writer left)."""
    try:
        return key.text(key.parse(text))
    except InvalidConfigValueError:
        return text


def topic_value(key: KafkaConfigKey, overrides: Mapping[str, str], broker: BrokerSources) -> str:
    """A topic's value of ``key``: its override, else its broker synonyms' first set (in the
    topic config's unit), else Kafka's default."""
    if key.name in overrides:
        return canonical(key, overrides[key.name])
    for synonym, factor in key.synonyms:
        given = broker.value(synonym)
        if given is None:
            continue
        if factor == 1:
            return canonical(key, given)
        try:
            return str(int(given) * factor)
        except ValueError:
            continue
    return key.default or ""


def topic_entries(
    key: KafkaConfigKey, overrides: Mapping[str, str], broker: BrokerSources
) -> list[Entry]:
    """A topic config's synonyms: its override, then its first broker synonym's."""
    entries = broker.synonyms(key.synonyms[0][0]) if key.synonyms else []
    if key.name in overrides:
        entries.insert(0, Entry(key.name, topic_value(key, overrides, broker), TOPIC_CONFIG))
    return entries


def topic_key(name: str) -> KafkaConfigKey | None:
    return TOPIC_KEYS.get(name)
