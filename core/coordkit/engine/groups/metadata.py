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
     "join_order": 1}]}

Every write is a multi that first checks the version of the offsets partition's state node the
coordinator took over with, so a broker that has lost the partition cannot overwrite it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from attrs import field, frozen, validators

from coordkit.errors import LayoutError
from coordkit.model import TopicPartition
from coordkit.paths import validate

#: Parent of the persisted groups (coordkit's own node, beside Kafka's layout).
GROUPS_ROOT = "/coordkit/groups"
METADATA_VERSION = 1


def group_path(group_id: str) -> str:
    """The node of ``group_id``; raises ``ValueError`` when the id cannot be a node name."""
    if not isinstance(group_id, str) or not group_id or "/" in group_id:
        raise ValueError(f"group id must be a non-empty string without '/', got {group_id!r}")
    return validate(f"{GROUPS_ROOT}/{group_id}")


def _partitions(value: Iterable[TopicPartition]) -> frozenset[TopicPartition]:
    return frozenset(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


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
        doc: Any = json.loads(data)
    except ValueError as exc:
        raise LayoutError(path, f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise LayoutError(path, f"expected a JSON object, got {type(doc).__name__}")
    if doc.get("version") != METADATA_VERSION:
        raise LayoutError(path, f"unsupported version {doc.get('version')!r}", field="version")
    try:
        members = tuple(
            _decode_member(raw, path, index) for index, raw in enumerate(doc["members"])
        )
        return GroupMetadata(
            group_id=group_id,
            generation=_typed(doc, "generation", int, path),
            protocol_type=_typed(doc, "protocol_type", str, path),
            protocol=_optional(doc, "protocol", path),
            leader=_optional(doc, "leader", path),
            members=members,
        )
    except KeyError as exc:
        raise LayoutError(path, "missing", field=str(exc.args[0])) from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, LayoutError):
            raise
        raise LayoutError(path, str(exc)) from None


def _typed(doc: dict[str, Any], key: str, kind: type, path: str) -> Any:
    value = doc[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise LayoutError(path, f"expected {kind.__name__}, got {value!r}", field=key)
    return value


def _optional(doc: dict[str, Any], key: str, path: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise LayoutError(path, f"expected a string or null, got {value!r}", field=key)
    return value


def _decode_member(raw: Any, path: str, index: int) -> PersistedMember:
    where = f"members[{index}]"
    if not isinstance(raw, dict):
        raise LayoutError(path, f"expected an object, got {raw!r}", field=where)
    try:
        assignment = frozenset(
            TopicPartition(topic, int(p))
            for topic, parts in raw["assignment"].items()
            for p in parts
        )
        return PersistedMember(
            member_id=raw["member_id"],
            group_instance_id=raw.get("group_instance_id"),
            client_id=raw.get("client_id", ""),
            session_timeout=raw["session_timeout_ms"] / 1000,
            rebalance_timeout=raw["rebalance_timeout_ms"] / 1000,
            protocols=raw["protocols"],
            topics=raw["topics"],
            assignment=assignment,
            join_order=raw.get("join_order", index),
        )
    except KeyError as exc:
        raise LayoutError(path, "missing", field=f"{where}.{exc.args[0]}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise LayoutError(path, str(exc), field=where) from None
