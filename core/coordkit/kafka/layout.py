"""Kafka's znode layout: the paths and the exact JSON of every node (seeds 000, 001, 003).

Encoders write Kafka's field names and shapes (partition numbers as string keys, timestamps as
strings, compact JSON in the field order Kafka's own nodes show). Decoders accept any key order and
whitespace and raise :class:`~coordkit.errors.LayoutError` naming the path and the field on bad input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import attrs

from coordkit.errors import LayoutError
from coordkit.kafka.java import properties_order
from coordkit.kafka.model import (
    BrokerInfo,
    ClusterId,
    ConsumerOffset,
    ConsumerOwner,
    ConsumerRegistration,
    ControllerEpoch,
    ControllerInfo,
    DeleteTopicMarker,
    PartitionState,
    TopicAssignment,
    TopicConfig,
    validate_topic_name,
)
from coordkit.store.paths import numeric_name
from coordkit.support import jsontext

T = TypeVar("T")

# -- paths ----------------------------------------------------------------------------------------

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_BROKERS = "/config/brokers"
#: The cluster-wide broker configs' entity (Kafka's ``ZooKeeperInternals.DEFAULT_STRING``).
DEFAULT_BROKER = "<default>"
CONSUMERS = "/consumers"
CLUSTER_ID = "/cluster/id"
FEATURE = "/feature"

#: Persistent nodes a cluster creates at start-up: Kafka's (``ZkData.PersistentZkPaths``, which
#: its brokers create at start), those of what coordkit does not do yet included — generated
#: broker ids, dynamic configs of clients, users, brokers and IPs, producer id blocks, failed log
#: directories — so that the tree reads as Kafka's. (The engine adds its ISR notifications.)
PERSISTENT_ROOTS = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    "/brokers/seqid",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    CONFIG_TOPICS,
    "/config/clients",
    "/config/users",
    CONFIG_BROKERS,
    "/config/ips",
)


def _check_topic(topic: str, parent: str = BROKER_TOPICS) -> str:
    """``topic`` if it is a valid topic name; else a :class:`LayoutError` naming the node
    ``parent/topic`` the caller was about to address."""
    try:
        return validate_topic_name(topic)
    except ValueError as exc:
        raise LayoutError(f"{parent}/{topic}", str(exc), field="topic") from None


def _check_id(label: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{label} must be a non-negative integer, got {value!r}")
    return value


def plaintext_endpoint(host: str, port: int) -> str:
    """A broker registration's ``PLAINTEXT`` endpoint (an IPv6 literal in brackets, as Kafka's)."""
    return f"PLAINTEXT://[{host}]:{port}" if ":" in host else f"PLAINTEXT://{host}:{port}"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{_check_id('broker id', broker_id)}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{_check_topic(topic)}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{_check_id('partition', partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{_check_topic(topic, DELETE_TOPICS)}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{_check_topic(topic, CONFIG_TOPICS)}"


def broker_config_path(broker: str) -> str:
    """``/config/brokers/N`` (``broker`` a broker id) or ``/config/brokers/<default>``."""
    if broker != DEFAULT_BROKER and not broker.isdigit():
        raise LayoutError(f"{CONFIG_BROKERS}/{broker}", "not a broker id or <default>")
    return f"{CONFIG_BROKERS}/{broker}"


def consumer_group_path(group: str) -> str:
    if not group or "/" in group:
        raise ValueError(f"consumer group id must be non-empty and contain no '/', got {group!r}")
    return f"{CONSUMERS}/{group}"


def consumer_ids_path(group: str) -> str:
    return f"{consumer_group_path(group)}/ids"


def consumer_registration_path(group: str, consumer_id: str) -> str:
    return f"{consumer_ids_path(group)}/{consumer_id}"


def consumer_owners_path(group: str, topic: str) -> str:
    owners = f"{consumer_group_path(group)}/owners"
    return f"{owners}/{_check_topic(topic, owners)}"


def consumer_owner_path(group: str, topic: str, partition: int) -> str:
    return f"{consumer_owners_path(group, topic)}/{_check_id('partition', partition)}"


def consumer_offsets_path(group: str, topic: str) -> str:
    offsets = f"{consumer_group_path(group)}/offsets"
    return f"{offsets}/{_check_topic(topic, offsets)}"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    return f"{consumer_offsets_path(group, topic)}/{_check_id('partition', partition)}"


# -- JSON helpers ---------------------------------------------------------------------------------


def _dump(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _load_object(path: str, data: bytes) -> dict[str, Any]:
    try:
        value = jsontext.loads(data)
    except jsontext.JSONTextError as exc:
        raise LayoutError(path, str(exc)) from None
    if not isinstance(value, dict):
        raise LayoutError(path, f"expected a JSON object, got {type(value).__name__}")
    return value


def _field(
    path: str,
    obj: dict[str, Any],
    name: str,
    kind: type | tuple[type, ...],
    default: Any = attrs.NOTHING,
) -> Any:
    if name not in obj:
        if default is not attrs.NOTHING:
            return default
        raise LayoutError(path, "missing", field=name)
    value = obj[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
        expected = " or ".join(k.__name__ for k in _as_tuple(kind))
        raise LayoutError(path, f"expected {expected}, got {json.dumps(value)}", field=name)
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _int_list(path: str, obj: dict[str, Any], name: str) -> list[int]:
    values: list[int] = _field(path, obj, name, list)
    for item in values:
        if not isinstance(item, int) or isinstance(item, bool):
            raise LayoutError(
                path, f"expected a list of integers, found {json.dumps(item)}", field=name
            )
    return values


def _timestamp(path: str, obj: dict[str, Any], name: str = "timestamp") -> str:
    value = _field(path, obj, name, (str, int))
    text = str(value)
    if not (text.isascii() and text.isdigit()):
        raise LayoutError(
            path, f"expected milliseconds since the epoch, got {json.dumps(value)}", field=name
        )
    return text


def _build(path: str, factory: Callable[..., T], **kwargs: Any) -> T:
    try:
        return factory(**kwargs)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        # Validators start their messages with the field name; prefer the longest match.
        starts = [name for name in kwargs if message.startswith(name)]
        field = max(starts, key=len) if starts else next((n for n in kwargs if n in message), None)
        raise LayoutError(path, str(exc), field=field) from None


def _int_node(path: str, data: bytes, label: str) -> int:
    text = data.decode(errors="replace").strip()
    try:
        return int(text)
    except ValueError:
        raise LayoutError(path, f"expected an integer {label}, got {text!r}") from None


# -- codecs ---------------------------------------------------------------------------------------


@attrs.frozen
class Codec(Generic[T]):
    """Encodes and decodes the value of one kind of znode."""

    name: str
    encode: Callable[[T], bytes]
    decode_: Callable[[str, bytes], T]

    def decode(self, data: bytes, path: str = "?") -> T:
        return self.decode_(path, data)


def _encode_broker(b: BrokerInfo) -> bytes:
    obj: dict[str, Any] = {}
    if b.version >= 5:  # KIP-584: the features a broker supports; coordkit versions none
        obj["features"] = {}
    if b.version >= 4:
        # Listener name → security protocol: coordkit's listeners are named after theirs.
        listeners = (endpoint.split("://", 1)[0] for endpoint in b.endpoints)
        obj["listener_security_protocol_map"] = {name: name for name in listeners}
    if b.endpoints:
        obj["endpoints"] = list(b.endpoints)
    if b.rack is not None:
        obj["rack"] = b.rack
    obj.update(
        jmx_port=b.jmx_port, timestamp=b.timestamp, host=b.host, version=b.version, port=b.port
    )
    return _dump(obj)


def _decode_broker(path: str, data: bytes) -> BrokerInfo:
    obj = _load_object(path, data)
    return _build(
        path,
        BrokerInfo,
        host=_field(path, obj, "host", str),
        port=_field(path, obj, "port", int),
        timestamp=_timestamp(path, obj),
        jmx_port=_field(path, obj, "jmx_port", int, -1),
        version=_field(path, obj, "version", int),
        rack=_field(path, obj, "rack", (str, type(None)), None),
        endpoints=tuple(_field(path, obj, "endpoints", list, [])),
    )


def _encode_topic(t: TopicAssignment) -> bytes:
    obj: dict[str, Any] = {
        "version": t.version,
        "partitions": {str(p): list(r) for p, r in t.partitions.items()},
    }
    if t.version >= 2:  # KIP-455: reassignment state lives in the topic node
        obj["adding_replicas"] = {str(p): list(r) for p, r in t.adding.items()}
        obj["removing_replicas"] = {str(p): list(r) for p, r in t.removing.items()}
    if t.topic_id is not None:
        obj["topic_id"] = t.topic_id
    return _dump(obj)


def _decode_topic(path: str, data: bytes) -> TopicAssignment:
    obj = _load_object(path, data)
    raw = _field(path, obj, "partitions", dict)
    partitions: dict[int, list[int]] = {}
    for key in raw:
        number = numeric_name(key) if isinstance(key, str) else None
        if number is None:
            raise LayoutError(
                path, f"partition key {key!r} is not a partition number", field="partitions"
            )
        partitions[number] = _int_list(path, raw, key)
    moving: dict[str, dict[int, list[int]]] = {}
    for name in ("adding_replicas", "removing_replicas"):
        found = _field(path, obj, name, dict, default={})
        moving[name] = {}
        for key in found:
            if not isinstance(key, str) or numeric_name(key) is None:
                raise LayoutError(
                    path, f"partition key {key!r} is not a partition number", field=name
                )
            if int(key) not in partitions:
                raise LayoutError(path, f"partition {key} has no replica list", field=name)
            moving[name][int(key)] = _int_list(path, found, key)
    return _build(
        path,
        TopicAssignment,
        partitions=partitions,
        version=_field(path, obj, "version", int),
        adding={p: r for p, r in moving["adding_replicas"].items() if r},
        removing={p: r for p, r in moving["removing_replicas"].items() if r},
        topic_id=_field(path, obj, "topic_id", (str, type(None)), None),
    )


def _encode_state(s: PartitionState) -> bytes:
    return _dump(
        {
            "controller_epoch": s.controller_epoch,
            "leader": s.leader,
            "version": s.version,
            "leader_epoch": s.leader_epoch,
            "isr": list(s.isr),
        }
    )


def _decode_state(path: str, data: bytes) -> PartitionState:
    obj = _load_object(path, data)
    return _build(
        path,
        PartitionState,
        leader=_field(path, obj, "leader", int),
        leader_epoch=_field(path, obj, "leader_epoch", int),
        isr=tuple(_int_list(path, obj, "isr")),
        controller_epoch=_field(path, obj, "controller_epoch", int),
        version=_field(path, obj, "version", int),
    )


def _encode_controller(c: ControllerInfo) -> bytes:
    obj: dict[str, Any] = {"version": c.version, "brokerid": c.broker_id, "timestamp": c.timestamp}
    if c.version >= 2:  # KIP-866
        obj["kraftControllerEpoch"] = c.kraft_controller_epoch
    return _dump(obj)


def _decode_controller(path: str, data: bytes) -> ControllerInfo:
    obj = _load_object(path, data)
    return _build(
        path,
        ControllerInfo,
        broker_id=_field(path, obj, "brokerid", int),
        timestamp=_timestamp(path, obj),
        version=_field(path, obj, "version", int),
        kraft_controller_epoch=_field(path, obj, "kraftControllerEpoch", int, -1),
    )


def _decode_epoch(path: str, data: bytes) -> ControllerEpoch:
    return _build(path, ControllerEpoch, epoch=_int_node(path, data, "controller epoch"))


def _encode_cluster_id(c: ClusterId) -> bytes:
    # Kafka writes the version as a string here (ClusterIdZNode), unlike every other node.
    return _dump({"version": str(c.version), "id": c.id})


def _decode_cluster_id(path: str, data: bytes) -> ClusterId:
    obj = _load_object(path, data)
    version = _field(path, obj, "version", str)
    if not version.isdigit():
        raise LayoutError(path, f"version {version!r} is not a number", field="version")
    return _build(path, ClusterId, id=_field(path, obj, "id", str), version=int(version))


def _encode_registration(r: ConsumerRegistration) -> bytes:
    return _dump(
        {
            "version": r.version,
            "subscription": dict(r.subscription),
            "pattern": r.pattern,
            "timestamp": r.timestamp,
        }
    )


def _decode_registration(path: str, data: bytes) -> ConsumerRegistration:
    obj = _load_object(path, data)
    subscription = _field(path, obj, "subscription", dict)
    for topic, count in subscription.items():
        if not isinstance(count, int) or isinstance(count, bool):
            raise LayoutError(
                path, f"stream count of {topic!r} must be an integer", field="subscription"
            )
    return _build(
        path,
        ConsumerRegistration,
        subscription=subscription,
        pattern=_field(path, obj, "pattern", str),
        timestamp=_timestamp(path, obj),
        version=_field(path, obj, "version", int),
    )


def _decode_owner(path: str, data: bytes) -> ConsumerOwner:
    return _build(path, ConsumerOwner, thread_id=data.decode(errors="replace"))


def _decode_offset(path: str, data: bytes) -> ConsumerOffset:
    return _build(path, ConsumerOffset, offset=_int_node(path, data, "offset"))


def _encode_config(c: TopicConfig) -> bytes:
    # Kafka's key order (a Properties' iteration), so that a node holds Kafka's bytes.
    return _dump({"version": c.version, "config": properties_order(c.config)})


def _decode_config(path: str, data: bytes) -> TopicConfig:
    obj = _load_object(path, data)
    config = _field(path, obj, "config", dict)
    for key, value in config.items():
        if not isinstance(value, str):
            raise LayoutError(path, f"value of {key!r} must be a string", field="config")
    return _build(path, TopicConfig, config=config, version=_field(path, obj, "version", int))


def _decode_marker(path: str, data: bytes) -> DeleteTopicMarker:
    return DeleteTopicMarker()


BROKER = Codec[BrokerInfo]("broker registration", _encode_broker, _decode_broker)
TOPIC = Codec[TopicAssignment]("topic replica assignment", _encode_topic, _decode_topic)
PARTITION_STATE = Codec[PartitionState]("partition state", _encode_state, _decode_state)
CONTROLLER_INFO = Codec[ControllerInfo]("controller", _encode_controller, _decode_controller)
CONTROLLER_EPOCH_VALUE = Codec[ControllerEpoch](
    "controller epoch", lambda e: str(e.epoch).encode(), _decode_epoch
)
CLUSTER_ID_VALUE = Codec[ClusterId]("cluster id", _encode_cluster_id, _decode_cluster_id)
CONSUMER_REGISTRATION = Codec[ConsumerRegistration](
    "consumer registration", _encode_registration, _decode_registration
)
CONSUMER_OWNER = Codec[ConsumerOwner](
    "consumer owner", lambda o: o.thread_id.encode(), _decode_owner
)
CONSUMER_OFFSET = Codec[ConsumerOffset](
    "consumer offset", lambda o: str(o.offset).encode(), _decode_offset
)
TOPIC_CONFIG = Codec[TopicConfig]("topic config", _encode_config, _decode_config)
DELETE_TOPIC = Codec[DeleteTopicMarker]("delete-topic request", lambda _m: b"", _decode_marker)

# -- admin requests (kafka-reassign-partitions.sh, kafka-preferred-replica-election.sh) -----------


def encode_reassignment(plan: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    """Kafka's ``/admin/reassign_partitions`` JSON for ``plan``."""
    entries = [
        {"topic": topic, "partition": partition, "replicas": list(replicas)}
        for (topic, partition), replicas in sorted(plan.items())
    ]
    return json.dumps({"version": 1, "partitions": entries}, separators=(",", ":")).encode()


def decode_reassignment(
    data: bytes, path: str = REASSIGN_PARTITIONS
) -> dict[tuple[str, int], tuple[int, ...]]:
    """The plan a reassignment request holds; :class:`LayoutError` names what is malformed."""
    try:
        obj = jsontext.loads(data)
    except jsontext.JSONTextError as exc:
        raise LayoutError(path, str(exc)) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("partitions"), list):
        raise LayoutError(path, "expected an object with a list of partitions", field="partitions")
    plan: dict[tuple[str, int], tuple[int, ...]] = {}
    for index, entry in enumerate(obj["partitions"]):
        where = f"partitions[{index}]"
        if not isinstance(entry, dict):
            raise LayoutError(path, "expected an object", field=where)
        topic, partition, replicas = (
            entry.get("topic"),
            entry.get("partition"),
            entry.get("replicas"),
        )
        if not isinstance(topic, str) or not topic:
            raise LayoutError(path, f"topic {topic!r} is not a topic name", field=where)
        if type(partition) is not int or partition < 0:
            raise LayoutError(
                path, f"partition {partition!r} is not a partition number", field=where
            )
        if not isinstance(replicas, list) or not all(type(r) is int and r >= 0 for r in replicas):
            raise LayoutError(
                path, f"replicas {replicas!r} is not a list of broker ids", field=where
            )
        if (topic, partition) in plan:
            raise LayoutError(path, f"{topic}-{partition} is listed twice", field=where)
        plan[(topic, partition)] = tuple(replicas)
    return plan


#: ``/feature`` as Kafka's controller writes it when elected (KIP-584's version 2, status 1:
#: feature versioning enabled) with no feature finalized: coordkit versions none.
NO_FINALIZED_FEATURES = _dump({"features": {}, "version": 2, "status": 1})

#: Each config change is a sequential node under ``/config/changes`` named from this prefix.
CONFIG_CHANGE_PREFIX = f"{CONFIG_CHANGES}/config_change_"


def encode_config_change(entity_path: str) -> bytes:
    """Kafka's config change notification (version 2) for ``entity_path``, e.g. ``topics/T``."""
    return _dump({"version": 2, "entity_path": entity_path})


def encode_preferred_election(partitions: Sequence[tuple[str, int]]) -> bytes:
    """Kafka's ``/admin/preferred_replica_election`` JSON."""
    entries = [{"topic": t, "partition": p} for t, p in sorted(partitions)]
    return json.dumps({"version": 1, "partitions": entries}, separators=(",", ":")).encode()


def decode_preferred_election(data: bytes) -> list[tuple[str, int]]:
    """The partitions a preferred replica election request lists (:class:`LayoutError` else)."""
    try:
        obj = jsontext.loads(data)
        out = []
        for entry in obj["partitions"]:
            topic, partition = entry["topic"], entry["partition"]
            if not isinstance(topic, str) or type(partition) is not int or partition < 0:
                raise ValueError(f"{entry!r} is not a topic and partition")
            out.append((topic, partition))
    except (ValueError, TypeError, KeyError) as exc:
        raise LayoutError(
            PREFERRED_REPLICA_ELECTION, f"not a preferred replica election ({exc})"
        ) from None
    return out


_SEGMENT = r"[^/]+"
#: Which codec reads which path (used by ``coordkit tree`` and :func:`decode_znode`).
_ZNODE_PATTERNS: list[tuple[str, Codec[Any]]] = [
    (r"^/brokers/ids/[0-9]+$", BROKER),
    (rf"^/brokers/topics/{_SEGMENT}$", TOPIC),
    (rf"^/brokers/topics/{_SEGMENT}/partitions/\d+/state$", PARTITION_STATE),
    (r"^/controller$", CONTROLLER_INFO),
    (r"^/controller_epoch$", CONTROLLER_EPOCH_VALUE),
    (rf"^/admin/delete_topics/{_SEGMENT}$", DELETE_TOPIC),
    (rf"^/config/topics/{_SEGMENT}$", TOPIC_CONFIG),
    (r"^/config/brokers/([0-9]+|<default>)$", TOPIC_CONFIG),
    (rf"^/consumers/{_SEGMENT}/ids/{_SEGMENT}$", CONSUMER_REGISTRATION),
    (rf"^/consumers/{_SEGMENT}/owners/{_SEGMENT}/[0-9]+$", CONSUMER_OWNER),
    (rf"^/consumers/{_SEGMENT}/offsets/{_SEGMENT}/[0-9]+$", CONSUMER_OFFSET),
]
ZNODE_CODECS: tuple[tuple[re.Pattern[str], Codec[Any]], ...] = tuple(
    (re.compile(pattern), codec) for pattern, codec in _ZNODE_PATTERNS
)


def codec_for(path: str) -> Codec[Any] | None:
    """The codec of the Kafka znode at ``path``, or ``None`` for paths outside Kafka's layout."""
    for pattern, codec in ZNODE_CODECS:
        if pattern.match(path):
            return codec
    return None


def decode_znode(path: str, data: bytes) -> Any:
    """Decode the value at ``path`` with its codec; raises ``LayoutError`` for unknown paths."""
    codec = codec_for(path)
    if codec is None:
        raise LayoutError(path, "not a node of Kafka's layout")
    return codec.decode(data, path)
