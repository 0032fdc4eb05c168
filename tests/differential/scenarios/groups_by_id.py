"""Scenarios of a classic group's offsets with topics named by id: OffsetCommit and OffsetFetch
v10 (KIP-848) — ids no topic has, all of a group's offsets answered by id, a deleted topic's, and
offsets committed by name (v9) read by id (v10) and the other way round.

Requests and answers go as in ``groups.py``: a topic named by name is sent with the side's id of
it, and the topics answered by id are recorded by the name the side's metadata has for the id
(:func:`groups.named`: "" for an id the metadata does not have), their ids numbered by the
harness in order of appearance. The consumer groups' side of it (member epochs) is in
``consumer_group_apis.py``.
"""

from __future__ import annotations

import uuid
from typing import Any

from differential import requests as rq
from differential.harness import Side, scenario
from differential.scenarios.groups import BY_NAME, GROUPS, commit, describe, fetch_offsets

#: An id no topic has (a random UUID's chance of being a topic's is nil).
UNKNOWN_ID = uuid.UUID(int=0x0F1E2D3C4B5A69788796A5B4C3D2E1F0)
DELETE = {**GROUPS, "DeleteTopics": rq.DELETE_TOPICS}
#: Why the scenarios mixing v9 and v10 send an older version than both sides serve.
MIXED = (
    "OffsetCommit or OffsetFetch v9 (topics by name) beside v10 (by id): the offsets are the same"
)


@scenario("groups_by_id.offset_commit_unknown_id", versions=GROUPS)
def offset_commit_unknown_id(side: Side) -> list[Any]:
    """OffsetCommit v10 of a topic by its id and of an id no topic has, in one request: NONE
    and UNKNOWN_TOPIC_ID (the unknown id answered as sent); of the zero id alone,
    UNKNOWN_TOPIC_ID; OffsetFetch reads only the first commit."""
    group, name = side.group(), side.topic()
    side.create_topic(name)
    both = commit(side, group, {(name, 0): 5, (UNKNOWN_ID, 0): 6})
    return [
        both,
        [t.topic_id == UNKNOWN_ID for t in both if not t.name],
        commit(side, group, {(rq.NO_TOPIC_ID, 0): 7}),
        fetch_offsets(side, {group: None}),
    ]


@scenario("groups_by_id.offset_commit_unknown_id_new_group", versions=GROUPS)
def offset_commit_unknown_id_new_group(side: Side) -> list[Any]:
    """OffsetCommit v10 of only an id no topic has to a group that does not exist:
    UNKNOWN_TOPIC_ID, and no group made of it (OffsetFetch of all its offsets: none;
    DescribeGroups v6: GROUP_ID_NOT_FOUND)."""
    group = side.group()
    committed = commit(side, group, {(UNKNOWN_ID, 0): 1, (UNKNOWN_ID, 1): 2})
    return [committed, fetch_offsets(side, {group: None}), describe(side, group)]


@scenario("groups_by_id.offset_fetch_known_and_unknown_ids", versions=GROUPS)
def offset_fetch_known_and_unknown_ids(side: Side) -> list[Any]:
    """OffsetFetch v10 by id of a committed partition, one never committed (-1) and an id no
    topic has: UNKNOWN_TOPIC_ID for its partition, offset -1, the id answered as sent; the
    group's answer no error."""
    group, name = side.group(), side.topic()
    side.create_topic(name, partitions=2)
    commit(side, group, {(name, 0): 4}, metadata="meta")
    answer = fetch_offsets(side, {group: {name: [0, 1], UNKNOWN_ID: [0]}})
    return [answer, [t.topic_id == UNKNOWN_ID for t in answer[0].topics if not t.name]]


@scenario("groups_by_id.offset_fetch_all_by_id", versions=GROUPS)
def offset_fetch_all_by_id(side: Side) -> list[Any]:
    """OffsetFetch v10 with null topics: every committed offset of the group, each topic by its
    id (two topics, three partitions, metadata and all)."""
    group, first, second = side.group(), side.topic("a"), side.topic("b")
    side.create_topic(first, partitions=2)
    side.create_topic(second)
    commit(side, group, {(first, 0): 1, (first, 1): 2}, metadata="first")
    commit(side, group, {(second, 0): 3}, metadata="second")
    return [fetch_offsets(side, {group: None})]


@scenario("groups_by_id.offset_fetch_deleted_topic", versions=DELETE)
def offset_fetch_deleted_topic(side: Side) -> list[Any]:
    """Offsets committed to two topics, one then deleted: OffsetFetch v10 of all the group's
    offsets answers only the other; by the deleted topic's id, UNKNOWN_TOPIC_ID."""
    group, kept, deleted = side.group(), side.topic("kept"), side.topic("deleted")
    side.create_topic(kept)
    side.create_topic(deleted)
    commit(side, group, {(kept, 0): 1, (deleted, 0): 2})
    deleted_id = side.topic_id(deleted)
    answer = side.call(0, rq.delete_topics(deleted), rq.DELETE_TOPICS)
    side.wait_topic_gone(deleted)
    return [
        [r.error_code for r in answer.responses],
        fetch_offsets(side, {group: None}),
        fetch_offsets(side, {group: {kept: [0], deleted_id: [0]}}),
    ]


@scenario("groups_by_id.committed_by_name_read_by_id",
          versions={**GROUPS, "OffsetCommit": BY_NAME}, older_versions=MIXED)  # fmt: skip
def committed_by_name_read_by_id(side: Side) -> list[Any]:
    """Offsets committed by name (OffsetCommit v9) read by id (OffsetFetch v10): of the
    partitions asked for, and of all the group's."""
    group, name = side.group(), side.topic()
    side.create_topic(name, partitions=2)
    committed = commit(side, group, {(name, 0): 8, (name, 1): 9}, metadata="v9", version=BY_NAME)
    return [
        committed,
        fetch_offsets(side, {group: {name: [0, 1]}}),
        fetch_offsets(side, {group: None}),
    ]


@scenario("groups_by_id.committed_by_id_read_by_name",
          versions={**GROUPS, "OffsetFetch": BY_NAME}, older_versions=MIXED)  # fmt: skip
def committed_by_id_read_by_name(side: Side) -> list[Any]:
    """Offsets committed by id (OffsetCommit v10) read by name (OffsetFetch v9): of the
    partitions asked for, and of all the group's."""
    group, name = side.group(), side.topic()
    side.create_topic(name, partitions=2)
    committed = commit(side, group, {(name, 0): 10, (name, 1): 11}, metadata="v10")
    return [
        committed,
        fetch_offsets(side, {group: {name: [0, 1]}}, version=BY_NAME),
        fetch_offsets(side, {group: None}, version=BY_NAME),
    ]


@scenario("groups_by_id.offsets_of_a_topic_created_again", versions=DELETE)
def offsets_of_a_topic_created_again(side: Side) -> list[Any]:
    """An offset committed to a topic that is then deleted and created again under its name:
    Kafka deletes a deleted topic's offsets, so OffsetFetch v10 by the new topic's id answers -1
    and all the group's offsets none."""
    group, name = side.group(), side.topic()
    side.create_topic(name)
    commit(side, group, {(name, 0): 2})
    answer = side.call(0, rq.delete_topics(name), rq.DELETE_TOPICS)
    side.wait_topic_gone(name)
    side.create_topic(name)
    return [
        [r.error_code for r in answer.responses],
        fetch_offsets(side, {group: {name: [0]}}),
        fetch_offsets(side, {group: None}),
    ]
