"""Value objects for Kafka's coordination data (seeds 000, 001, 003).

Plain, immutable and validated; encoding to and from znode JSON lives in :mod:`coordkit.kafka.layout`.
Use :func:`attrs.evolve` for changed copies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from attrs import field, frozen, validators

from coordkit.store.paths import numeric_name

_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249
NO_LEADER = -1


def validate_topic_name(topic: str) -> str:
    """Kafka's topic name rules; raises ``ValueError`` naming the problem."""
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"topic name must be a non-empty string, got {topic!r}")
    if topic in (".", ".."):
        raise ValueError(f"topic name {topic!r} is not allowed")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise ValueError(
            f"topic name {topic[:20]!r}... is longer than {MAX_TOPIC_LENGTH} characters"
        )
    if not _TOPIC_RE.match(topic):
        raise ValueError(
            f"topic name {topic!r} may contain only ASCII letters, digits, '.', '_' and '-'"
        )
    return topic


def _topic(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    validate_topic_name(value)


def _non_negative(_: Any, attribute: attrs.Attribute[Any], value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative integer, got {value!r}")


def _at_least(minimum: int) -> Any:
    def check(_: Any, attribute: attrs.Attribute[Any], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"{attribute.name} must be an integer >= {minimum}, got {value!r}")

    return check


def _ms_timestamp(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not isinstance(value, str) or not (value.isascii() and value.isdigit()):
        raise ValueError(
            f"{attribute.name} must be milliseconds since the epoch as a string, got {value!r}"
        )


def _check_broker_ids(label: str, value: tuple[int, ...]) -> None:
    for broker in value:
        if not isinstance(broker, int) or isinstance(broker, bool) or broker < 0:
            raise ValueError(f"{label} must hold broker ids (integers >= 0), got {broker!r}")
    if len(set(value)) != len(value):
        raise ValueError(f"{label} lists a broker twice: {list(value)}")


def _broker_list(_: Any, attribute: attrs.Attribute[Any], value: tuple[int, ...]) -> None:
    _check_broker_ids(attribute.name, value)


def _replica_map(value: Mapping[int, Iterable[int]]) -> dict[int, tuple[int, ...]]:
    return {int(p): tuple(r) for p, r in sorted(dict(value).items())}


def _sorted_dict(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(sorted(dict(value).items()))


def _dict(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


@frozen(order=True)
class TopicPartition:
    """A partition of a topic, written ``topic-partition``."""

    topic: str
    partition: int = field(validator=_non_negative)

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """Parse ``topic-partition`` (the topic may itself contain ``-``)."""
        topic, sep, number = text.rpartition("-")
        partition = numeric_name(number)
        if not sep or not topic or partition is None:
            raise ValueError(
                f"{text!r} is not a partition written topic-partition (e.g. 'orders-3')"
            )
        return cls(topic, partition)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@frozen
class BrokerInfo:
    """``/brokers/ids/N``: where a broker listens (ephemeral, owned by the broker's session)."""

    host: str
    port: int = field(validator=validators.and_(_non_negative, validators.le(65535)))
    timestamp: str = field(validator=_ms_timestamp)
    jmx_port: int = field(default=-1, validator=_at_least(-1))
    version: int = field(default=1, validator=_at_least(1))
    rack: str | None = None
    endpoints: tuple[str, ...] = field(default=(), converter=tuple)


@frozen
class TopicAssignment:
    """``/brokers/topics/T``: the replica list of every partition (first replica is preferred).

    Kafka 2.8+ writes version 3 with the topic's id; every write keeps the id it found.
    While a partition is reassigned (Kafka's KIP-455, node version 2+), its list holds the target
    replicas followed by the original ones, and ``adding`` / ``removing`` name the replicas being
    added and removed; both are empty otherwise.
    """

    partitions: Mapping[int, tuple[int, ...]] = field(converter=_replica_map)
    version: int = field(default=1, validator=_at_least(1))
    adding: Mapping[int, tuple[int, ...]] = field(factory=dict, converter=_replica_map)
    removing: Mapping[int, tuple[int, ...]] = field(factory=dict, converter=_replica_map)
    #: The topic's id (Kafka 2.8+, node version 3): Kafka's UUID in URL-safe base64.
    topic_id: str | None = field(
        default=None,
        validator=validators.optional(
            validators.and_(validators.instance_of(str), validators.min_len(1))
        ),
    )

    def original_replicas(self, partition: int) -> tuple[int, ...]:
        """The replicas before a reassignment in progress (all of them when none runs)."""
        adding = set(self.adding.get(partition, ()))
        return tuple(r for r in self.partitions[partition] if r not in adding)

    def target_replicas(self, partition: int) -> tuple[int, ...]:
        """The replicas a reassignment in progress ends with (all of them when none runs)."""
        removing = set(self.removing.get(partition, ()))
        return tuple(r for r in self.partitions[partition] if r not in removing)

    @partitions.validator
    def _check(self, attribute: attrs.Attribute[Any], value: Mapping[int, tuple[int, ...]]) -> None:
        expected = list(range(len(value)))
        if sorted(value) != expected:
            raise ValueError(
                f"partitions must be numbered 0..{len(value) - 1}, got {sorted(value)}"
            )
        for partition, replicas in value.items():
            if not replicas:
                raise ValueError(f"partition {partition} has no replicas")
            _check_broker_ids(f"partitions[{partition}]", replicas)

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def replication_factor(self) -> int:
        return len(next(iter(self.partitions.values()))) if self.partitions else 0


@frozen
class PartitionState:
    """``/brokers/topics/T/partitions/P/state``: leader, leader epoch, ISR, and the controller
    epoch of the controller that wrote it."""

    leader: int = field(validator=_at_least(NO_LEADER))
    leader_epoch: int = field(validator=_non_negative)
    isr: tuple[int, ...] = field(converter=tuple, validator=_broker_list)
    controller_epoch: int = field(validator=_non_negative)
    version: int = field(default=1, validator=_at_least(1))

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


@frozen
class ControllerInfo:
    """``/controller``: which broker is the controller (ephemeral).

    Kafka 3.9 writes version 2, which adds ``kraftControllerEpoch`` (KIP-866): -1 for a
    ZooKeeper-mode controller, a KRaft controller's epoch while it migrates a cluster to KRaft
    (a version 1 node is read as -1).
    """

    broker_id: int = field(validator=_non_negative)
    timestamp: str = field(validator=_ms_timestamp)
    version: int = field(default=2, validator=_at_least(1))
    kraft_controller_epoch: int = field(default=-1, validator=_at_least(-1))


@frozen
class ControllerEpoch:
    """``/controller_epoch``: how many times a controller has been elected (a bare integer)."""

    epoch: int = field(validator=_non_negative)


@frozen
class ClusterId:
    """``/cluster/id``: the cluster's id, made by the first broker that finds none (Kafka: a
    random UUID in URL-safe base64, 22 characters); Metadata and DescribeCluster return it."""

    id: str = field(validator=validators.and_(validators.instance_of(str), validators.min_len(1)))
    version: int = 1


@frozen
class ConsumerRegistration:
    """``/consumers/G/ids/C``: a legacy consumer's subscription (topic → stream count), ephemeral."""

    subscription: Mapping[str, int] = field(converter=_sorted_dict)
    timestamp: str = field(validator=_ms_timestamp)
    pattern: str = field(
        default="static", validator=validators.in_(("static", "white_list", "black_list"))
    )
    version: int = field(default=1, validator=_at_least(1))

    @subscription.validator
    def _check(self, attribute: attrs.Attribute[Any], value: Mapping[str, int]) -> None:
        for topic, streams in value.items():
            if not isinstance(topic, str) or not topic:
                raise ValueError(f"subscription has an empty topic name: {topic!r}")
            if not isinstance(streams, int) or isinstance(streams, bool) or streams < 1:
                raise ValueError(
                    f"subscription[{topic!r}] must be a stream count >= 1, got {streams!r}"
                )


@frozen
class ConsumerOwner:
    """``/consumers/G/owners/T/P``: the consumer thread owning a partition (``consumerId-thread``)."""

    thread_id: str = field(validator=validators.min_len(1))


@frozen
class ConsumerOffset:
    """``/consumers/G/offsets/T/P``: the next offset to consume (a bare integer)."""

    offset: int = field(validator=_at_least(-1))


@frozen
class TopicConfig:
    """``/config/topics/T``: per-topic configuration overrides (values are strings)."""

    #: In the order the keys were set (a node's keys are written in Kafka's order from it:
    #: :func:`coordkit.kafka.java.properties_order`); equality ignores the order.
    config: Mapping[str, str] = field(factory=dict, converter=_dict)
    version: int = field(default=1, validator=_at_least(1))

    @config.validator
    def _check(self, attribute: attrs.Attribute[Any], value: Mapping[str, str]) -> None:
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                raise ValueError(f"config entries must be strings, got {key!r}: {item!r}")


@frozen
class DeleteTopicMarker:
    """``/admin/delete_topics/T``: a request to delete topic T (the node holds no data)."""
