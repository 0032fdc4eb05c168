"""Kafka's broker configs that ``coordkit serve`` honours, by Kafka's names, types and defaults.

``coordkit serve --config KEY=VALUE`` (repeatable) sets them; :func:`parse_broker_configs` reads
those words and refuses an unknown name or a bad value in one line naming the option. Each
config says where it goes: a field of :class:`~coordkit.engine.EngineConfig` (the engine's
brokers, controller and group coordinators) or of :class:`ServeSettings` (the wire side), with
Kafka's unit turned into the field's (milliseconds into seconds).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from coordkit.engine.config import EngineConfig
from coordkit.serve.context import ServeSettings
from coordkit.serve.topic_configs import broker_defaults
from coordkit.store.urls import StoreURL

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class BrokerConfigError(ValueError):
    """A ``--config`` word names no config this broker honours, or gives it a bad value."""


@attrs.frozen
class ConfigKey:
    """One broker config, as Kafka's ``ConfigDef.ConfigKey`` describes it.

    :param type: Kafka's type name (``int``, ``long``, ``short``, ``boolean``).
    :param at_least: the smallest value allowed (Kafka's ``atLeast`` validator), if any.
    :param at_most: the largest value allowed (the high end of Kafka's ``between``), if any.
    :param target: ``engine`` or ``serve``: which settings object the value goes to; or
        ``topic``: a topic config's default only (:mod:`coordkit.serve.topic_configs` lists
        each topic config's broker synonyms); or ``store``: a parameter of the store URL
        (:func:`store_url_for`); or ``bound``: a bound other configs are checked against when
        the broker starts (:data:`SHARE_BOUND_CHECKS`) and a group's configs when they are set.
    :param field: that object's attribute (for ``topic``: the topic config it defaults).
    :param convert: Kafka's value into the attribute's (e.g. milliseconds into seconds).
    """

    name: str
    type: str
    default: Any
    doc: str
    target: str
    field: str
    at_least: int | None = None
    convert: Callable[[Any], Any] = lambda value: value
    at_most: int | None = None

    @property
    def default_text(self) -> str:
        """The default as it is written on the command line (``uniform,range``, ``true``;
        ``null``: unset, as Kafka shows a default left to the next synonym)."""
        if self.default is None:
            return "null"
        if self.type == "list":
            return ",".join(self.default)
        return str(self.default).lower()

    def parse(self, text: str) -> Any:
        """The value of ``text``, checked; :class:`BrokerConfigError` says what is wrong."""
        if self.type == "string":
            return text.strip()
        if self.type == "list":
            items = tuple(item.strip() for item in text.split(",") if item.strip())
            if not items:
                raise BrokerConfigError("an empty list (give at least one name)")
            return items
        if self.type == "boolean":
            lowered = text.strip().lower()
            if lowered not in ("true", "false"):
                raise BrokerConfigError(f"{text!r} is not a boolean (true or false)")
            return lowered == "true"
        try:
            value = int(text.strip())
        except ValueError:
            raise BrokerConfigError(f"{text!r} is not an integer ({self.type})") from None
        highest = {"short": 2**15 - 1, "int": INT32_MAX, "long": INT64_MAX}[self.type]
        if not -highest - 1 <= value <= highest:
            raise BrokerConfigError(f"{value} is out of range for a {self.type}")
        if self.at_least is not None and value < self.at_least:
            raise BrokerConfigError(f"{value} is below the minimum of {self.at_least}")
        if self.at_most is not None and value > self.at_most:
            raise BrokerConfigError(f"{value} is above the maximum of {self.at_most}")
        return value


def _seconds(ms: int) -> float:
    return ms / 1000


#: Kafka's class names of its server assignors, accepted for their coordkit names.
KAFKA_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def _assignor_names(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(KAFKA_ASSIGNOR_CLASSES.get(n, n) for n in names))


#: Kafka's class name of its share assignor -> coordkit's plugin name.
KAFKA_SHARE_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.SimpleAssignor": "simple"
}


def _share_assignor_names(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(KAFKA_SHARE_ASSIGNOR_CLASSES.get(n, n) for n in names))


def _offline_election(unclean: bool) -> str:
    return "offline-unclean" if unclean else "offline"


#: Every config ``coordkit serve`` honours, with Kafka's default (but where noted).
CONFIGS: Mapping[str, ConfigKey] = {
    key.name: key
    for key in (
        ConfigKey("group.min.session.timeout.ms", "int", 6_000,
                  "The shortest session a classic group member may ask for (JoinGroup).",
                  "engine", "group_min_session_timeout", 1, _seconds),
        ConfigKey("group.max.session.timeout.ms", "int", 1_800_000,
                  "The longest session a classic group member may ask for (JoinGroup).",
                  "engine", "group_max_session_timeout", 1, _seconds),
        ConfigKey("group.initial.rebalance.delay.ms", "int", 3_000,
                  "How long a new classic group waits for more members before its first "
                  "rebalance.", "engine", "group_initial_rebalance_delay", 0, _seconds),
        # KIP-848's consumer groups.
        ConfigKey("group.consumer.assignors", "list", ("uniform", "range"),
                  "The server-side assignors consumer groups may name (group.remote.assignor); "
                  "the first is the default. Any registered server assignor (coordkit plugins), "
                  "or Kafka's class names of uniform and range.",
                  "engine", "consumer_group_assignors", convert=_assignor_names),
        ConfigKey("group.consumer.session.timeout.ms", "int", 45_000,
                  "How long a consumer group member may go without a heartbeat.",
                  "engine", "consumer_group_session_timeout", 1, _seconds),
        ConfigKey("group.consumer.heartbeat.interval.ms", "int", 5_000,
                  "How often consumer group members heartbeat.",
                  "engine", "consumer_group_heartbeat_interval", 1, _seconds),
        ConfigKey("group.consumer.assignment.interval.ms", "int", 1_000,
                  "How often at most a consumer group's target assignment is computed (a burst "
                  "of joins is assigned once).", "engine", "consumer_group_assignment_interval", 0,
                  _seconds),
        ConfigKey("group.consumer.max.size", "int", INT32_MAX,
                  "The most members a consumer group may have.",
                  "engine", "consumer_group_max_size", 1),
        # The transaction coordinator (issue 38): Kafka's TransactionStateManagerConfig and
        # TransactionLogConfig.
        ConfigKey("transaction.max.timeout.ms", "int", 900_000,
                  "The longest transaction timeout a producer may ask for.",
                  "serve", "transaction_max_timeout_ms", 1),
        ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000,
                  "How often each transaction coordinator aborts the transactions open past "
                  "their timeout (and completes the prepared ones it took over).",
                  "serve", "transaction_abort_timed_out_cleanup_interval_ms", 1),
        ConfigKey("transaction.state.log.num.partitions", "int", 50,
                  "The partitions of __transaction_state when it is created.",
                  "serve", "transaction_state_num_partitions", 1),
        ConfigKey("transaction.state.log.replication.factor", "short", 3,
                  "The replication factor of __transaction_state (capped by the live brokers).",
                  "serve", "transaction_state_replication_factor", 1),
        ConfigKey("transaction.state.log.min.isr", "int", 2,
                  "The min.insync.replicas __transaction_state is created with.",
                  "serve", "transaction_state_min_isr", 1),
        ConfigKey("transaction.partition.verification.enable", "boolean", True,
                  "Whether a partition leader verifies a transactional batch that opens a "
                  "transaction with the transaction coordinator before appending it.",
                  "serve", "transaction_partition_verification_enable"),
        # Share partitions (KIP-932), Kafka 4.4's ShareGroupConfig (a group's configs
        # share.delivery.count.limit, ... override the first three).
        ConfigKey("group.share.delivery.count.limit", "int", 5,
                  "How often a share group's record is delivered at most before it is archived.",
                  "serve", "share_delivery_count_limit", 2, at_most=10),
        ConfigKey("group.share.record.lock.duration.ms", "int", 30_000,
                  "How long a share group member holds the records it acquired.",
                  "serve", "share_record_lock_duration_ms", 1_000, at_most=3_600_000),
        ConfigKey("group.share.partition.max.record.locks", "int", 2_000,
                  "The most records in flight per share partition.",
                  "serve", "share_partition_max_record_locks", 100, at_most=10_000),
        ConfigKey("group.share.min.delivery.count.limit", "int", 2,
                  "The lowest delivery count limit (the broker's and a group's).",
                  "bound", "", 2, at_most=5),
        ConfigKey("group.share.max.delivery.count.limit", "int", 10,
                  "The highest delivery count limit (the broker's and a group's).",
                  "bound", "", 5, at_most=25),
        ConfigKey("group.share.min.record.lock.duration.ms", "int", 15_000,
                  "The shortest record lock (the broker's and a group's).",
                  "bound", "", 1_000, at_most=30_000),
        ConfigKey("group.share.max.record.lock.duration.ms", "int", 60_000,
                  "The longest record lock (the broker's and a group's).",
                  "bound", "", 30_000, at_most=3_600_000),
        ConfigKey("group.share.min.partition.max.record.locks", "int", 100,
                  "The lowest record lock limit per share partition (the broker's and a group's).",
                  "bound", "", 100, at_most=2_000),
        ConfigKey("group.share.max.partition.max.record.locks", "int", 4_000,
                  "The highest record lock limit per share partition (the broker's and a "
                  "group's).", "bound", "", 2_000, at_most=10_000),
        ConfigKey("group.share.max.share.sessions", "int", 2_000,
                  "The most share sessions a broker keeps.", "serve", "share_max_share_sessions",
                  1),
        # Share groups (KIP-932), Kafka 4.4's GroupCoordinatorConfig.
        ConfigKey("group.share.assignors", "list", ("simple",),
                  "The share-partition assignor share groups use (the first named). Any "
                  "registered share assignor (coordkit plugins), or Kafka's class name of simple.",
                  "engine", "share_group_assignors", convert=_share_assignor_names),
        ConfigKey("group.share.session.timeout.ms", "int", 45_000,
                  "How long a share group member may go without a heartbeat.",
                  "engine", "share_group_session_timeout", 1, _seconds),
        ConfigKey("group.share.heartbeat.interval.ms", "int", 5_000,
                  "How often share group members heartbeat.",
                  "engine", "share_group_heartbeat_interval", 1, _seconds),
        ConfigKey("group.share.max.size", "int", 200,
                  "The most members a share group may have.",
                  "engine", "share_group_max_size", 1, at_most=1_000),
        ConfigKey("group.share.min.session.timeout.ms", "int", 45_000,
                  "The shortest share group session (the broker's and a group's).",
                  "bound", "", 1),
        ConfigKey("group.share.max.session.timeout.ms", "int", 60_000,
                  "The longest share group session (the broker's and a group's).",
                  "bound", "", 1),
        ConfigKey("group.share.min.heartbeat.interval.ms", "int", 5_000,
                  "The shortest share group heartbeat interval (the broker's and a group's).",
                  "bound", "", 1),
        ConfigKey("group.share.max.heartbeat.interval.ms", "int", 15_000,
                  "The longest share group heartbeat interval (the broker's and a group's).",
                  "bound", "", 1),
        ConfigKey("offsets.topic.num.partitions", "int", 50,
                  "Partitions of __consumer_offsets (fixed once the topic exists).",
                  "engine", "offsets_topic_num_partitions", 1),
        ConfigKey("offsets.topic.replication.factor", "short", 3,
                  "Replication factor of __consumer_offsets (capped by the live brokers).",
                  "engine", "offsets_topic_replication_factor", 1),
        ConfigKey("auto.leader.rebalance.enable", "boolean", True,
                  "Move leadership back to preferred replicas in the background.",
                  "engine", "auto_leader_rebalance"),
        ConfigKey("leader.imbalance.check.interval.seconds", "long", 300,
                  "How often the controller checks leader imbalance.",
                  "engine", "leader_imbalance_check_interval", 1, float),
        ConfigKey("leader.imbalance.per.broker.percentage", "int", 10,
                  "Imbalance allowed per broker before a preferred election.",
                  "engine", "leader_imbalance_per_broker_percentage", 0, float),
        ConfigKey("delete.topic.enable", "boolean", True,
                  "Whether topics can be deleted.", "engine", "delete_topic_enable"),
        ConfigKey("unclean.leader.election.enable", "boolean", False,
                  "Elect a replica outside the ISR when no ISR member is alive (loses records).",
                  "engine", "offline_election", convert=_offline_election),
        ConfigKey("min.insync.replicas", "int", 1,
                  "The fewest in-sync replicas a produce with acks=all needs: fewer, and it is "
                  "refused (NOT_ENOUGH_REPLICAS); the default of the topic config.",
                  "topic", "min.insync.replicas", 1),
        ConfigKey("replica.lag.time.max.ms", "long", 30_000,
                  "How long a follower may lag before its leader drops it from the ISR.",
                  "engine", "replica_lag_time_max", 1, _seconds),
        ConfigKey("replica.fetch.wait.max.ms", "int", 500,
                  "How long a follower's fetch waits for new records.",
                  "engine", "replica_fetch_wait_max", 1, _seconds),
        # Kafka's default is true; coordkit serve creates no topic unasked unless told to.
        ConfigKey("auto.create.topics.enable", "boolean", False,
                  "Create a topic that a Metadata request names (coordkit's default: false).",
                  "serve", "auto_create_topics"),
        ConfigKey("num.partitions", "int", 1,
                  "Partitions of an auto-created topic, and of CreateTopics leaving it to the "
                  "broker.", "serve", "default_partitions", 1),
        ConfigKey("default.replication.factor", "int", 1,
                  "Replication factor of an auto-created topic, and of CreateTopics leaving it "
                  "to the broker.", "serve", "default_replication_factor", 1),
        ConfigKey("socket.request.max.bytes", "int", 104_857_600,
                  "The largest request frame accepted.", "serve", "max_request_bytes", 8),
        # Logs: segments, retention and flush (the defaults of the topic configs of the same
        # names without "log."; Kafka's precedence: .ms, then .minutes, then .hours).
        ConfigKey("log.segment.bytes", "int", 1 << 30,
                  "The size at which a log rolls a new segment.", "topic", "segment.bytes", 14),
        ConfigKey("log.roll.ms", "long", None,
                  "The age at which a log rolls a new segment (null: log.roll.hours).",
                  "topic", "segment.ms", 1),
        ConfigKey("log.roll.hours", "int", 168,
                  "The age at which a log rolls a new segment, in hours.",
                  "topic", "segment.ms", 1),
        ConfigKey("log.retention.ms", "long", None,
                  "How long a log keeps a segment (-1: for ever; null: log.retention.minutes).",
                  "topic", "retention.ms", -1),
        ConfigKey("log.retention.minutes", "int", None,
                  "How long a log keeps a segment, in minutes (null: log.retention.hours).",
                  "topic", "retention.ms", -1),
        ConfigKey("log.retention.hours", "int", 168,
                  "How long a log keeps a segment, in hours.", "topic", "retention.ms", -1),
        ConfigKey("log.retention.bytes", "long", -1,
                  "How large a partition's log may grow before its oldest segments are deleted "
                  "(-1: no limit).", "topic", "retention.bytes"),
        ConfigKey("log.retention.check.interval.ms", "long", 300_000,
                  "How often each broker checks its logs' retention.",
                  "serve", "log_retention_check_interval_ms", 1),
        ConfigKey("log.cleaner.backoff.ms", "long", 15_000,
                  "How long each broker's log cleaner waits between its passes over the "
                  "compacted logs.", "serve", "log_cleaner_backoff_ms", 0),
        ConfigKey("log.flush.interval.messages", "long", INT64_MAX,
                  "Records appended to a log between two fsyncs.",
                  "topic", "flush.messages", 1),
        ConfigKey("log.flush.interval.ms", "long", None,
                  "Milliseconds between two fsyncs of a log, checked every "
                  "log.flush.scheduler.interval.ms (null: that interval).", "topic", "flush.ms", 0),
        ConfigKey("log.flush.scheduler.interval.ms", "long", INT64_MAX,
                  "How often each broker checks whether a log's flush.ms passed.",
                  "serve", "log_flush_scheduler_interval_ms", 0),
        ConfigKey("log.index.interval.bytes", "int", 4096,
                  "Bytes of batches between two entries of a segment's offset and time indexes.",
                  "serve", "log_index_interval_bytes", 0),
        ConfigKey("log.index.size.max.bytes", "int", 10 * 1024 * 1024,
                  "The largest offset or time index; a segment whose index is full rolls.",
                  "serve", "log_index_size_max_bytes", 4),
        # The authorizer's (target "authorizer": handed to it as text, as Kafka configures its
        # authorizer with every broker config).
        ConfigKey("authorizer.class.name", "string", "",
                  "The authorizer: a registered one's name (kafka) or Kafka's class names of "
                  "AclAuthorizer and StandardAuthorizer; empty: none, everything allowed.",
                  "authorizer", ""),
        ConfigKey("super.users", "string", "",
                  "Principals the authorizer allows everything, ';'-separated (User:admin).",
                  "authorizer", ""),
        ConfigKey("allow.everyone.if.no.acl.found", "boolean", False,
                  "Whether the authorizer allows an action on a resource no ACL applies to.",
                  "authorizer", ""),
        # The store's (target "store": a parameter of the store URL, see store_url_for).
        ConfigKey("zookeeper.set.acl", "boolean", None,
                  "ACLs on the znodes the brokers create, as Kafka's: the store's identity (its "
                  "URL's user:pass@ or jaas=FILE) may do everything, everyone else read, but "
                  "/config/users, /config/brokers and delegation tokens, which no one else may "
                  "(the URL's set_acl; null: on when the URL authenticates, else off).", "store",
                  "set_acl"),
    )
}  # fmt: skip


@attrs.frozen
class BrokerConfigs:
    """The broker configs set on the command line (the rest take their defaults)."""

    values: Mapping[str, Any] = attrs.field(factory=dict)

    def value(self, name: str) -> Any:
        return self.values.get(name, CONFIGS[name].default)

    def text(self, name: str) -> str:
        """The value of ``name`` as Kafka writes it (a list comma-separated, booleans lower)."""
        value = self.value(name)
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value).lower() if isinstance(value, bool) else str(value)

    def engine_config(self, base: EngineConfig | None = None) -> EngineConfig:
        """``base`` (default settings if none) with every engine config applied: the ones set
        and the defaults of the others, since Kafka's defaults are not always the engine's."""
        return attrs.evolve(base or EngineConfig(), **self._fields("engine"))

    def serve_settings(self, base: ServeSettings | None = None) -> ServeSettings:
        """``base`` with every serve config applied, and the topic configs' defaults that the
        configs set give (``log.retention.hours`` for ``retention.ms``, ...)."""
        return attrs.evolve(
            base or ServeSettings(),
            topic_defaults=broker_defaults(self.values),
            static_configs={name: self.text(name) for name in self.values},
            **self._fields("serve"),
        )

    def _fields(self, target: str) -> dict[str, Any]:
        return {
            key.field: key.convert(self.value(key.name))
            for key in CONFIGS.values()
            if key.target == target
        }


#: How a store URL may say true (the stores' own flag parsing refuses anything else).
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


def store_url_for(url: str, configs: BrokerConfigs, option: str = "--config") -> str:
    """``url`` with the store's share of the broker configs as its parameters (``zookeeper.set.acl``
    as ``set_acl``); the URL's own value, if it has one, must agree.

    :raises BrokerConfigError: a store config for a store it does not apply to, or disagreeing
        with the URL.
    """
    for key in CONFIGS.values():
        if key.target != "store" or key.name not in configs.values:
            continue
        value = configs.text(key.name)
        parsed = StoreURL.parse(url)
        if parsed.scheme != "zookeeper":
            if configs.values[key.name] is False:
                continue  # nothing to ask of a store without znodes
            raise BrokerConfigError(
                f"{option} {key.name}={value}: the store {parsed.redacted()} is not ZooKeeper "
                "(only znodes carry ACLs)"
            )
        given = parsed.params.get(key.field)
        if given is not None:
            if (given.strip().lower() in _TRUE_WORDS) != configs.values[key.name]:
                raise BrokerConfigError(
                    f"{option} {key.name}={value} and the store URL's {key.field}={given} "
                    "disagree: give one"
                )
            continue
        separator = "&" if parsed.query else "" if url.endswith("?") else "?"
        url += f"{separator}{key.field}={value}"
    return url


#: Kafka 4.4's checks of the share-group configs at a broker's start, in its order
#: (``GroupCoordinatorConfig``, then ``ShareGroupConfig``): ``(a, relation, b)``, Kafka's message
#: ``a must be <relation> b``.
SHARE_BOUND_CHECKS: tuple[tuple[str, str, str], ...] = (
    ("group.share.max.heartbeat.interval.ms", ">=", "group.share.min.heartbeat.interval.ms"),
    ("group.share.heartbeat.interval.ms", ">=", "group.share.min.heartbeat.interval.ms"),
    ("group.share.heartbeat.interval.ms", "<=", "group.share.max.heartbeat.interval.ms"),
    ("group.share.max.session.timeout.ms", ">=", "group.share.min.session.timeout.ms"),
    ("group.share.session.timeout.ms", ">=", "group.share.min.session.timeout.ms"),
    ("group.share.session.timeout.ms", "<=", "group.share.max.session.timeout.ms"),
    ("group.share.heartbeat.interval.ms", "<", "group.share.session.timeout.ms"),
    ("group.share.delivery.count.limit", ">=", "group.share.min.delivery.count.limit"),
    ("group.share.max.delivery.count.limit", ">=", "group.share.delivery.count.limit"),
    ("group.share.partition.max.record.locks", ">=",
     "group.share.min.partition.max.record.locks"),
    ("group.share.max.partition.max.record.locks", ">=",
     "group.share.partition.max.record.locks"),
    ("group.share.record.lock.duration.ms", ">=", "group.share.min.record.lock.duration.ms"),
    ("group.share.max.record.lock.duration.ms", ">=", "group.share.record.lock.duration.ms"),
)  # fmt: skip
_RELATIONS: Mapping[str, tuple[str, Callable[[int, int], bool]]] = {
    ">=": ("greater than or equal to", lambda a, b: a >= b),
    "<=": ("less than or equal to", lambda a, b: a <= b),
    "<": ("less than", lambda a, b: a < b),
}


def check_share_bounds(configs: BrokerConfigs, option: str = "--config") -> None:
    """Kafka 4.4 refuses to start a broker whose share-group session, heartbeat, record lock,
    delivery count limit or record locks lie outside their ``group.share.min/max.*`` bounds.

    :raises BrokerConfigError: the first check that fails, in Kafka's words and order.
    """
    for first, relation, second in SHARE_BOUND_CHECKS:
        words, holds = _RELATIONS[relation]
        a, b = configs.value(first), configs.value(second)
        if not holds(a, b):
            given = first if first in configs.values else second  # what the user set
            raise BrokerConfigError(
                f"{option} {given}={configs.value(given)}: {first} ({a}) must be {words} "
                f"{second} ({b}), as Kafka 4.4 requires at a broker's start"
            )


def parse_broker_configs(words: Iterable[str], option: str = "--config") -> BrokerConfigs:
    """``KEY=VALUE`` words into configs; the last word for a key wins, as in Kafka's files.

    :raises BrokerConfigError: one line naming the word and what is wrong with it.
    """
    values: dict[str, Any] = {}
    for word in words:
        name, sep, text = word.partition("=")
        name = name.strip()
        if not sep or not name:
            raise BrokerConfigError(
                f"{option} {word!r}: expected KEY=VALUE (a Kafka broker config)"
            )
        key = CONFIGS.get(name)
        if key is None:
            raise BrokerConfigError(
                f"{option} {name}: not a broker config coordkit serve honours "
                f"(see `coordkit serve --help-configs`)"
            )
        try:
            values[name] = key.parse(text)
        except BrokerConfigError as exc:
            raise BrokerConfigError(f"{option} {name}={text}: {exc}") from None
    configs = BrokerConfigs(values)
    low = configs.value("group.min.session.timeout.ms")
    high = configs.value("group.max.session.timeout.ms")
    if low > high:
        raise BrokerConfigError(
            f"{option} group.min.session.timeout.ms={low} is above "
            f"group.max.session.timeout.ms={high}: no session could be accepted"
        )
    check_share_bounds(configs, option)
    return configs
