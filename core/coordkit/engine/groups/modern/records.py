"""A consumer group as persisted, so that a new coordinator resumes its epochs.

Kafka appends a consumer group's records to its ``__consumer_offsets`` partition: the group epoch,
each member's subscription, each member's target assignment, each member's current assignment.
coordkit keeps the same facts as nodes beside the classic groups' (not part of Kafka's layout)::

    /coordkit/groups/<group id>                    {"version": 1, "type": "consumer",
                                                    "group_epoch": 4, "assignment_epoch": 4,
                                                    "assignor": "uniform"}
    /coordkit/groups/<group id>/members/<key>      one member: its subscription, epochs, state,
                                                    assigned partitions, partitions pending
                                                    revocation and target (topic ids in Kafka's
                                                    text form)

``<key>`` is the member id in URL-safe base64, so that any id a client sends is a node name.
Only what a heartbeat changed is written, fenced like every coordinator write.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from typing import Any

from coordkit.engine.cluster_id import kafka_uuid
from coordkit.engine.groups.modern.group import ConsumerGroup, SubscribedTopic
from coordkit.engine.groups.modern.member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
    assignment,
)
from coordkit.errors import LayoutError
from coordkit.support import jsontext

#: The ``type`` of a consumer group's node (a classic group's node has none).
CONSUMER_TYPE = "consumer"
RECORD_VERSION = 1
MEMBERS = "members"


def member_key(member_id: str) -> str:
    return base64.urlsafe_b64encode(member_id.encode()).decode().rstrip("=")


def _ids(value: Assignment) -> dict[str, list[int]]:
    return {_kafka_text(t): sorted(ps) for t, ps in sorted(value.items())}


def _kafka_text(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def encode_group(group: ConsumerGroup) -> bytes:
    """The group's own node: its epochs, assignor and subscription metadata (the subscribed
    topics as the last epoch bump saw them, so a new coordinator bumps only on a real change)."""
    subscription = {
        name: [_kafka_text(topic.topic_id), topic.partitions]
        for name, topic in sorted(group.subscription_metadata.items())
    }
    return json.dumps(
        {"version": RECORD_VERSION, "type": CONSUMER_TYPE, "group_epoch": group.group_epoch,
         "assignment_epoch": group.assignment_epoch, "assignor": group.assignor_name,
         "subscription": subscription},
        separators=(",", ":"),
    ).encode()  # fmt: skip


def encode_member(member: ConsumerGroupMember, target: Assignment) -> bytes:
    return json.dumps(
        {
            "member_id": member.member_id,
            "member_epoch": member.member_epoch,
            "previous_member_epoch": member.previous_member_epoch,
            "state": member.state.value,
            "instance_id": member.instance_id,
            "rack_id": member.rack_id,
            "rebalance_timeout_ms": round(member.rebalance_timeout * 1000),
            "client_id": member.client_id,
            "client_host": member.client_host,
            "subscribed_topic_names": list(member.subscribed_topic_names),
            "subscribed_topic_regex": member.subscribed_topic_regex,
            "server_assignor": member.server_assignor,
            "assigned": _ids(member.assigned_partitions),
            "revoking": _ids(member.partitions_pending_revocation),
            "target": _ids(target),
        },
        separators=(",", ":"),
    ).encode()


def is_consumer_group(data: bytes) -> bool:
    """Whether a group node holds a consumer group (else: a classic group's metadata)."""
    try:
        obj = jsontext.loads(data)  # bounded: a node nested too deep is refused, not recursed
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("type") == CONSUMER_TYPE


def _object(data: bytes, path: str) -> dict[str, Any]:
    try:
        obj = jsontext.loads(data)
    except ValueError as exc:
        raise LayoutError(path, f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise LayoutError(path, "not a JSON object")
    return obj


def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise LayoutError(path, f"{key} is missing or of the wrong type", field=key)
    return value


def decode_group(data: bytes, path: str, group: ConsumerGroup) -> None:
    """Set ``group``'s epochs, assignor and subscription metadata from its node; raises
    :class:`LayoutError`."""
    obj = _object(data, path)
    if obj.get("version") != RECORD_VERSION or obj.get("type") != CONSUMER_TYPE:
        raise LayoutError(path, "not a version 1 consumer group", field="version")
    group.group_epoch = _get(obj, "group_epoch", int, path)
    group.assignment_epoch = _get(obj, "assignment_epoch", int, path)
    group.assignor_name = _get(obj, "assignor", str, path)
    subscription: dict[str, SubscribedTopic] = {}
    for name, entry in _get(obj, "subscription", dict, path).items():
        if not (
            isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
            and isinstance(entry[1], int) and not isinstance(entry[1], bool) and entry[1] >= 0
        ):  # fmt: skip
            raise LayoutError(path, f"subscription.{name}: not [topic id, partitions]")
        try:
            subscription[name] = SubscribedTopic(name, kafka_uuid(entry[0]), entry[1])
        except ValueError as exc:
            raise LayoutError(path, f"subscription.{name}: {exc}") from None
    group.subscription_metadata = subscription


def _assignment_of(obj: Mapping[str, Any], key: str, path: str) -> dict[uuid.UUID, frozenset[int]]:
    raw = _get(obj, key, dict, path)
    out: dict[uuid.UUID, list[int]] = {}
    for text, partitions in raw.items():
        try:
            topic_id = kafka_uuid(text)
        except ValueError as exc:
            raise LayoutError(path, str(exc), field=key) from None
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise LayoutError(path, f"{key}.{text}: not a list of partitions", field=key)
        out[topic_id] = partitions
    return assignment(out)


def _optional(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise LayoutError(path, f"{key} is not a string", field=key)
    return value


def decode_member(data: bytes, path: str) -> tuple[ConsumerGroupMember, Assignment]:
    """A member and its target; raises :class:`LayoutError`."""
    obj = _object(data, path)
    names = _get(obj, "subscribed_topic_names", list, path)
    if not all(isinstance(n, str) for n in names):
        raise LayoutError(path, "subscribed_topic_names: not a list of names")
    try:
        state = MemberState(_get(obj, "state", str, path))
    except ValueError:
        state = MemberState.UNKNOWN
    member = ConsumerGroupMember(
        member_id=_get(obj, "member_id", str, path),
        member_epoch=_get(obj, "member_epoch", int, path),
        previous_member_epoch=_get(obj, "previous_member_epoch", int, path),
        state=state,
        instance_id=_optional(obj, "instance_id", path),
        rack_id=_optional(obj, "rack_id", path),
        rebalance_timeout=_get(obj, "rebalance_timeout_ms", int, path) / 1000,
        client_id=_get(obj, "client_id", str, path),
        client_host=_get(obj, "client_host", str, path),
        subscribed_topic_names=names,
        subscribed_topic_regex=_optional(obj, "subscribed_topic_regex", path),
        server_assignor=_optional(obj, "server_assignor", path),
        assigned_partitions=_assignment_of(obj, "assigned", path),
        partitions_pending_revocation=_assignment_of(obj, "revoking", path),
    )
    return member, _assignment_of(obj, "target", path)
