"""OffsetCommit and OffsetFetch through the engine coordinator and its configured offset storage.

A commit is fenced as Kafka fences it (a current member of the current generation, or a consumer
outside any group while the group is empty); its committed metadata string and, from v6, the
leader epoch are stored with the offset. A fetch answers every requested partition (-1 for one
never committed), or every committed partition when the topics are null (v2+); v8+ asks for
several groups at once. v10 of both names topics by id (UNKNOWN_TOPIC_ID for an id no topic has);
offsets are kept by topic name, as the offset storage keys them. Ids are resolved in the broker's
own map of topic ids (the one Metadata and Fetch answer from), as Kafka's broker resolves them in
its metadata cache: a topic deleted is gone from it at once.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from coordkit.engine.groups import ErrorCode
from coordkit.engine.groups.protocol import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from coordkit.errors import StoreError
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.kafka.model import TopicPartition
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.groups.waiting import coordinator
from coordkit.serve.authorization import (
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    allowed,
    allowed_names,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.transactions.coordinator import coordinator_of
from coordkit.strategies.offsets import OffsetAndMetadata

CommitResponse = messages.OffsetCommitResponse
CommitTopic = nested(CommitResponse, "OffsetCommitResponseTopic")
CommitPartition = nested(CommitResponse, "OffsetCommitResponsePartition")
FetchResponse = messages.OffsetFetchResponse
FetchTopic = nested(FetchResponse, "OffsetFetchResponseTopic")
FetchPartition = nested(FetchResponse, "OffsetFetchResponsePartition")
FetchGroup = nested(FetchResponse, "OffsetFetchResponseGroup")
FetchGroupTopic = nested(FetchResponse, "OffsetFetchResponseTopics")
FetchGroupPartition = nested(FetchResponse, "OffsetFetchResponsePartitions")

COMMIT_VERSIONS = (2, 10)
#: OffsetCommit and OffsetFetch v10+ name topics by id (KIP-848).
TOPIC_ID_VERSION = 10
#: OffsetFetch v9+ names the member asking and its epoch (KIP-848).
FETCH_MEMBER_VERSION = 9
FETCH_VERSIONS = (1, 10)
#: Kafka's ``offset.metadata.max.bytes`` default.
MAX_METADATA = 4096
#: OffsetCommit v6+ carries the leader epoch; v7+ the group instance id.
COMMIT_EPOCH_VERSION = 6
COMMIT_INSTANCE_VERSION = 7
#: OffsetFetch v2+ has a top-level error and null topics (all); v5+ the leader epoch; v8+ groups.
FETCH_TOP_ERROR_VERSION = 2
FETCH_EPOCH_VERSION = 5
FETCH_GROUPS_VERSION = 8
#: OffsetFetch v7+ may require stable offsets (KIP-447).
FETCH_STABLE_VERSION = 7


def _commit(
    ctx: BrokerContext, request: Request, names: list[str | None]
) -> dict[tuple[str, int], int]:
    """Commit what can be committed; each partition's error code (store work, off the loop).

    A partition of a topic that does not exist, or beyond its partition count, is
    UNKNOWN_TOPIC_OR_PARTITION and goes no further (Kafka's broker checks its metadata before
    the coordinator sees the commit); a request left with nothing to commit does not reach the
    coordinator either."""
    body = request.body
    version = request.version
    now = int(time.time() * 1000)
    # v1 lets the client stamp each commit.
    stamped = version == 1
    codes: dict[tuple[str, int], int] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    # Kafka's KafkaApis: Read on the group (or every partition GROUP_AUTHORIZATION_FAILED),
    # then Read on each topic (TOPIC_AUTHORIZATION_FAILED), before anything else is checked.
    group_read = allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id)
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                             [n for n in names if n is not None])  # fmt: skip
    counts = coordinator(ctx).topic_partitions([n for n in names if n is not None])
    for topic, name in zip(body.topics, names, strict=True):
        for p in topic.partitions:
            key = (_label(topic, name), p.partition_index)
            if not group_read:
                codes[key] = GROUP_AUTHORIZATION_FAILED
                continue
            if name is None:
                codes[key] = errors.UNKNOWN_TOPIC_ID
                continue
            if name not in readable:
                codes[key] = TOPIC_AUTHORIZATION_FAILED
                continue
            if not 0 <= p.partition_index < counts.get(name, 0):
                codes[key] = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            metadata = p.committed_metadata or ""
            if len(metadata.encode()) > MAX_METADATA:
                codes[key] = errors.OFFSET_METADATA_TOO_LARGE
                continue
            try:
                tp = TopicPartition(name, p.partition_index)
                value = OffsetAndMetadata(
                    p.committed_offset,
                    metadata,
                    p.commit_timestamp if stamped and p.commit_timestamp >= 0 else now,
                    p.committed_leader_epoch if version >= COMMIT_EPOCH_VERSION else -1,
                )
            except (TypeError, ValueError):
                codes[key] = errors.INVALID_REQUEST  # a negative offset or partition, no topic
                continue
            offsets[tp] = value
            codes[key] = errors.NONE
    if not offsets:
        return codes
    commit = OffsetCommitRequest(
        group_id=body.group_id,
        generation=body.generation_id_or_member_epoch if version >= 1 else NO_GENERATION,
        member_id=body.member_id if version >= 1 else UNKNOWN_MEMBER_ID,
        offsets=offsets,
        group_instance_id=body.group_instance_id if version >= COMMIT_INSTANCE_VERSION else None,
    )
    answer = coordinator(ctx).offset_commit(commit) if body.group_id else None
    error = int(ErrorCode.INVALID_GROUP_ID if answer is None else answer.error)
    refused = {} if answer is None else answer.partition_errors
    for topic, name in zip(body.topics, names, strict=True):
        for p in topic.partitions:
            key = (_label(topic, name), p.partition_index)
            if name is None:
                continue
            committed = TopicPartition(name, p.partition_index)
            if committed in offsets:
                codes[key] = int(refused.get(committed, error))
    return codes


async def _topic_names(ctx: BrokerContext, request: Request) -> list[str | None]:
    """Each request topic's name: as sent, or (v10+) the name of its id (``None``: unknown)."""
    topics = request.body.topics
    if request.version < TOPIC_ID_VERSION:
        return [t.name for t in topics]
    known = await ctx.topic_names(t.topic_id for t in topics)
    return [known.get(t.topic_id) for t in topics]


def _asked_id(label: str) -> uuid.UUID:
    """The id of a topic asked for by an id no topic has (its label, see :func:`_label`)."""
    return uuid.UUID(label.removeprefix("<id ").removesuffix(">"))


def _label(topic: Any, name: str | None) -> str:
    """A request topic's key in the answers: its name, or its id when no topic has it."""
    return name if name is not None else f"<id {topic.topic_id}>"


async def handle_offset_commit(ctx: BrokerContext, request: Request) -> Any:
    names = await _topic_names(ctx, request)
    codes = await ctx.blocking(lambda: _commit(ctx, request, names))
    by_id = request.version >= TOPIC_ID_VERSION
    topics = []
    for topic, name in zip(request.body.topics, names, strict=True):
        answer = CommitTopic(
            partitions=[
                CommitPartition(
                    partition_index=p.partition_index,
                    error_code=codes[(_label(topic, name), p.partition_index)],
                )
                for p in topic.partitions
            ],
        )
        if by_id:
            answer.topic_id = topic.topic_id
        else:
            answer.name = topic.name
        topics.append(answer)
    return CommitResponse(throttle_time_ms=0, topics=topics)


Asked = list[tuple[str, list[int]]] | None


def _fetch(
    ctx: BrokerContext,
    group_id: str,
    asked: Asked,
    member_id: str | None = None,
    member_epoch: int = -1,
    require_stable: bool = False,
) -> tuple[OffsetFetchResponse, set[TopicPartition]]:
    """The group's committed offsets, and (``require_stable``) its partitions with an offset
    pending in an open transaction, read first: a transaction's marker stores its offsets
    before it forgets them, so a partition not pending then has them committed after."""
    if not group_id:
        return OffsetFetchResponse(ErrorCode.INVALID_GROUP_ID), set()
    unstable: set[TopicPartition] = set()
    if require_stable:
        try:
            unstable = coordinator_of(ctx).txn_offsets.unstable(group_id)
        except StoreError:
            return OffsetFetchResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE), set()
    partitions = None
    if asked is not None:
        # A topic asked for by an id no topic has is answered UNKNOWN_TOPIC_ID by the caller.
        partitions = [
            TopicPartition(t, p)
            for t, ps in asked
            if not t.startswith("<id ")
            for p in ps
            if p >= 0
        ]
    request = OffsetFetchRequest(group_id, partitions, member_id, member_epoch)
    return coordinator(ctx).offset_fetch(request), unstable


def _answers(
    answer: OffsetFetchResponse, asked: Asked
) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]:
    """Per topic, per partition: the committed offset (``None`` when there is none)."""
    found = answer.offsets
    if asked is None:
        by_topic: dict[str, list[tuple[int, OffsetAndMetadata | None]]] = {}
        for tp in sorted(found):
            by_topic.setdefault(tp.topic, []).append((tp.partition, found[tp]))
        return list(by_topic.items())
    return [
        (topic, [(p, found.get(TopicPartition(topic, p)) if p >= 0 else None) for p in ps])
        for topic, ps in asked
    ]


def _partition(
    cls: Any, version: int, index: int, value: OffsetAndMetadata | None, code: int
) -> Any:
    """A partition's answer (no offset with an error)."""
    value = None if code else value
    answer = cls(
        partition_index=index,
        committed_offset=-1 if value is None else value.offset,
        metadata="" if value is None else value.metadata,
        error_code=code,
    )
    if version >= FETCH_EPOCH_VERSION:
        answer.committed_leader_epoch = -1 if value is None else value.leader_epoch
    return answer


def _stable(code: int, topic: str, index: int, unstable: set[TopicPartition]) -> int:
    """A partition's code: UNSTABLE_OFFSET_COMMIT for one with an offset pending in an open
    transaction, asked with ``require_stable`` (Kafka's ``fetchOffsets``), unless refused."""
    if not code and TopicPartition(topic, index) in unstable:
        return errors.UNSTABLE_OFFSET_COMMIT
    return code


def _describable(
    ctx: BrokerContext, group_ids: list[str], answers: list[OffsetFetchResponse], asked: Asked
) -> tuple[set[str], set[str]]:
    """Kafka's KafkaApis for OffsetFetch: the groups the principal may describe, and the
    topics asked or answered it may describe (the others' offsets are refused or left out)."""
    groups = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_ids)
    topics = {tp.topic for answer in answers for tp in answer.offsets}
    topics |= {topic for topic, _ in asked or ()}
    return groups, allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics)


async def handle_offset_fetch(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    version = request.version
    if version >= FETCH_GROUPS_VERSION:
        by_id = version >= TOPIC_ID_VERSION
        names: dict[Any, str] = {}
        if by_id:
            names = await ctx.topic_names({t.topic_id for g in body.groups for t in g.topics or ()})

        def name_of(topic: Any) -> str:
            if not by_id:
                return str(topic.name)
            return names.get(topic.topic_id, f"<id {topic.topic_id}>")

        asked_groups = [
            (
                g.group_id,
                None
                if g.topics is None
                else [(name_of(t), list(t.partition_indexes)) for t in g.topics],
            )
            for g in body.groups
        ]
        # v9+: the member asking and its epoch (KIP-848), checked against consumer groups.
        members = [
            (g.member_id, g.member_epoch) if version >= FETCH_MEMBER_VERSION else (None, -1)
            for g in body.groups
        ]

        def fetch_all() -> list[tuple[OffsetFetchResponse, set[TopicPartition]]]:
            return [
                _fetch(ctx, group_id, asked, member[0], member[1], body.require_stable)
                for (group_id, asked), member in zip(asked_groups, members, strict=True)
            ]

        fetched = await ctx.blocking(fetch_all)
        answers = [answer for answer, _ in fetched]
        ids: dict[str, Any] = {}
        if by_id:
            # Topics answered by name (all of a group's, or asked by id): their ids.
            answered = {t for answer in answers for t, _ in _answers(answer, None)}
            answered |= {t for _, asked in asked_groups for t, _ in asked or ()}
            ids = {t: i for t in answered if (i := ctx.topic_ids.id_of(t)).int}
            ids.update({name: topic_id for topic_id, name in names.items()})
        groups = []
        every_asked = [t for _, asked in asked_groups for t in asked or ()]
        allowed_groups, described = _describable(
            ctx, [g for g, _ in asked_groups], answers, every_asked
        )
        for (group_id, asked), (answer, unstable) in zip(asked_groups, fetched, strict=True):
            if group_id not in allowed_groups:
                groups.append(FetchGroup(group_id=group_id, error_code=GROUP_AUTHORIZATION_FAILED,
                                         topics=[]))  # fmt: skip
                continue
            failed = answer.error is not ErrorCode.NONE
            topics = []
            if not failed:
                for topic, partitions in _answers(answer, asked):
                    if by_id and topic not in ids and asked is None:
                        continue  # a deleted topic's offsets: no id to name it by
                    if asked is None and topic not in described:
                        continue  # Kafka leaves out the topics the principal may not describe
                    code = errors.UNKNOWN_TOPIC_ID if by_id and topic not in ids else errors.NONE
                    if not code and topic not in described:
                        code = TOPIC_AUTHORIZATION_FAILED
                    entry = FetchGroupTopic(
                        partitions=[
                            _partition(FetchGroupPartition, version, index, value,
                                       _stable(code, topic, index, unstable))
                            for index, value in partitions
                        ],
                    )  # fmt: skip
                    if by_id:
                        entry.topic_id = ids.get(topic) or _asked_id(topic)
                    else:
                        entry.name = topic
                    topics.append(entry)
            groups.append(
                FetchGroup(group_id=group_id, error_code=int(answer.error), topics=topics)
            )
        return FetchResponse(throttle_time_ms=0, groups=groups)
    asked = (
        None if body.topics is None else [(t.name, list(t.partition_indexes)) for t in body.topics]
    )
    stable = version >= FETCH_STABLE_VERSION and body.require_stable
    answer, unstable = await ctx.blocking(
        lambda: _fetch(ctx, body.group_id, asked, require_stable=stable)
    )
    allowed_groups, described = _describable(ctx, [body.group_id], [answer], asked)
    error = int(answer.error) if allowed_groups else GROUP_AUTHORIZATION_FAILED
    if error and version >= FETCH_TOP_ERROR_VERSION:
        return FetchResponse(throttle_time_ms=0, error_code=error, topics=[])
    # v0-1 have no top-level error: each partition carries it.
    topics = [
        FetchTopic(
            name=topic,
            partitions=[
                _partition(FetchPartition, version, index, value,
                           error or _stable(0 if topic in described
                                            else TOPIC_AUTHORIZATION_FAILED, topic, index,
                                            unstable))
                for index, value in partitions
            ],
        )
        for topic, partitions in _answers(
            answer if not error else OffsetFetchResponse(ErrorCode.NONE), asked
        )
        if asked is not None or topic in described
    ]  # fmt: skip
    response: Any = FetchResponse(throttle_time_ms=0, topics=topics)
    if version >= FETCH_TOP_ERROR_VERSION:
        response.error_code = errors.NONE
    return response
