"""A consumer-protocol group (KIP-848) as the store holds it, for ``coordkit group describe``.

The coordinator keeps such a group as ``/coordkit/groups/G`` (``"type": "consumer"``: the group
epoch, the target assignment epoch, the server-side assignor, the subscribed topics with their ids)
and one node per member under ``members/`` (its epochs, state, subscription, current assignment,
partitions pending revocation and target assignment, topics by id); see
:mod:`coordkit.engine.groups.modern.records`. Topic ids are shown by name: from the group's
subscription, else from the store's topic nodes (``/brokers/topics/T``); an id no topic has any
more is shown as the id (as the store holds it).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from typing import Any

from attrs import frozen
from rich.console import RenderableType

from coordkit.cli.group.view import compact_partitions
from coordkit.cli.tables import Column, FittedTable, Kind
from coordkit.engine.cluster_id import kafka_uuid
from coordkit.engine.groups.modern import records
from coordkit.engine.groups.modern.group import ConsumerGroup
from coordkit.engine.groups.modern.member import Assignment, ConsumerGroupMember
from coordkit.engine.groups.modern.persistence import members_path
from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicPartition
from coordkit.store import MetadataStore
from coordkit.support import jsontext


@frozen
class StoredMember:
    """One member node: the member, its target assignment, and the node's path."""

    path: str
    member: ConsumerGroupMember
    target: Assignment


@frozen
class StoredConsumerGroup:
    """A consumer group's nodes read back; ``names`` maps the topic ids they hold to names."""

    path: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    subscription: Mapping[str, tuple[uuid.UUID, int]]
    members: tuple[StoredMember, ...]
    names: Mapping[uuid.UUID, str]

    def partitions(self, value: Assignment) -> list[TopicPartition]:
        """``value``'s partitions by topic name (an unknown id stands for its topic)."""
        return sorted(
            TopicPartition(self.names.get(topic_id) or _kafka_text(topic_id), p)
            for topic_id, partitions in value.items()
            for p in partitions
        )


def checked_json(data: bytes, path: str) -> Any:
    """``data`` parsed within :mod:`~coordkit.support.jsontext`'s bounds (the records' own
    decoders use :func:`json.loads`, which a node nested thousands deep would crash).

    :raises LayoutError: not JSON, or too large or too deep.
    """
    try:
        return jsontext.loads(data)
    except jsontext.JSONTextError as exc:
        raise LayoutError(path, str(exc)) from None


def read_consumer_group(
    store: MetadataStore, group_id: str, path: str, header: bytes
) -> StoredConsumerGroup:
    """The group at ``path`` (whose node holds ``header``) and its members.

    :raises LayoutError: the group's node or a member's node does not hold what
        :mod:`~coordkit.engine.groups.modern.records` writes (the error names the node).
    """
    group = ConsumerGroup(group_id, 0)
    records.decode_group(header, path, group)
    parent = members_path(path)
    try:
        keys = sorted(store.children(parent))
    except NoNodeError:
        keys = []
    paths = [f"{parent}/{key}" for key in keys]
    members = []
    for member_path, result in zip(paths, store.get_many(paths), strict=True):
        if isinstance(result, NoNodeError):
            continue  # the member left while we read
        if isinstance(result, StoreError):
            raise result
        checked_json(result[0], member_path)
        member, target = records.decode_member(result[0], member_path)
        members.append(StoredMember(member_path, member, target))
    members.sort(key=lambda m: (m.member.client_id, m.member.member_id))
    subscription = {
        name: (topic.topic_id, topic.partitions)
        for name, topic in sorted(group.subscription_metadata.items())
    }
    names = {topic_id: name for name, (topic_id, _) in subscription.items()}
    ids = {
        topic_id
        for m in members
        for value in (
            m.member.assigned_partitions,
            m.member.partitions_pending_revocation,
            m.target,
        )
        for topic_id in value
    }
    if ids - set(names):
        names.update(_topic_names(store, ids - set(names)))
    return StoredConsumerGroup(
        path=path,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor=group.assignor_name,
        subscription=subscription,
        members=tuple(members),
        names=names,
    )


def _topic_names(store: MetadataStore, wanted: set[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The names of the topics whose nodes hold the ids ``wanted`` (an unreadable topic node,
    which is not the group's, is passed over: it names no id)."""
    try:
        topics = sorted(store.children(layout.BROKER_TOPICS))
    except NoNodeError:
        return {}
    paths = [layout.topic_path(t) for t in topics]
    found: dict[uuid.UUID, str] = {}
    for name, path, result in zip(topics, paths, store.get_many(paths), strict=True):
        if isinstance(result, StoreError):
            continue
        try:
            text = layout.TOPIC.decode(result[0], path).topic_id
            topic_id = kafka_uuid(text) if text else None
        except (LayoutError, ValueError):
            continue
        if topic_id in wanted:
            found[topic_id] = name
    return found


def render_consumer_group(stored: StoredConsumerGroup, where: str) -> list[RenderableType]:
    """The group and its members as tables that fit the terminal."""
    subscribed = ", ".join(f"{n}:{count}" for n, (_, count) in stored.subscription.items())
    group = FittedTable(
        [
            Column("type"),
            Column("group epoch", Kind.NUMBER),
            Column("assignment epoch", Kind.NUMBER),
            Column("assignor"),
            Column("subscribed topics", Kind.TEXT),
        ],
        [
            [
                records.CONSUMER_TYPE,
                str(stored.group_epoch),
                str(stored.assignment_epoch),
                stored.assignor,
                subscribed or "-",
            ]
        ],
        title=f"{stored.path} on {where}",
    )
    rows = []
    for entry in stored.members:
        m = entry.member
        subscription = ", ".join(m.subscribed_topic_names)
        if m.subscribed_topic_regex is not None:
            subscription = f"{subscription} /{m.subscribed_topic_regex}/".strip()
        rows.append(
            [
                m.member_id,
                m.instance_id or "-",
                m.client_id or "-",
                str(m.member_epoch),
                m.state.value,
                subscription or "-",
                compact_partitions(stored.partitions(m.assigned_partitions)),
                compact_partitions(stored.partitions(m.partitions_pending_revocation)),
                compact_partitions(stored.partitions(entry.target)),
            ]
        )
    members = FittedTable(
        [
            Column("member id"),
            Column("instance id"),
            Column("client id"),
            Column("epoch", Kind.NUMBER),
            Column("state"),
            Column("subscription", Kind.TEXT),
            Column("assignment", Kind.TEXT),
            Column("revoking", Kind.TEXT),
            Column("target", Kind.TEXT),
        ],
        rows,
        title=f"{members_path(stored.path)}",
    )
    return [group, members]


def _kafka_text(topic_id: uuid.UUID) -> str:
    """A topic id as Kafka prints it and the store holds it (URL-safe base64, unpadded)."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def consumer_group_json(stored: StoredConsumerGroup) -> dict[str, Any]:
    def shown(value: Assignment) -> list[str]:
        return [str(tp) for tp in stored.partitions(value)]

    return {
        "type": records.CONSUMER_TYPE,
        "group_epoch": stored.group_epoch,
        "assignment_epoch": stored.assignment_epoch,
        "assignor": stored.assignor,
        "subscription": {
            name: {"topic_id": _kafka_text(topic_id), "partitions": count}
            for name, (topic_id, count) in stored.subscription.items()
        },
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "previous_member_epoch": m.previous_member_epoch,
                "state": m.state.value,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "server_assignor": m.server_assignor,
                "assigned": shown(m.assigned_partitions),
                "revoking": shown(m.partitions_pending_revocation),
                "target": shown(entry.target),
            }
            for entry in stored.members
            for m in (entry.member,)
        ],
    }
