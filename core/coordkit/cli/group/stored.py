"""What a store holds for one consumer group, read without starting anything
(``coordkit group describe``).

* the classic group's persisted metadata, ``/coordkit/groups/G`` (generation, protocol, leader,
  members and their assignment as of the last completed sync), or a consumer-protocol group's
  (KIP-848) node and member nodes there (:mod:`coordkit.cli.group.consumer`);
* its committed offsets, through the offset storage the coordinators commit through;
* a legacy group's ``/consumers/G``: registrations, owner nodes and offsets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import frozen
from rich.console import Group, RenderableType

from coordkit.cli.group.consumer import (
    StoredConsumerGroup,
    checked_json,
    consumer_group_json,
    read_consumer_group,
    render_consumer_group,
)
from coordkit.cli.group.view import compact_partitions
from coordkit.cli.tables import Column, FittedTable, Kind
from coordkit.engine.groups import GroupMetadata, group_path
from coordkit.engine.groups.metadata import decode as decode_metadata
from coordkit.engine.groups.modern.records import CONSUMER_TYPE
from coordkit.engine.legacy import LegacyGroupView, read_group
from coordkit.errors import NoNodeError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicPartition
from coordkit.plugins import get_plugin_manager
from coordkit.store import MetadataStore
from coordkit.strategies.offsets import OffsetAndMetadata


@frozen
class StoredGroup:
    """A group as the store holds it.

    :param metadata: the persisted classic group, ``None`` if there is none.
    :param consumer: the consumer-protocol group, ``None`` if there is none.
    :param offsets: committed offsets in ``offset_storage``.
    :param legacy: ``/consumers/G`` read back, ``None`` if the node does not exist.
    """

    group_id: str
    offset_storage: str
    metadata: GroupMetadata | None
    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    legacy: LegacyGroupView | None
    consumer: StoredConsumerGroup | None = None

    @property
    def empty(self) -> bool:
        return (
            self.metadata is None
            and self.consumer is None
            and not self.offsets
            and self.legacy is None
        )


def read_stored_group(store: MetadataStore, group_id: str, offset_storage: str) -> StoredGroup:
    """Read ``group_id`` from ``store``.

    :raises ValueError: the group id cannot be a node name.
    :raises UnknownNameError: ``offset_storage`` is not a registered offset storage.
    :raises LayoutError: a node does not hold what Kafka's or coordkit's layout says.
    """
    path = group_path(group_id)
    metadata: GroupMetadata | None = None
    consumer: StoredConsumerGroup | None = None
    try:
        data, _ = store.get(path)
    except NoNodeError:
        pass
    else:
        node = checked_json(data, path)
        if isinstance(node, dict) and node.get("type") == CONSUMER_TYPE:
            consumer = read_consumer_group(store, group_id, path, data)
        else:
            metadata = decode_metadata(group_id, data, path)
    offsets = get_plugin_manager().offset_store(offset_storage)(store).fetch(group_id)
    legacy_root = layout.consumer_group_path(group_id)
    legacy = read_group(store, group_id) if store.exists(legacy_root) is not None else None
    return StoredGroup(group_id, offset_storage, metadata, offsets, legacy, consumer)


def render_stored(stored: StoredGroup, where: str) -> Group:
    """What the store holds for the group, as tables that fit the terminal (names and values
    from the store are shown as they are, control characters made visible)."""
    parts: list[RenderableType] = []
    if stored.consumer is not None:
        parts += render_consumer_group(stored.consumer, where)
    metadata = stored.metadata
    if metadata is not None:
        parts.append(
            FittedTable(
                [
                    Column("generation", Kind.NUMBER),
                    Column("protocol type"),
                    Column("protocol"),
                    Column("leader"),
                ],
                [
                    [
                        str(metadata.generation),
                        metadata.protocol_type or "-",
                        metadata.protocol or "-",
                        metadata.leader or "-",
                    ]
                ],
                title=f"{group_path(stored.group_id)} on {where}",
            )
        )
        parts.append(
            FittedTable(
                [
                    Column("member id"),
                    Column("instance id"),
                    Column("client id"),
                    Column("topics", Kind.TEXT),
                    Column("assignment", Kind.TEXT),
                ],
                [
                    [
                        m.member_id,
                        m.group_instance_id or "-",
                        m.client_id or "-",
                        ", ".join(m.topics) or "-",
                        compact_partitions(m.assignment),
                    ]
                    for m in sorted(metadata.members, key=lambda m: m.join_order)
                ],
            )
        )
    if stored.offsets:
        parts.append(
            FittedTable(
                [
                    Column("partition"),
                    Column("offset", Kind.NUMBER),
                    Column("commit timestamp", Kind.NUMBER),
                ],
                [
                    [str(tp), str(value.offset), str(value.commit_timestamp)]
                    for tp, value in sorted(stored.offsets.items())
                ],
                title=f"committed offsets ({stored.offset_storage})",
            )
        )
    legacy = stored.legacy
    if legacy is not None:
        root = layout.consumer_group_path(stored.group_id)
        parts.append(
            FittedTable(
                [
                    Column("consumer id"),
                    Column("subscription", Kind.TEXT),
                    Column("registered", Kind.NUMBER),
                ],
                [
                    [
                        consumer_id,
                        ", ".join(f"{t}:{n}" for t, n in registration.subscription.items()),
                        registration.timestamp,
                    ]
                    for consumer_id, registration in sorted(legacy.registrations.items())
                ],
                title=f"{root}/ids",
            )
        )
        rows = []
        for tp in sorted(set(legacy.owners) | set(legacy.offsets)):
            offset = legacy.offsets.get(tp)
            rows.append(
                [str(tp), legacy.owners.get(tp, "-"), "-" if offset is None else str(offset)]
            )
        parts.append(
            FittedTable(
                [Column("partition"), Column("owner thread"), Column("offset", Kind.NUMBER)],
                rows,
                title=f"{root}/owners and /offsets",
            )
        )
    return Group(*parts)


def stored_json(stored: StoredGroup) -> dict[str, Any]:
    metadata = stored.metadata
    legacy = stored.legacy
    return {
        "group": stored.group_id,
        "metadata": None
        if metadata is None
        else {
            "generation": metadata.generation,
            "protocol_type": metadata.protocol_type,
            "protocol": metadata.protocol,
            "leader": metadata.leader,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "topics": list(m.topics),
                    "assignment": sorted(str(tp) for tp in m.assignment),
                }
                for m in sorted(metadata.members, key=lambda m: m.join_order)
            ],
        },
        "consumer": None if stored.consumer is None else consumer_group_json(stored.consumer),
        "offset_storage": stored.offset_storage,
        "offsets": {str(tp): v.offset for tp, v in sorted(stored.offsets.items())},
        "legacy": None
        if legacy is None
        else {
            "ids": {
                consumer_id: dict(registration.subscription)
                for consumer_id, registration in sorted(legacy.registrations.items())
            },
            "owners": {str(tp): thread for tp, thread in sorted(legacy.owners.items())},
            "offsets": {str(tp): offset for tp, offset in sorted(legacy.offsets.items())},
        },
    }
