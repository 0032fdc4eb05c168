"""Deleting groups and their offsets (Kafka's DeleteGroups and OffsetDelete:
``GroupMetadataManager.deleteGroups``, ``OffsetMetadataManager.deleteOffsets``).

A group is deleted only when it has no members: a classic group in Empty (or one that exists
only through its committed offsets), a consumer group (KIP-848) without members; one with
members is NON_EMPTY_GROUP, one that does not exist GROUP_ID_NOT_FOUND. Its stored metadata (the
group's node and, for a consumer group, its members' nodes) and its committed offsets go, the
metadata in one write fenced by the offsets partition's state version as every group write is,
so a broker that lost the partition deletes nothing; the hosted group is marked dead and dropped.

OffsetDelete: a group that does not exist (or is dead) is GROUP_ID_NOT_FOUND; a classic group
with members that does not use the consumer protocol NON_EMPTY_GROUP; otherwise each topic some
member subscribes to is GROUP_SUBSCRIBED_TO_TOPIC for every partition asked, and the other
partitions' offsets go (a partition without one answers no error either), in one fenced write.
"""

from __future__ import annotations

import logging

from coordkit.engine.groups import metadata
from coordkit.engine.groups.hosting import HostedGroup, PartitionHosting
from coordkit.engine.groups.membership import Group
from coordkit.engine.groups.modern.group import ConsumerGroup
from coordkit.engine.groups.persistence import GroupPersistence
from coordkit.engine.groups.protocol import ErrorCode, GroupState
from coordkit.errors import NoNodeError, StoreError
from coordkit.kafka.model import TopicPartition
from coordkit.store import Check, Delete
from coordkit.store.tree import tree_paths

log = logging.getLogger("coordkit.engine.groups")

#: Kafka's NON_EMPTY_GROUP (68) and GROUP_SUBSCRIBED_TO_TOPIC (86), which the group protocol's
#: other answers never use.
NON_EMPTY_GROUP = 68
GROUP_SUBSCRIBED_TO_TOPIC = 86


class GroupDeletion:
    def __init__(self, persistence: GroupPersistence, hosting: PartitionHosting) -> None:
        self.persistence = persistence
        self.hosting = hosting

    def delete(self, group_id: str, found: HostedGroup | None) -> int:
        """Delete ``group_id`` (``found``: the hosted group, ``None`` when none is stored);
        Kafka's error code."""
        if found is None:
            return self._delete_offsets_only(group_id)
        with found.lock:
            if isinstance(found, ConsumerGroup):
                if found.dead:
                    return ErrorCode.GROUP_ID_NOT_FOUND
                if found.members:
                    return NON_EMPTY_GROUP
            else:
                assert isinstance(found, Group)
                if found.is_(GroupState.DEAD):
                    return ErrorCode.GROUP_ID_NOT_FOUND
                if not found.is_(GroupState.EMPTY):
                    return NON_EMPTY_GROUP
            error = self._delete_stored(group_id, found.partition)
            if error != ErrorCode.NONE:
                return error
            if isinstance(found, ConsumerGroup):
                found.dead = True
            else:
                found.state = GroupState.DEAD
        self.hosting.replace(found, None)
        log.info("group %r deleted", group_id)
        return ErrorCode.NONE

    def _delete_offsets_only(self, group_id: str) -> int:
        """A group known only by its committed offsets (a consumer committing outside any
        group, the coordinator since restarted): Kafka's Empty group of that id."""
        try:
            if not self.persistence.fetch_offsets(group_id, None):
                return ErrorCode.GROUP_ID_NOT_FOUND
            self.persistence.offset_storage.delete_group(group_id)
        except StoreError as exc:
            log.warning("group %r: offsets not deleted: %s", group_id, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    def _delete_stored(self, group_id: str, partition: int) -> int:
        path = metadata.group_path(group_id)
        store = self.persistence.store

        def attempt(fence: Check) -> bool:
            try:
                nodes = tree_paths(store, path)
            except NoNodeError:
                nodes = []
            # Children before their parent.
            store.commit([fence, *(Delete(p) for p in reversed(nodes))])
            return True

        error = self.persistence.fenced_write(partition, f"group {group_id!r}: deletion", attempt)
        if error != ErrorCode.NONE:
            return error
        try:
            self.persistence.offset_storage.delete_group(group_id)
        except StoreError as exc:
            log.warning("group %r: offsets not deleted: %s", group_id, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    def delete_offsets(
        self, group_id: str, found: HostedGroup | None, asked: dict[str, list[int]]
    ) -> tuple[int, dict[str, int]]:
        """OffsetDelete of ``asked`` (topic → partitions) for ``group_id`` (``found``: the
        hosted group, ``None`` when none is stored): the request's error code and each topic's."""
        if found is None:
            try:
                if not self.persistence.fetch_offsets(group_id, None):
                    return ErrorCode.GROUP_ID_NOT_FOUND, {}
            except StoreError:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
            return self._delete_partitions(group_id, None, asked, set())
        with found.lock:
            if isinstance(found, ConsumerGroup):
                if found.dead:
                    return ErrorCode.GROUP_ID_NOT_FOUND, {}
                names, _ = found.subscriptions()
                subscribed = names | set(found.subscription_metadata)
            else:
                assert isinstance(found, Group)
                if found.is_(GroupState.DEAD):
                    return ErrorCode.GROUP_ID_NOT_FOUND, {}
                if not found.is_(GroupState.EMPTY) and found.protocol_type != "consumer":
                    return NON_EMPTY_GROUP, {}
                subscribed = {t for m in found.members.values() for t in m.subscription.topics}
            return self._delete_partitions(group_id, found.partition, asked, subscribed)

    def _delete_partitions(
        self,
        group_id: str,
        partition: int | None,
        asked: dict[str, list[int]],
        subscribed: set[str],
    ) -> tuple[int, dict[str, int]]:
        codes = {t: GROUP_SUBSCRIBED_TO_TOPIC if t in subscribed else ErrorCode.NONE for t in asked}
        gone = [TopicPartition(t, p) for t, ps in asked.items() if t not in subscribed for p in ps]
        if not gone:
            return ErrorCode.NONE, codes
        storage = self.persistence.offset_storage
        if partition is None:
            partition = self.hosting.partition_for(group_id)

        def attempt(fence: Check) -> bool:
            storage.delete_offsets(group_id, gone, fence=[fence])
            return True

        error = self.persistence.fenced_write(
            partition, f"group {group_id!r}: offset deletion", attempt
        )
        return error, codes
