"""Topic configs as a Kafka broker reads them: each topic's overrides over the broker's defaults.

The catalogue, :data:`TOPIC_CONFIGS`, holds the topic configs ``coordkit serve`` honours, with
Kafka's names, types, validators and defaults (``LogConfig``) and each one's broker synonyms in
Kafka's order of precedence (``ServerTopicConfigSynonyms``: ``log.retention.ms``, then
``log.retention.minutes``, then ``log.retention.hours``, converted into the topic config's unit).
:func:`broker_defaults` turns the broker configs set with ``--config`` into the topic defaults.

:class:`TopicConfigs` follows the store as a Kafka 3.9 ZooKeeper-mode broker follows it
(``ZkConfigManager`` over ``ZkNodeChangeNotificationListener``): at its start it reads every
``/config/topics/T``; then each new sequential ``/config/changes/config_change_N`` naming
``topics/T`` (version 2, ``entity_path``; or version 1, ``entity_type`` and ``entity_name``) makes
it read ``/config/topics/T`` again, so ``kafka-configs --alter`` (or
:meth:`coordkit.engine.topics.TopicAdmin.set_config`) takes effect without a restart. A topic
not read yet (created after the start) is read when it is first asked for, as a Kafka broker
reads a topic's config when it creates its log. It works on every store: the change
notifications are followed through a children watch.

A value from the store that does not parse, or breaks its validator, is not trusted: it is
logged once and the default applies. Names the catalogue does not hold are passed over (logged
once: Kafka has configs coordkit does not honour).

``configs.value(topic, "retention.ms")`` is the typed lookup the data plane uses.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.store import ChildrenEvent, MetadataStore, Watch
from coordkit.support import jsontext

log = logging.getLogger("coordkit.serve")

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
HOURS = 3_600_000
MINUTES = 60_000
SEVEN_DAYS_MS = 7 * 24 * HOURS
#: Kafka's ``LegacyRecord.RECORD_OVERHEAD_V0``: ``segment.bytes``' smallest value.
RECORD_OVERHEAD_V0 = 14

#: The names the data plane reads (Kafka's ``TopicConfig`` constants).
RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
SEGMENT_BYTES = "segment.bytes"
SEGMENT_MS = "segment.ms"
FLUSH_MESSAGES = "flush.messages"
FLUSH_MS = "flush.ms"
MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
CLEANUP_POLICY = "cleanup.policy"
MESSAGE_TIMESTAMP_TYPE = "message.timestamp.type"
DELETE_RETENTION_MS = "delete.retention.ms"
MIN_CLEANABLE_DIRTY_RATIO = "min.cleanable.dirty.ratio"
MIN_COMPACTION_LAG_MS = "min.compaction.lag.ms"
MAX_COMPACTION_LAG_MS = "max.compaction.lag.ms"
MAX_MESSAGE_BYTES = "max.message.bytes"
COMPRESSION_TYPE = "compression.type"


class TopicConfigError(ValueError):
    """A topic config value that does not parse or breaks its validator."""


@attrs.frozen
class Synonym:
    """A broker config that gives a topic config its default, times ``factor`` (hours into
    milliseconds: Kafka's ``ConfigSynonym`` with its converter)."""

    name: str
    factor: int = 1


@attrs.frozen
class TopicConfigKey:
    """One topic config, as Kafka's ``LogConfig`` defines it.

    :param type: Kafka's type name (``int``, ``long``, ``double``, ``boolean``, ``string``,
        ``list``).
    :param synonyms: the broker configs that give its default, first set first used.
    :param at_least: Kafka's ``atLeast`` validator, if any.
    :param at_most: with ``at_least``, Kafka's ``between`` validator.
    :param choices: the values allowed (Kafka's ``in`` / ``ValidList.in``), if limited.
    """

    name: str
    type: str
    default: Any
    doc: str
    synonyms: tuple[Synonym, ...] = ()
    at_least: int | None = None
    at_most: int | None = None
    choices: tuple[str, ...] | None = None

    def parse(self, text: str) -> Any:
        """The value of ``text`` as Kafka's ``ConfigDef`` parses it (trimmed), checked."""
        text = text.strip()
        if self.type == "boolean":
            if text.lower() not in ("true", "false"):
                raise TopicConfigError(f"{text!r} is not a boolean (true or false)")
            return text.lower() == "true"
        if self.type in ("string", "list"):
            items = (
                (text,)
                if self.type == "string"
                else tuple(i.strip() for i in text.split(",") if i.strip())
            )
            for item in items:
                if self.choices is not None and item not in self.choices:
                    raise TopicConfigError(f"{item!r} is not one of {', '.join(self.choices)}")
            return text if self.type == "string" else items
        if self.type == "double":
            try:
                ratio = float(text)
            except ValueError:
                raise TopicConfigError(f"{text!r} is not a number (double)") from None
            if (self.at_least is not None and ratio < self.at_least) or (
                self.at_most is not None and ratio > self.at_most
            ):
                raise TopicConfigError(f"{ratio} is not between {self.at_least} and {self.at_most}")
            return ratio
        try:
            value = int(text)
        except ValueError:
            raise TopicConfigError(f"{text!r} is not an integer ({self.type})") from None
        highest = INT32_MAX if self.type == "int" else INT64_MAX
        if not -highest - 1 <= value <= highest:
            raise TopicConfigError(f"{value} is out of range for a {self.type}")
        if self.at_least is not None and value < self.at_least:
            raise TopicConfigError(f"{value} is below the minimum of {self.at_least}")
        return value


def _log(name: str, factor: int = 1) -> Synonym:
    return Synonym(f"log.{name}", factor)


#: The topic configs ``coordkit serve`` honours, with Kafka's defaults and broker synonyms.
TOPIC_CONFIGS: Mapping[str, TopicConfigKey] = {
    key.name: key
    for key in (
        TopicConfigKey(RETENTION_MS, "long", SEVEN_DAYS_MS,
                       "How long a log keeps a segment before deleting it (-1: for ever).",
                       (_log("retention.ms"), _log("retention.minutes", MINUTES),
                        _log("retention.hours", HOURS)), at_least=-1),
        TopicConfigKey(RETENTION_BYTES, "long", -1,
                       "How large a partition's log may grow before its oldest segments are "
                       "deleted (-1: no limit).", (_log("retention.bytes"),)),
        TopicConfigKey(SEGMENT_BYTES, "int", 1024 * 1024 * 1024,
                       "The size at which a log rolls a new segment.",
                       (_log("segment.bytes"),), at_least=RECORD_OVERHEAD_V0),
        TopicConfigKey(SEGMENT_MS, "long", SEVEN_DAYS_MS,
                       "The age at which a log rolls a new segment.",
                       (_log("roll.ms"), _log("roll.hours", HOURS)), at_least=1),
        TopicConfigKey(FLUSH_MESSAGES, "long", INT64_MAX,
                       "Records appended between two fsyncs of a log.",
                       (_log("flush.interval.messages"),), at_least=1),
        TopicConfigKey(FLUSH_MS, "long", INT64_MAX,
                       "Milliseconds between two fsyncs of a log.",
                       (_log("flush.interval.ms"), _log("flush.scheduler.interval.ms")),
                       at_least=0),
        TopicConfigKey(MIN_INSYNC_REPLICAS, "int", 1,
                       "The fewest in-sync replicas a produce with acks=all needs "
                       "(NOT_ENOUGH_REPLICAS below it).", (Synonym(MIN_INSYNC_REPLICAS),),
                       at_least=1),
        TopicConfigKey(UNCLEAN_LEADER_ELECTION_ENABLE, "boolean", False,
                       "Elect a replica outside the ISR when no ISR member is alive.",
                       (Synonym(UNCLEAN_LEADER_ELECTION_ENABLE),)),
        TopicConfigKey(CLEANUP_POLICY, "list", ("delete",),
                       "delete (retention) and/or compact.", (_log("cleanup.policy"),),
                       choices=("compact", "delete")),
        TopicConfigKey(MESSAGE_TIMESTAMP_TYPE, "string", "CreateTime",
                       "Whether records keep the producer's timestamp or get the append time.",
                       (_log("message.timestamp.type"),),
                       choices=("CreateTime", "LogAppendTime")),
        TopicConfigKey(DELETE_RETENTION_MS, "long", 86_400_000,
                       "How long a compacted log keeps a tombstone after cleaning it.",
                       (_log("cleaner.delete.retention.ms"),), at_least=0),
        TopicConfigKey(MIN_CLEANABLE_DIRTY_RATIO, "double", 0.5,
                       "The share of a compacted log not cleaned yet at which it is cleaned.",
                       (_log("cleaner.min.cleanable.ratio"),), at_least=0, at_most=1),
        TopicConfigKey(MIN_COMPACTION_LAG_MS, "long", 0,
                       "How long a record stays uncompacted at least.",
                       (_log("cleaner.min.compaction.lag.ms"),), at_least=0),
        TopicConfigKey(MAX_COMPACTION_LAG_MS, "long", INT64_MAX,
                       "How long a record stays uncompacted at most.",
                       (_log("cleaner.max.compaction.lag.ms"),), at_least=1),
        TopicConfigKey(MAX_MESSAGE_BYTES, "int", 1_048_588,
                       "The largest record batch a produce may append (MESSAGE_TOO_LARGE above).",
                       (Synonym("message.max.bytes"),), at_least=0),
        TopicConfigKey(COMPRESSION_TYPE, "string", "producer",
                       "The codec of the batches a log keeps (producer: the producer's).",
                       (Synonym(COMPRESSION_TYPE),),
                       choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    )
}  # fmt: skip


def broker_defaults(broker_values: Mapping[str, Any]) -> dict[str, Any]:
    """The topic defaults the broker configs ``broker_values`` set (those given, by Kafka's
    names, already typed): for each topic config its first synonym given, converted into its
    unit. Topic configs none of whose synonyms is given are left out (Kafka's default holds)."""
    out: dict[str, Any] = {}
    for key in TOPIC_CONFIGS.values():
        for synonym in key.synonyms:
            if synonym.name in broker_values:
                value = broker_values[synonym.name]
                out[key.name] = value * synonym.factor if synonym.factor != 1 else value
                break
    return out


def change_number(name: str) -> int | None:
    """The sequence number of a ``config_change_N`` node (``None`` for another name)."""
    prefix = layout.CONFIG_CHANGE_PREFIX.rsplit("/", 1)[1]
    digits = name.removeprefix(prefix)
    return int(digits) if digits != name and digits.isdigit() else None


def changed_topic(data: bytes) -> str | None:
    """The topic a config change notification names, or ``None`` (another entity type)."""
    kind, name = changed_entity(data)
    return name if kind == "topics" else None


def changed_entity(data: bytes) -> tuple[str, str]:
    """The entity type and name a config change notification names (``brokers``, ``<default>``).

    :raises ValueError: not a notification of version 1 or 2 (Kafka's ``ZkConfigManager``
        refuses it too).
    """
    obj = jsontext.loads(data)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    version = obj.get("version")
    if version == 2:
        entity = obj.get("entity_path")
        if not isinstance(entity, str) or "/" not in entity:
            raise ValueError(f"version 2 needs an entity_path 'type/name', got {entity!r}")
        kind, _, name = entity.partition("/")
    elif version == 1:
        entity_type, entity_name = obj.get("entity_type"), obj.get("entity_name")
        if not isinstance(entity_type, str) or not isinstance(entity_name, str):
            raise ValueError("version 1 needs entity_type and entity_name")
        kind, name = entity_type, entity_name
    else:
        raise ValueError(f"unsupported version {version!r} (1 and 2 are)")
    return kind, name


class TopicConfigs:
    """Every topic's configs on ``store``, over ``defaults`` (topic config → value, from
    :func:`broker_defaults`); ``changed`` is called with a topic's name (from this object's
    thread, or the caller's on a first read) whenever its configs were read."""

    def __init__(
        self,
        store: MetadataStore,
        defaults: Mapping[str, Any] | None = None,
        *,
        changed: Callable[[str], None] | None = None,
        static: Mapping[str, str] | None = None,
    ) -> None:
        self.store = store
        self.defaults = {name: key.default for name, key in TOPIC_CONFIGS.items()}
        self.defaults.update(defaults or {})
        self._static_defaults = dict(self.defaults)
        # The broker configs set at the start, by name: a cluster-wide config of a later name
        # of the same topic config does not override them (Kafka's order of the names first).
        self._static = dict(static or {})
        self._listeners: list[Callable[[str], None]] = [] if changed is None else [changed]
        self._overrides: dict[str, dict[str, Any]] = {}
        # The version of each topic's config node read (-1: none), so that a slower read of
        # an older version never replaces a newer one.
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()
        self._warned: set[tuple[str, str, str]] = set()
        self._last_change = -1
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: Watch | None = None

    # -- lookups --------------------------------------------------------------------------------

    def value(self, topic: str, name: str) -> Any:
        """``topic``'s value of config ``name`` (a name of :data:`TOPIC_CONFIGS`): its override,
        else the broker's default. A topic not read yet is read from the store first."""
        if name not in TOPIC_CONFIGS:
            raise KeyError(f"{name!r} is not a topic config coordkit serve honours")
        found = self._overrides.get(topic)
        if found is None:
            found = self.read(topic)
        return found.get(name, self.defaults[name])

    def overrides(self, topic: str) -> dict[str, Any]:
        """``topic``'s valid overrides, typed (read from the store if not read yet)."""
        found = self._overrides.get(topic)
        return dict(self.read(topic) if found is None else found)

    def known(self, topic: str) -> bool:
        """Whether ``topic``'s configs have been read (a lookup needs no store read)."""
        return topic in self._overrides

    def add_listener(self, changed: Callable[[str], None]) -> None:
        """Call ``changed(topic)`` whenever ``topic``'s configs were read (again)."""
        self._listeners.append(changed)

    def forget(self, topic: str) -> None:
        """``topic`` was deleted: a topic created again under its name is read afresh."""
        with self._lock:
            self._overrides.pop(topic, None)
            self._versions.pop(topic, None)

    # -- reading the store -------------------------------------------------------------------

    def read(self, topic: str) -> dict[str, Any]:
        """Read ``topic``'s config node; its valid overrides (none if it has no node)."""
        path = layout.topic_config_path(topic)
        try:
            data, stat = self.store.get(path)
        except NoNodeError:
            if self.store.exists(layout.topic_path(topic)) is None:
                return {}  # no such topic (yet): nothing to keep
            return self._apply(topic, path, None, -1)
        return self._apply(topic, path, data, stat.version)

    def read_all(self) -> None:
        """Read every topic's config node (the start, as Kafka's ``ZkConfigManager.startup``)."""
        try:
            topics = sorted(self.store.children(layout.CONFIG_TOPICS))
        except NoNodeError:
            return
        paths = [layout.topic_config_path(t) for t in topics]
        for topic, path, result in zip(topics, paths, self.store.get_many(paths), strict=True):
            if isinstance(result, StoreError):
                if not isinstance(result, NoNodeError):
                    log.warning("topic %r: configs not read: %s", topic, result)
                continue
            self._apply(topic, path, result[0], result[1].version)

    def _apply(self, topic: str, path: str, data: bytes | None, version: int) -> dict[str, Any]:
        given: Mapping[str, str] = {}
        if data is not None:
            try:
                given = layout.TOPIC_CONFIG.decode(data, path).config
            except LayoutError as exc:
                self._warn_once(topic, path, exc.detail, "its configs are not read")
        valid: dict[str, Any] = {}
        for name, text in given.items():
            key = TOPIC_CONFIGS.get(name)
            if key is None:
                self._warn_once(topic, name, text, "not a topic config coordkit serve honours")
                continue
            try:
                valid[name] = key.parse(text)
            except TopicConfigError as exc:
                self._warn_once(topic, name, text, f"{exc}; the default applies")
        with self._lock:
            if self._versions.get(topic, -1) > version:
                return dict(self._overrides[topic])  # a newer version was read meanwhile
            self._overrides[topic] = valid
            self._versions[topic] = version
        for listener in self._listeners:
            listener(topic)
        return valid

    def _warn_once(self, topic: str, name: str, text: str, why: str) -> None:
        if (topic, name, text) in self._warned:
            return
        self._warned.add((topic, name, text))
        log.warning("topic %r: config %s=%r: %s", topic, name, text, why)

    # -- following /config/changes -------------------------------------------------------------

    def start(self) -> None:
        """Read every topic's configs, then follow the change notifications (on a thread)."""
        try:
            names = self.store.children(layout.CONFIG_CHANGES)
        except NoNodeError:
            names = []
        # What is there now is read below: only later notifications need following.
        self._last_change = max((n for n in map(change_number, names) if n is not None),
                                default=-1)  # fmt: skip
        self.read_cluster_defaults()
        self.read_all()
        self._thread = threading.Thread(target=self._run, name="coordkit-topic-configs",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        self.store.ensure_path(layout.CONFIG_CHANGES)
        self._watch = self.store.watch_children(layout.CONFIG_CHANGES, self._on_changes)
        self._wake.set()  # a notification written before the watch was set is not missed

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _on_changes(self, event: ChildrenEvent) -> None:
        # On the store's event thread: the reading is done on ours.
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.process_notifications()
            except StoreError as exc:
                log.warning("config change notifications not read: %s", exc)
                self._wake.set()  # again in a second
                self._stop.wait(1.0)
            except Exception:
                log.exception("config change notifications not processed")

    def process_notifications(self) -> list[str]:
        """Read the notifications after the last one processed and each topic they name again
        (Kafka's ``processNotifications``); the topics read."""
        try:
            names = self.store.children(layout.CONFIG_CHANGES)
        except NoNodeError:
            return []
        numbered = sorted((n, name) for name in names if (n := change_number(name)) is not None)
        fresh = [(n, name) for n, name in numbered if n > self._last_change]
        if not fresh:
            return []
        paths = [f"{layout.CONFIG_CHANGES}/{name}" for _, name in fresh]
        topics: list[str] = []
        cluster = False
        for (number, _), path, result in zip(fresh, paths, self.store.get_many(paths),
                                             strict=True):  # fmt: skip
            self._last_change = number
            if isinstance(result, StoreError):
                continue  # purged meanwhile: the topic's node is read for a later one, if any
            try:
                kind, name = changed_entity(result[0])
            except (ValueError, jsontext.JSONTextError) as exc:
                log.warning("config change notification %s passed over: %s", path, exc)
                continue
            cluster = cluster or (kind, name) == ("brokers", layout.DEFAULT_BROKER)
            if kind == "topics" and name not in topics:
                topics.append(name)
        if cluster:
            self.read_cluster_defaults()
        for topic in topics:
            log.info("topic %r: configs changed (%s), read again", topic, layout.CONFIG_CHANGES)
            self.read(topic)
        return topics

    def read_cluster_defaults(self) -> None:
        """Read ``/config/brokers/<default>``: the cluster-wide broker configs
        (``kafka-configs --entity-default``) give topics their defaults over the broker's own,
        as Kafka's ``DynamicBrokerConfig`` does; the listeners hear of every topic read."""
        path = layout.broker_config_path(layout.DEFAULT_BROKER)
        try:
            given = layout.TOPIC_CONFIG.decode(self.store.get(path)[0], path).config
        except NoNodeError:
            given = {}
        except LayoutError as exc:
            self._warn_once("*", path, exc.detail, "the cluster-wide broker configs are not read")
            return
        cluster: dict[str, Any] = {}
        for key in TOPIC_CONFIGS.values():
            names = (s for s in key.synonyms if s.name in given or s.name in self._static)
            synonym = next(names, None)
            if synonym is None or synonym.name not in given:
                continue
            try:
                value = key.parse(given[synonym.name])
            except TopicConfigError as exc:
                self._warn_once("*", synonym.name, given[synonym.name], f"{exc}; not applied")
                continue
            cluster[key.name] = value * synonym.factor if synonym.factor != 1 else value
        self.defaults = {**self._static_defaults, **cluster}
        for topic in list(self._overrides):
            for listener in self._listeners:
                listener(topic)

    def read_missing(self, topics: Iterable[str]) -> None:
        """Read the configs of those ``topics`` not read yet (a handler calls this off the event
        loop before it looks values up, so the lookups need no store read)."""
        for topic in dict.fromkeys(topics):
            if topic not in self._overrides:
                self.read(topic)
