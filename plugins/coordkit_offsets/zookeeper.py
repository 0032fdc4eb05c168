"""The ``zookeeper`` offset storage: seed 001's ``/consumers/G/offsets/T/P``, one persistent node
per partition holding the next offset to consume as decimal text (what Kafka's ZooKeeper-based
consumers wrote; the ``consumer offset`` codec of :mod:`coordkit.kafka.layout`).

The node holds only the offset: a commit's ``metadata`` and ``leader_epoch`` are not kept (Kafka's
ZooKeeper storage dropped them too), and a fetched offset's ``commit_timestamp`` is the node's
modification time. A commit of many partitions is one multi, creating missing nodes and parents.
A node holding ``-1`` (Kafka's "no offset") reads as no committed offset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from coordkit.errors import NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import ConsumerOffset, TopicPartition
from coordkit.store import Check, MetadataStore
from coordkit.store.paths import numeric_name
from coordkit.strategies.offsets import (
    OffsetAndMetadata,
    validate_commit,
    validate_fetch,
    validate_group_id,
)
from coordkit_offsets.options import check_durability, check_options, check_store, int_option
from coordkit_offsets.writes import (
    DEFAULT_MAX_ATTEMPTS,
    delete_nodes_atomically,
    delete_tree_atomically,
    upsert_atomically,
)

NAME = "zookeeper"


class ZooKeeperOffsetStorage:
    """Offsets under ``/consumers/G/offsets/T/P`` on one store session.

    :param max_attempts: re-plans of a commit invalidated by a concurrent committer.
    """

    name: ClassVar[str] = NAME

    def __init__(self, store: MetadataStore, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS):
        self.store = store
        self.max_attempts = max_attempts

    def commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        fence: Sequence[Check] = (),
    ) -> None:
        checked = validate_commit(group_id, offsets)
        values = {
            layout.consumer_offset_path(
                group_id, tp.topic, tp.partition
            ): layout.CONSUMER_OFFSET.encode(ConsumerOffset(value.offset))
            for tp, value in checked.items()
        }
        upsert_atomically(
            self.store,
            values,
            what=f"offset commit of group {group_id!r} ({NAME} storage)",
            max_attempts=self.max_attempts,
            fence=fence,
        )

    def fetch(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        group, wanted = validate_fetch(group_id, partitions)
        if wanted is None:
            wanted = self._committed_partitions(group)
        node_paths = [layout.consumer_offset_path(group, tp.topic, tp.partition) for tp in wanted]
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, path, result in zip(
            wanted, node_paths, self.store.get_many(node_paths), strict=True
        ):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, StoreError):
                raise result
            data, stat = result
            offset = layout.CONSUMER_OFFSET.decode(data, path).offset
            if offset >= 0:
                out[tp] = OffsetAndMetadata(offset, commit_timestamp=stat.mtime)
        return out

    def _committed_partitions(self, group: str) -> list[TopicPartition]:
        root = f"{layout.consumer_group_path(group)}/offsets"
        try:
            topics = self.store.children(root)
        except NoNodeError:
            return []
        out: list[TopicPartition] = []
        for topic in topics:
            try:
                children = self.store.children(f"{root}/{topic}")
            except NoNodeError:
                continue  # deleted while we listed
            out.extend(
                TopicPartition(topic, partition)
                for p in children
                if (partition := numeric_name(p)) is not None
            )
        return sorted(out)

    def groups(self) -> list[str]:
        try:
            candidates = self.store.children(layout.CONSUMERS)
        except NoNodeError:
            return []
        return [group for group in candidates if self._committed_partitions(group)]

    def delete_group(self, group_id: str) -> None:
        group = validate_group_id(group_id)
        delete_tree_atomically(
            self.store,
            f"{layout.consumer_group_path(group)}/offsets",
            what=f"deleting the offsets of group {group!r} ({NAME} storage)",
            max_attempts=self.max_attempts,
        )

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *, fence: Sequence[Check] = ()
    ) -> None:
        group = validate_group_id(group_id)
        delete_nodes_atomically(
            self.store,
            [layout.consumer_offset_path(group, tp.topic, tp.partition) for tp in partitions],
            what=f"deleting offsets of group {group!r} ({NAME} storage)",
            fence=fence,
            max_attempts=self.max_attempts,
        )

    def __repr__(self) -> str:
        return f"<ZooKeeperOffsetStorage on {self.store!r}>"


class ZooKeeperOffsetStorageFactory:
    """Registered as ``zookeeper``; options: ``max_attempts``, ``require_durable``."""

    name: ClassVar[str] = NAME

    def __call__(self, store: object, **options: object) -> ZooKeeperOffsetStorage:
        checked = check_store(NAME, store)
        options = dict(options)
        check_durability(NAME, checked, options)
        known = check_options(NAME, options, {"max_attempts": (int, 1)})
        return ZooKeeperOffsetStorage(
            checked, max_attempts=int_option(known, "max_attempts", DEFAULT_MAX_ATTEMPTS)
        )
