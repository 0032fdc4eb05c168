"""What a share group's node holds (``/coordkit/groups/<group id>``, beside classic and consumer
groups: one group id, one kind), written whole at each change.

Kafka keeps a share group as records in ``__consumer_offsets`` (ShareGroupMetadata,
ShareGroupMemberMetadata, ShareGroupTargetAssignmentMember, ShareGroupCurrentMemberAssignment);
coordkit keeps the same facts in one JSON object::

    {"version": 1, "type": "share", "group_epoch": 3, "assignment_epoch": 3,
     "assignor": "simple", "topics": {"orders": ["<topic id>", 6]},
     "members": [{"member_id": "...", "member_epoch": 3, "previous_member_epoch": 2,
                  "rack_id": null, "client_id": "...", "client_host": "/10.0.0.1",
                  "subscribed_topic_names": ["orders"],
                  "assigned": {"<topic id>": [0, 1]}, "target": {"<topic id>": [0, 1]}}]}

A share group has at most ``group.share.max.size`` members (200 by default), so one node stays
small. Nothing read from the store is trusted: a node that does not have this shape is refused
with a :class:`~coordkit.errors.LayoutError` naming what is wrong.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from coordkit.engine.groups.modern.group import SubscribedTopic
from coordkit.engine.share_groups.group import ShareGroup, ShareGroupMember, assignment
from coordkit.errors import LayoutError
from coordkit.support import jsontext

SHARE_TYPE = "share"
VERSION = 1


def is_share_group(data: bytes) -> bool:
    """Whether a group node holds a share group."""
    try:
        obj = jsontext.loads(data)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("type") == SHARE_TYPE


def _partitions(value: Mapping[uuid.UUID, tuple[int, ...]]) -> dict[str, list[int]]:
    return {str(t): list(ps) for t, ps in sorted(value.items())}


def encode(group: ShareGroup) -> bytes:
    members = [
        {
            "member_id": m.member_id,
            "member_epoch": m.member_epoch,
            "previous_member_epoch": m.previous_member_epoch,
            "rack_id": m.rack_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "assigned": _partitions(m.assigned),
            "target": _partitions(group.target.get(m.member_id, {})),
        }
        for m in group.members.values()
    ]
    return json.dumps(
        {
            "version": VERSION,
            "type": SHARE_TYPE,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor": group.assignor_name,
            "topics": {
                name: [str(t.topic_id), t.partitions]
                for name, t in sorted(group.subscription_metadata.items())
            },
            "members": members,
        },
        separators=(",", ":"),
    ).encode()


class _Reader:
    def __init__(self, path: str):
        self.path = path

    def fail(self, what: str) -> LayoutError:
        return LayoutError(self.path, what)

    def integer(self, obj: Mapping[str, Any], key: str, lowest: int = 0) -> int:
        value = obj.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value < 2**31:
            raise self.fail(f"{key} must be an integer from {lowest} to 2^31-1, got {value!r}")
        return value

    def text(self, obj: Mapping[str, Any], key: str, nullable: bool = False) -> Any:
        value = obj.get(key)
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            raise self.fail(f"{key} must be a string, got {type(value).__name__}")
        return value

    def topic_id(self, text: object) -> uuid.UUID:
        try:
            return uuid.UUID(str(text))
        except ValueError:
            raise self.fail(f"{text!r} is not a topic id") from None

    def partitions(self, obj: Mapping[str, Any], key: str) -> dict[uuid.UUID, tuple[int, ...]]:
        value = obj.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(f"{key} must be an object of topic id -> partitions")
        out: dict[uuid.UUID, list[int]] = {}
        for topic, partitions in value.items():
            if not isinstance(partitions, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and 0 <= p < 2**31
                for p in partitions
            ):
                raise self.fail(f"{key}: partitions of {topic} must be a list of partition ids")
            out[self.topic_id(topic)] = partitions
        return assignment(out)


def decode(group_id: str, data: bytes, path: str, partition: int) -> ShareGroup:
    """The group a node holds.

    :raises LayoutError: the node is not a share group of this layout.
    """
    read = _Reader(path)
    try:
        obj = jsontext.loads(data)
    except ValueError as exc:
        raise read.fail(f"not JSON: {exc}") from None
    if not isinstance(obj, dict) or obj.get("type") != SHARE_TYPE:
        raise read.fail("not a share group")
    if obj.get("version") != VERSION:
        raise read.fail(f"unknown share group version {obj.get('version')!r}")
    group = ShareGroup(group_id, partition)
    group.group_epoch = read.integer(obj, "group_epoch")
    group.assignment_epoch = read.integer(obj, "assignment_epoch")
    group.assignor_name = read.text(obj, "assignor")
    topics = obj.get("topics", {})
    if not isinstance(topics, dict):
        raise read.fail("topics must be an object")
    for name, entry in topics.items():
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], int)):
            raise read.fail(f"topics: {name!r} must be [topic id, partitions]")
        group.subscription_metadata[name] = SubscribedTopic(name, read.topic_id(entry[0]), entry[1])
    members = obj.get("members", [])
    if not isinstance(members, list):
        raise read.fail("members must be a list")
    for entry in members:
        if not isinstance(entry, dict):
            raise read.fail("a member must be an object")
        names = entry.get("subscribed_topic_names", [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise read.fail("subscribed_topic_names must be a list of topic names")
        member = ShareGroupMember(
            member_id=read.text(entry, "member_id"),
            member_epoch=read.integer(entry, "member_epoch"),
            previous_member_epoch=read.integer(entry, "previous_member_epoch"),
            rack_id=read.text(entry, "rack_id", nullable=True),
            client_id=read.text(entry, "client_id"),
            client_host=read.text(entry, "client_host"),
            subscribed_topic_names=tuple(names),
            assigned=read.partitions(entry, "assigned"),
        )
        if member.member_id in group.members:
            raise read.fail(f"member {member.member_id!r} is listed twice")
        group.members[member.member_id] = member
        group.target[member.member_id] = dict(read.partitions(entry, "target"))
    group.persisted = data
    return group


def load_share_group(
    group_id: str,
    path: str,
    data: bytes,
    partition: int,
    now: float,
    session_timeout: float,
) -> ShareGroup:
    """The share group a node holds, every member's session started anew (as Kafka's coordinator
    schedules every loaded member's session when it loads a partition).

    :raises LayoutError: the node is not a readable share group.
    """
    group = decode(group_id, data, path, partition)
    for member_id in group.members:
        group.session_deadlines[member_id] = now + session_timeout
    return group
