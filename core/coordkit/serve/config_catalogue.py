"""Kafka's config definitions as DescribeConfigs reports them and AlterConfigs checks them.

Kafka 4.4 lists 37 configs for a topic, of which ``coordkit serve`` honours those of
:data:`coordkit.serve.topic_configs.TOPIC_CONFIGS`; the others are kept in ``/config/topics/T``
and described as Kafka describes them (their values checked by Kafka's validators), so that a
tool reading or writing them sees what it would see on Kafka. :data:`TOPIC_KEYS` lists them in
the order Kafka 4.4's answer lists them, with Kafka's types, defaults, validators and broker
synonyms (``ServerTopicConfigSynonyms``).

:data:`BROKER_KEYS` are the broker configs DescribeConfigs lists for a broker: those ``coordkit
serve`` honours (:data:`coordkit.serve.broker_config.CONFIGS`) and the broker synonyms of the
topic configs, each read-only or not as Kafka's ``DynamicBrokerConfig.AllDynamicConfigs`` says.

Messages are Kafka's ``ConfigException``'s: ``Invalid value V for configuration N: why``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from coordkit.serve.broker_config import CONFIGS
from coordkit.serve.topic_configs import TOPIC_CONFIGS

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_RANGES = {"short": 2**15 - 1, "int": INT32_MAX, "long": INT64_MAX}

#: DescribeConfigs' ConfigType ids (``DescribeConfigsResponse.ConfigType``).
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6,
                "list": 7, "class": 8, "password": 9}  # fmt: skip


class InvalidConfigValueError(ValueError):
    """A value Kafka's ``ConfigDef`` refuses; the message is Kafka's."""


def invalid(name: str, value: object, why: str) -> InvalidConfigValueError:
    return InvalidConfigValueError(f"Invalid value {value} for configuration {name}: {why}")


@attrs.frozen
class KafkaConfigKey:
    """One config as Kafka's ``ConfigDef`` defines it.

    :param default: the default as Kafka writes it (``None``: null).
    :param at_least: Kafka's ``atLeast`` (or ``between``'s low end).
    :param at_most: ``between``'s high end.
    :param choices: Kafka's ``ValidString.in`` / ``ValidList.in`` (in Kafka's order).
    :param synonyms: a topic config's broker configs, Kafka's first first, with the factor
        that turns each into the topic config's unit.
    """

    name: str
    type: str
    default: str | None
    at_least: int | float | None = None
    at_most: int | float | None = None
    choices: tuple[str, ...] | None = None
    synonyms: tuple[tuple[str, int], ...] = ()
    read_only: bool = False
    doc: str = ""

    @property
    def config_type(self) -> int:
        return CONFIG_TYPES[self.type]

    def parse(self, text: str) -> Any:
        """``text`` as Kafka's ``ConfigDef.parseType`` and validator take it.

        :raises InvalidConfigValueError: with Kafka's message.
        """
        trimmed = text.strip()
        value: Any
        if self.type == "boolean":
            if trimmed.lower() not in ("true", "false"):
                raise invalid(self.name, text, "Expected value to be either true or false")
            return trimmed.lower() == "true"
        if self.type in ("string", "password", "class"):
            value = trimmed
            items: tuple[str, ...] = (trimmed,)
        elif self.type == "list":
            value = items = tuple(i.strip() for i in trimmed.split(",")) if trimmed else ()
        elif self.type == "double":
            try:
                value = float(trimmed)
            except ValueError:
                raise invalid(self.name, text, "Not a number of type DOUBLE") from None
            self._check_range(value)
            return value
        else:
            try:
                value = int(trimmed)
            except ValueError:
                value = None
            if value is None or not -_RANGES[self.type] - 1 <= value <= _RANGES[self.type]:
                raise invalid(self.name, text, f"Not a number of type {self.type.upper()}")
            self._check_range(value)
            return value
        if self.choices is not None:
            for item in items:
                if item not in self.choices:
                    raise invalid(
                        self.name, item, f"String must be one of: {', '.join(self.choices)}"
                    )
        return value

    def _check_range(self, value: float) -> None:
        if self.at_least is not None and value < self.at_least:
            raise invalid(self.name, value, f"Value must be at least {self.at_least}")
        if self.at_most is not None and value > self.at_most:
            raise invalid(self.name, value, f"Value must be no more than {self.at_most}")

    def text(self, value: Any) -> str:
        """A parsed value as Kafka's ``ConfigDef.convertToString`` writes it."""
        if self.type == "list":
            return ",".join(value)
        if self.type == "boolean":
            return "true" if value else "false"
        return str(value)


HOURS = 3_600_000
MINUTES = 60_000
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _topic(name: str, type_: str, default: str | None, *synonyms: str | tuple[str, int],
           **checks: Any) -> KafkaConfigKey:  # fmt: skip
    honoured = TOPIC_CONFIGS.get(name)
    return KafkaConfigKey(
        name, type_, default,
        synonyms=tuple((s, 1) if isinstance(s, str) else s for s in synonyms),
        doc=honoured.doc if honoured is not None else "",
        **checks,
    )  # fmt: skip


#: Kafka 4.4's topic configs (``LogConfig``), in the order its DescribeConfigs lists them.
TOPIC_KEYS: Mapping[str, KafkaConfigKey] = {
    key.name: key
    for key in (
        _topic("compression.type", "string", "producer", "compression.type",
               choices=_COMPRESSION),
        _topic("errors.deadletterqueue.group.enable", "boolean", "false"),
        _topic("remote.copy.lag.bytes", "long", "-1", "log.remote.copy.lag.bytes", at_least=-1),
        _topic("remote.log.delete.on.disable", "boolean", "false"),
        _topic("leader.replication.throttled.replicas", "list", ""),
        _topic("remote.storage.enable", "boolean", "false"),
        _topic("min.insync.replicas", "int", "1", "min.insync.replicas", at_least=1),
        _topic("segment.jitter.ms", "long", "0", "log.roll.jitter.ms",
               ("log.roll.jitter.hours", HOURS), at_least=0),
        _topic("remote.log.copy.disable", "boolean", "false"),
        _topic("local.retention.ms", "long", "-2", "log.local.retention.ms", at_least=-2),
        _topic("cleanup.policy", "list", "delete", "log.cleanup.policy",
               choices=("compact", "delete")),
        _topic("flush.ms", "long", str(INT64_MAX), "log.flush.interval.ms",
               "log.flush.scheduler.interval.ms", at_least=0),
        _topic("follower.replication.throttled.replicas", "list", ""),
        _topic("compression.lz4.level", "int", "9", "compression.lz4.level",
               at_least=1, at_most=17),
        # Kafka 4.4's floor is 1 MiB (KIP-1030); coordkit keeps 3.9's (docs/serve.md's table).
        _topic("segment.bytes", "int", "1073741824", "log.segment.bytes", at_least=14),
        _topic("retention.ms", "long", "604800000", "log.retention.ms",
               ("log.retention.minutes", MINUTES), ("log.retention.hours", HOURS),
               at_least=-1),
        _topic("compression.gzip.level", "int", "-1", "compression.gzip.level",
               at_least=-1, at_most=9),
        _topic("remote.copy.lag.ms", "long", "0", "log.remote.copy.lag.ms", at_least=0),
        _topic("flush.messages", "long", str(INT64_MAX), "log.flush.interval.messages",
               at_least=1),
        _topic("compression.zstd.level", "int", "3", "compression.zstd.level",
               at_least=-131072, at_most=22),
        _topic("max.compaction.lag.ms", "long", str(INT64_MAX),
               "log.cleaner.max.compaction.lag.ms", at_least=1),
        _topic("file.delete.delay.ms", "long", "60000", "log.segment.delete.delay.ms",
               at_least=0),
        _topic("max.message.bytes", "int", "1048588", "message.max.bytes", at_least=0),
        _topic("min.compaction.lag.ms", "long", "0", "log.cleaner.min.compaction.lag.ms",
               at_least=0),
        _topic("message.timestamp.type", "string", "CreateTime", "log.message.timestamp.type",
               choices=("CreateTime", "LogAppendTime")),
        _topic("local.retention.bytes", "long", "-2", "log.local.retention.bytes", at_least=-2),
        _topic("preallocate", "boolean", "false", "log.preallocate"),
        _topic("index.interval.bytes", "int", "4096", "log.index.interval.bytes", at_least=0),
        _topic("min.cleanable.dirty.ratio", "double", "0.5", "log.cleaner.min.cleanable.ratio",
               at_least=0, at_most=1),
        _topic("unclean.leader.election.enable", "boolean", "false",
               "unclean.leader.election.enable"),
        _topic("retention.bytes", "long", "-1", "log.retention.bytes"),
        _topic("delete.retention.ms", "long", "86400000", "log.cleaner.delete.retention.ms",
               at_least=0),
        _topic("message.timestamp.after.max.ms", "long", "3600000",
               "log.message.timestamp.after.max.ms", at_least=0),
        _topic("max.decompressed.message.bytes", "int", "2147483639",
               "max.decompressed.message.bytes", at_least=0),
        _topic("message.timestamp.before.max.ms", "long", str(INT64_MAX),
               "log.message.timestamp.before.max.ms", at_least=0),
        _topic("segment.ms", "long", "604800000", "log.roll.ms", ("log.roll.hours", HOURS),
               at_least=1),
        _topic("segment.index.bytes", "int", "10485760", "log.index.size.max.bytes",
               at_least=4),
    )
}  # fmt: skip

#: Kafka's broker defaults of the topic configs' synonyms (``None``: null), by name.
_SYNONYM_DEFAULTS: Mapping[str, tuple[str, str | None]] = {
    "log.roll.ms": ("long", None),
    "log.roll.hours": ("int", "168"),
    "log.roll.jitter.ms": ("long", None),
    "log.roll.jitter.hours": ("int", "0"),
    "log.retention.ms": ("long", None),
    "log.retention.minutes": ("int", None),
    "log.retention.hours": ("int", "168"),
    "log.flush.interval.ms": ("long", None),
    "log.flush.scheduler.interval.ms": ("long", str(INT64_MAX)),
}
#: Broker configs Kafka does not change without a restart (the rest of :data:`BROKER_KEYS`
#: are in Kafka's ``DynamicBrokerConfig.AllDynamicConfigs``).
_STATIC_ONLY = frozenset(
    {"log.roll.hours", "log.roll.jitter.hours", "log.retention.minutes", "log.retention.hours",
     "log.flush.scheduler.interval.ms"}
    | {name for name, key in CONFIGS.items() if key.target != "topic"}
) - {"unclean.leader.election.enable", "group.consumer.assignment.interval.ms",
     "log.index.interval.bytes", "log.index.size.max.bytes"}  # fmt: skip
#: Kafka's groups of broker synonyms (``DynamicBrokerConfig.brokerConfigSynonyms``).
_BROKER_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    """The broker configs that stand for ``name``, first first (Kafka's
    ``brokerConfigSynonyms``; ``log.flush.interval.ms`` only from its own side)."""
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group and (name == group[0] or group[0] != "log.flush.interval.ms"):
            return group
    return (name,)


def _broker_keys() -> dict[str, KafkaConfigKey]:
    keys: dict[str, KafkaConfigKey] = {}
    for name, honoured in CONFIGS.items():
        keys[name] = KafkaConfigKey(
            name, honoured.type, None if honoured.default is None else honoured.default_text,
            at_least=honoured.at_least, at_most=honoured.at_most, read_only=name in _STATIC_ONLY,
            doc=honoured.doc,
        )  # fmt: skip
    for topic_key in TOPIC_KEYS.values():
        for synonym, _ in topic_key.synonyms:
            if synonym in keys:
                continue
            type_, default = _SYNONYM_DEFAULTS.get(synonym, (topic_key.type, topic_key.default))
            keys[synonym] = attrs.evolve(
                topic_key, name=synonym, type=type_, default=default, synonyms=(),
                read_only=synonym in _STATIC_ONLY,
                at_least=None if synonym in _SYNONYM_DEFAULTS else topic_key.at_least,
            )  # fmt: skip
    return keys


#: The broker configs DescribeConfigs lists for a broker.
BROKER_KEYS: Mapping[str, KafkaConfigKey] = _broker_keys()


def _group(name: str, type_: str, default: str | None, synonym: str | None, doc: str,
           **checks: Any) -> KafkaConfigKey:  # fmt: skip
    return KafkaConfigKey(name, type_, default, synonyms=((synonym or name, 1),), doc=doc,
                          **checks)  # fmt: skip


_SHARE_RESET_DOC = (
    "The strategy to initialize the share-partition start offset. <ul><li>earliest: "
    "automatically reset the offset to the earliest offset</li><li>latest: automatically reset "
    "the offset to the latest offset</li><li>by_duration:&lt;duration&gt;: automatically reset "
    "the offset to a configured duration from the current timestamp. &lt;duration&gt; must be "
    "specified in ISO8601 format (PnDTnHnMn.nS). Negative duration is not allowed.</li><li>"
    "anything else: throw exception to the share consumer.</li></ul>"
)
_ISOLATION_DOC = (
    'Controls how to read records written transactionally. If set to "read_committed", the '
    "share group will only deliver transactional records which have been committed. If set to "
    '"read_uncommitted", the share group will return all messages, even transactional messages '
    "which have been aborted. Non-transactional records will be returned unconditionally in "
    "either mode."
)
_ASSIGNOR_DOC = (
    "The task assignor to use for this streams group, selected by short name from the "
    "assignors registered via the broker configuration group.streams.assignors. When unset, the "
    "group defaults to the first assignor configured in the broker's group.streams.assignors "
    "setting. Changing the assignor does not trigger a rebalance for the group; the new "
    "assignor takes effect on the next rebalance."
)
_DLQ_DOC = (
    "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group."
    " If blank (the default), the group does not have a DLQ topic."
)
_DLQ_COPY_DOC = (
    "When writing onto the dead-letter queue topic, whether to copy the original record onto "
    "the DLQ topic, or just write a record containing the context information headers."
)
_TAGS_DOC = (
    "List of client tag keys used to distribute standby replicas across Kafka Streams "
    "instances. When configured, and the used broker-side assignor supports it, it will make a "
    "best-effort to distribute standby tasks over each client tag dimension."
)

#: Kafka 4.4's group configs (``GroupConfig``) in the order its DescribeConfigs lists them, each
#: with the broker config it overrides (its synonym, whose value is its default) and Kafka's
#: ``ConfigDef`` validator; the ranges the broker's configs set are checked in
#: :mod:`coordkit.serve.apis.configs.groups`.
GROUP_KEYS: Mapping[str, KafkaConfigKey] = {
    key.name: key
    for key in (
        _group("consumer.session.timeout.ms", "int", "45000",
               "group.consumer.session.timeout.ms",
               "The timeout to detect client failures when using the consumer group protocol.",
               at_least=1),
        _group("streams.assignor.name", "string", "sticky", "group.streams.assignors",
               _ASSIGNOR_DOC),
        _group("consumer.assignment.interval.ms", "int", "1000",
               "group.consumer.assignment.interval.ms",
               "The interval between assignment updates for a consumer group.", at_least=0),
        _group("errors.deadletterqueue.copy.record.enable", "boolean", "false", None,
               _DLQ_COPY_DOC),
        _group("share.auto.offset.reset", "string", "latest", None, _SHARE_RESET_DOC),
        _group("streams.rack.aware.assignment.tags", "list", "",
               "group.streams.rack.aware.assignment.tags", _TAGS_DOC),
        _group("share.renew.acknowledge.enable", "boolean", "true", None,
               "Whether the renew acknowledge type is enabled for the share group."),
        _group("streams.initial.rebalance.delay.ms", "int", "3000",
               "group.streams.initial.rebalance.delay.ms",
               "The amount of time the group coordinator will wait for more streams clients to "
               "join a new group before performing the first rebalance. A longer delay means "
               "potentially fewer rebalances.", at_least=0),
        _group("share.session.timeout.ms", "int", "45000", "group.share.session.timeout.ms",
               "The timeout to detect client failures when using the share group protocol.",
               at_least=1),
        _group("streams.assignment.interval.ms", "int", "1000",
               "group.streams.assignment.interval.ms",
               "The interval between assignment updates for a streams group.", at_least=0),
        _group("share.heartbeat.interval.ms", "int", "5000", "group.share.heartbeat.interval.ms",
               "The heartbeat interval given to the members of a share group.", at_least=1),
        _group("streams.heartbeat.interval.ms", "int", "5000",
               "group.streams.heartbeat.interval.ms",
               "The heartbeat interval given to the members.", at_least=1),
        _group("share.delivery.count.limit", "int", "5", "group.share.delivery.count.limit",
               "The maximum number of delivery attempts for a record delivered to a share "
               "group.", at_least=2),
        _group("errors.deadletterqueue.topic.name", "string", "", None, _DLQ_DOC),
        _group("consumer.heartbeat.interval.ms", "int", "5000",
               "group.consumer.heartbeat.interval.ms",
               "The heartbeat interval given to the members of a consumer group.", at_least=1),
        _group("share.record.lock.duration.ms", "int", "30000",
               "group.share.record.lock.duration.ms",
               "The record acquisition lock duration in milliseconds for share groups.",
               at_least=1000),
        _group("share.assignment.interval.ms", "int", "1000", "group.share.assignment.interval.ms",
               "The interval between assignment updates for a share group.", at_least=0),
        _group("share.isolation.level", "string", "read_uncommitted", None, _ISOLATION_DOC,
               choices=("read_committed", "read_uncommitted")),
        _group("streams.session.timeout.ms", "int", "45000", "group.streams.session.timeout.ms",
               "The timeout to detect client failures when using the streams group protocol.",
               at_least=1),
        _group("share.partition.max.record.locks", "int", "2000",
               "group.share.partition.max.record.locks",
               "Share-group record lock limit per share-partition.", at_least=100),
        _group("streams.num.standby.replicas", "int", "0", "group.streams.num.standby.replicas",
               "The number of standby replicas for each task.", at_least=0),
    )
}  # fmt: skip
#: Group configs Kafka 4.4 accepts but does not describe (internal), in ``GroupConfig``'s order.
INTERNAL_GROUP_KEYS: Mapping[str, KafkaConfigKey] = {
    key.name: key
    for key in (
        _group("consumer.assignor.offload.enable", "boolean", "true",
               "group.consumer.assignor.offload.enable",
               "Whether to offload consumer group assignment to a group coordinator background "
               "thread."),
        _group("share.assignor.offload.enable", "boolean", "true",
               "group.share.assignor.offload.enable", ""),
        _group("streams.assignor.offload.enable", "boolean", "true",
               "group.streams.assignor.offload.enable", ""),
        _group("streams.task.offset.interval.ms", "int", "60000",
               "group.streams.task.offset.interval.ms", "", at_least=1),
        _group("streams.num.warmup.replicas", "int", "2", "group.streams.num.warmup.replicas", "",
               at_least=0),
        _group("streams.acceptable.recovery.lag", "long", "10000",
               "group.streams.acceptable.recovery.lag", "", at_least=0),
    )
}  # fmt: skip
#: ``GroupConfig``'s definition order (ConfigDef parses, and refuses, in this order).
GROUP_DEFINITION_ORDER = (
    "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
    "consumer.assignment.interval.ms", "consumer.assignor.offload.enable",
    "share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
    "share.delivery.count.limit", "share.partition.max.record.locks", "share.auto.offset.reset",
    "share.assignment.interval.ms", "share.assignor.offload.enable",
    "streams.session.timeout.ms", "streams.heartbeat.interval.ms",
    "streams.num.standby.replicas", "streams.initial.rebalance.delay.ms",
    "streams.assignment.interval.ms", "streams.rack.aware.assignment.tags",
    "streams.assignor.offload.enable", "streams.task.offset.interval.ms",
    "streams.num.warmup.replicas", "streams.acceptable.recovery.lag", "streams.assignor.name",
    "share.isolation.level", "share.renew.acknowledge.enable",
    "errors.deadletterqueue.topic.name", "errors.deadletterqueue.copy.record.enable",
)  # fmt: skip

#: Kafka 4.4's client-metrics subscription configs (``ClientMetricsConfigs``), in its order.
CLIENT_METRICS_KEYS: Mapping[str, KafkaConfigKey] = {
    key.name: key
    for key in (
        KafkaConfigKey("interval.ms", "int", "300000",
                       doc="Metrics push interval in milliseconds"),
        KafkaConfigKey("match", "list", "", doc="Client match criteria"),
        KafkaConfigKey("metrics", "list", "", doc="Telemetry metric name prefix list"),
    )
}  # fmt: skip
