"""Persisted group metadata: what a new coordinator loads to resume a group.

Kafka appends a group's metadata to its ``__consumer_offsets`` partition after every completed
SyncGroup; a broker that takes over the partition replays it. coordkit keeps the latest value in a
node of its own (not part of Kafka's ZooKeeper layout)::

    /coordkit/groups/<group id>   JSON, written by the coordinator on each completed sync, when the
                                  group becomes empty, and when a static member is replaced

    {"version": 1, "generation": 4, "protocol_type": "consumer", "protocol": "range",
     "leader": "c1-…", "members": [{"member_id": "c1-…", "group_instance_id": null,
     "client_id": "c1", "session_timeout_ms": 10000, "rebalance_timeout_ms": 60000,
     "protocols": ["range"], "topics": ["orders"], "assignment": {"orders": [0, 1]},
     "join_order": 1, "client_host": "/127.0.0.1", "metadata": {"range": "AAEAAAAB…"},
     "raw_assignment": "AAEAAAAB…"}]}

Version 2 added ``client_host``, ``metadata`` (protocol name → the opaque bytes a wire client
sent for it, base64) and ``raw_assignment`` (the opaque assignment bytes its leader sent, base64 or
null): what a new coordinator needs to answer a rejoining wire client as the old one would.
Version 1 nodes (no such fields) are still read.

Every write is a multi that first checks the version of the offsets partition's state node the
coordinator took over with, so a broker that has lost the partition cannot overwrite it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from typing import Any

from attrs import field, frozen, validators

from coordkit.errors import LayoutError
from coordkit.kafka.model import TopicPartition, validate_topic_name
from coordkit.store.paths import validate
from coordkit.support import jsontext

#: Parent of the persisted groups (coordkit's own node, beside Kafka's layout).
GROUPS_ROOT = "/coordkit/groups"
METADATA_VERSION = 2
#: Versions :func:`decode` reads.
READABLE_VERSIONS = (1, 2)


def group_path(group_id: str) -> str:
    """The node of ``group_id``; raises ``ValueError`` when the id cannot be a node name."""
    if not isinstance(group_id, str) or not group_id or "/" in group_id:
        raise ValueError(f"group id must be a non-empty string without '/', got {group_id!r}")
    return validate(f"{GROUPS_ROOT}/{group_id}")


def _partitions(value: Iterable[TopicPartition]) -> frozenset[TopicPartition]:
    return frozenset(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _opaque_map(value: Mapping[str, bytes]) -> dict[str, bytes]:
    return dict(value)


@frozen
class PersistedMember:
    member_id: str = field(validator=validators.min_len(1))
    group_instance_id: str | None
    client_id: str
    session_timeout: float = field(validator=validators.gt(0.0))
    rebalance_timeout: float = field(validator=validators.gt(0.0))
    protocols: tuple[str, ...] = field(converter=_strings)
    topics: tuple[str, ...] = field(converter=_strings)
    assignment: frozenset[TopicPartition] = field(converter=_partitions)
    join_order: int = 0
    client_host: str = ""
    metadata: Mapping[str, bytes] = field(factory=dict, converter=_opaque_map)
    raw_assignment: bytes | None = None


def _members(value: Iterable[PersistedMember]) -> tuple[PersistedMember, ...]:
    return tuple(value)


@frozen
class GroupMetadata:
    """A group as of its last completed sync (or its emptying)."""

    group_id: str
    generation: int = field(validator=validators.ge(0))
    protocol_type: str
    protocol: str | None
    leader: str | None
    members: tuple[PersistedMember, ...] = field(converter=_members)


def encode(metadata: GroupMetadata) -> bytes:
    members = []
    for m in metadata.members:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(m.assignment):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        members.append(
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "session_timeout_ms": round(m.session_timeout * 1000),
                "rebalance_timeout_ms": round(m.rebalance_timeout * 1000),
                "protocols": list(m.protocols),
                "topics": list(m.topics),
                "assignment": by_topic,
                "join_order": m.join_order,
                "client_host": m.client_host,
                "metadata": {name: _b64(data) for name, data in m.metadata.items()},
                "raw_assignment": None if m.raw_assignment is None else _b64(m.raw_assignment),
            }
        )
    doc = {
        "version": METADATA_VERSION,
        "generation": metadata.generation,
        "protocol_type": metadata.protocol_type,
        "protocol": metadata.protocol,
        "leader": metadata.leader,
        "members": members,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode(group_id: str, data: bytes, path: str) -> GroupMetadata:
    """Decode a group node; anything malformed raises :class:`LayoutError` naming the field."""
    try:
        doc: Any = jsontext.loads(data)
    except jsontext.JSONTextError as exc:
        raise LayoutError(path, str(exc)) from None
    if not isinstance(doc, dict):
        raise LayoutError(path, f"expected a JSON object, got {jsontext.kind_of(doc)}")
    version = doc.get("version")
    if not _is(version, int) or version not in READABLE_VERSIONS:
        raise LayoutError(path, f"unsupported version {_shown(version)}", field="version")
    raw_members = _required(doc, "members", list, path, "members", "a list")
    members = tuple(_decode_member(raw, path, index) for index, raw in enumerate(raw_members))
    generation = _required(doc, "generation", int, path, "generation", "an integer")
    if generation < 0:
        raise LayoutError(path, f"must be >= 0, got {generation}", field="generation")
    return GroupMetadata(
        group_id=group_id,
        generation=generation,
        protocol_type=_required(doc, "protocol_type", str, path, "protocol_type", "a string"),
        protocol=_optional_string(doc, "protocol", path, "protocol"),
        leader=_optional_string(doc, "leader", path, "leader"),
        members=members,
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: object, path: str, field: str) -> bytes:
    if not isinstance(value, str):
        raise LayoutError(path, f"expected base64 text, got {_shown(value)}", field=field)
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise LayoutError(path, "not valid base64", field=field) from None


def _opaque(raw: dict[str, Any], path: str, where: str) -> tuple[dict[str, bytes], bytes | None]:
    """A member's opaque protocol metadata and assignment (absent in version 1)."""
    found = raw.get("metadata", {})
    if not isinstance(found, dict):
        raise LayoutError(
            path, f"expected an object of protocol: base64, got {_shown(found)}",
            field=f"{where}.metadata",
        )  # fmt: skip
    metadata = {
        str(name): _unb64(value, path, f"{where}.metadata.{name}") for name, value in found.items()
    }
    assignment = raw.get("raw_assignment")
    if assignment is not None:
        assignment = _unb64(assignment, path, f"{where}.raw_assignment")
    return metadata, assignment


def _shown(value: object) -> str:
    """A JSON value for a message: scalars as they are (shortened), containers by kind."""
    if isinstance(value, list | dict):
        return jsontext.kind_of(value)
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _is(value: object, kind: type) -> bool:
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _required(obj: dict[str, Any], key: str, kind: type, path: str, field: str, what: str) -> Any:
    if key not in obj:
        raise LayoutError(path, "missing", field=field)
    value = obj[key]
    if not _is(value, kind):
        raise LayoutError(path, f"expected {what}, got {_shown(value)}", field=field)
    return value


def _optional_string(obj: dict[str, Any], key: str, path: str, field: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise LayoutError(path, f"expected a string or null, got {_shown(value)}", field=field)
    return value


def _strings_of(obj: dict[str, Any], key: str, path: str, field: str) -> list[str]:
    values: list[Any] = _required(obj, key, list, path, field, "a list of strings")
    strings: list[str] = []
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise LayoutError(
                path, f"expected a string, got {_shown(value)}", field=f"{field}[{i}]"
            )
        strings.append(value)
    return strings


def _timeout(obj: dict[str, Any], key: str, path: str, field: str) -> float:
    value: int = _required(obj, key, int, path, field, "milliseconds (an integer)")
    if value <= 0:
        raise LayoutError(path, f"must be > 0, got {value}", field=field)
    return value / 1000


def _assignment(obj: dict[str, Any], path: str, field: str) -> frozenset[TopicPartition]:
    raw = _required(obj, "assignment", dict, path, field, "an object of topic: [partitions]")
    out: set[TopicPartition] = set()
    for topic, partitions in raw.items():
        where = f"{field}.{topic}"
        try:
            validate_topic_name(topic)
        except ValueError as exc:
            raise LayoutError(path, str(exc), field=where) from None
        if not isinstance(partitions, list):
            raise LayoutError(
                path, f"expected a list of partitions, got {_shown(partitions)}", field=where
            )
        for i, partition in enumerate(partitions):
            if not _is(partition, int) or partition < 0:
                raise LayoutError(
                    path,
                    f"expected a partition number (an integer >= 0), got {_shown(partition)}",
                    field=f"{where}[{i}]",
                )
            out.add(TopicPartition(topic, partition))
    return frozenset(out)


def _decode_member(raw: Any, path: str, index: int) -> PersistedMember:
    where = f"members[{index}]"
    if not isinstance(raw, dict):
        raise LayoutError(path, f"expected an object, got {_shown(raw)}", field=where)
    member_id = _required(raw, "member_id", str, path, f"{where}.member_id", "a string")
    if not member_id:
        raise LayoutError(path, "must not be empty", field=f"{where}.member_id")
    client_id = raw.get("client_id", "")
    if not isinstance(client_id, str):
        raise LayoutError(
            path, f"expected a string, got {_shown(client_id)}", field=f"{where}.client_id"
        )
    join_order = raw.get("join_order", index)
    if not _is(join_order, int):
        raise LayoutError(
            path, f"expected an integer, got {_shown(join_order)}", field=f"{where}.join_order"
        )
    client_host = raw.get("client_host", "")
    if not isinstance(client_host, str):
        raise LayoutError(
            path, f"expected a string, got {_shown(client_host)}", field=f"{where}.client_host"
        )
    opaque, raw_assignment = _opaque(raw, path, where)
    return PersistedMember(
        client_host=client_host,
        metadata=opaque,
        raw_assignment=raw_assignment,
        member_id=member_id,
        group_instance_id=_optional_string(
            raw, "group_instance_id", path, f"{where}.group_instance_id"
        ),
        client_id=client_id,
        session_timeout=_timeout(raw, "session_timeout_ms", path, f"{where}.session_timeout_ms"),
        rebalance_timeout=_timeout(
            raw, "rebalance_timeout_ms", path, f"{where}.rebalance_timeout_ms"
        ),
        protocols=_strings_of(raw, "protocols", path, f"{where}.protocols"),
        topics=_strings_of(raw, "topics", path, f"{where}.topics"),
        assignment=_assignment(raw, path, f"{where}.assignment"),
        join_order=join_order,
    )
