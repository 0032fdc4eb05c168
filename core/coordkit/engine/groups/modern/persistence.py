"""Loading and writing consumer groups (:mod:`.records`), fenced as every coordinator write.

A heartbeat writes only what it changed: the group's node when its epochs moved, the node of each
member whose subscription, epoch, assignment or target changed, and deletes the nodes of members
gone. When a write fails, the in-memory group is dropped and the next request loads the group as
stored, so an answer never reports what was not written (Kafka's coordinator reverts its
in-memory state to the last committed offset in the same case).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from coordkit.engine.groups.metadata import GROUPS_ROOT
from coordkit.engine.groups.modern import records
from coordkit.engine.groups.modern.group import ConsumerGroup
from coordkit.engine.groups.protocol import ErrorCode
from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.store import Check, Create, Delete, MetadataStore, Op, SetData

log = logging.getLogger("coordkit.engine.groups")

#: Runs ``attempt(fence)`` fenced by the group's offsets partition (``GroupPersistence``'s).
FencedWrite = Callable[[int, str, Callable[[Check], bool]], ErrorCode]


def members_path(group_path: str) -> str:
    return f"{group_path}/{records.MEMBERS}"


def load_consumer_group(
    store: MetadataStore, group_id: str, path: str, header: bytes, partition: int
) -> ConsumerGroup:
    """The group stored at ``path`` (whose node holds ``header``); members that cannot be read
    are left out (logged), as a coordinator skips a record it cannot read.

    :raises LayoutError: the group's own node cannot be read.
    :raises StoreError: the store cannot answer.
    """
    group = ConsumerGroup(group_id, partition)
    records.decode_group(header, path, group)
    group.persisted_header = header
    group.persisted_key = _header_key(group)
    parent = members_path(path)
    try:
        keys = store.children(parent)
    except NoNodeError:
        keys = []
    paths = [f"{parent}/{k}" for k in keys]
    for member_path, result in zip(paths, store.get_many(paths), strict=True):
        if isinstance(result, NoNodeError):
            continue
        if isinstance(result, StoreError):
            raise result
        try:
            member, target = records.decode_member(result[0], member_path)
            group.update_member(member)
        except (LayoutError, AssertionError) as exc:
            log.warning("group %r: leaving out member node %s: %s", group_id, member_path, exc)
            continue
        group.target[member.member_id] = target
        group.persisted_members.add(member.member_id)
    group.dirty_members.clear()
    group.removed_members.clear()
    group.members_node = bool(keys)
    return group


def write_ops(group: ConsumerGroup, path: str) -> list[Op]:
    """The writes that bring the stored group up to ``group`` (empty when nothing changed)."""
    ops: list[Op] = []
    parent = members_path(path)
    if _header_key(group) != group.persisted_key:
        header = records.encode_group(group)
        if group.persisted_header is None:
            ops.append(Create(path, header))
        else:
            ops.append(SetData(path, header))
    if group.dirty_members and not group.members_node:
        ops.append(Create(parent, b""))
    for member_id in sorted(group.dirty_members):
        member = group.members.get(member_id)
        if member is None:
            continue
        data = records.encode_member(member, group.target.get(member_id, {}))
        node = f"{parent}/{records.member_key(member_id)}"
        if member_id in group.persisted_members:
            ops.append(SetData(node, data))
        else:
            ops.append(Create(node, data))
    for member_id in sorted(group.removed_members & group.persisted_members):
        ops.append(Delete(f"{parent}/{records.member_key(member_id)}"))
    return ops


def _header_key(group: ConsumerGroup) -> tuple[object, ...]:
    """What the group's own node holds, compared without encoding it on every heartbeat."""
    return (group.group_epoch, group.assignment_epoch, group.assignor_name,
            dict(group.subscription_metadata))  # fmt: skip


def mark_written(group: ConsumerGroup) -> None:
    group.persisted_header = records.encode_group(group)
    group.persisted_key = _header_key(group)
    group.persisted_members |= {m for m in group.dirty_members if m in group.members}
    group.persisted_members -= group.removed_members
    group.dirty_members.clear()
    group.removed_members.clear()
    group.members_node = True


def persist(
    store: MetadataStore, group: ConsumerGroup, path: str, fenced: FencedWrite, batch: int
) -> ErrorCode:
    """Write what changed, in multis of at most ``batch`` ops each behind the fence."""
    ops = write_ops(group, path)
    if not ops:
        return ErrorCode.NONE
    for start in range(0, len(ops), batch):
        chunk = ops[start : start + batch]

        def attempt(fence: Check, chunk: list[Op] = chunk) -> bool:
            try:
                store.commit([fence, *chunk])
            except NoNodeError as exc:
                # The first group ever: its parent is made once, then the write is tried again.
                if exc.op_index != 1 or not isinstance(chunk[0], Create):
                    raise
                store.ensure_path(GROUPS_ROOT)
                return False
            return True

        try:
            error = fenced(group.partition, f"consumer group {group.group_id!r}: write", attempt)
        except StoreError as exc:  # a create or delete that found the tree otherwise
            log.warning("consumer group %r: write refused: %s", group.group_id, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if error is not ErrorCode.NONE:
            return error
    mark_written(group)
    return ErrorCode.NONE
