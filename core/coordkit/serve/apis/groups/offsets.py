"""OffsetCommit and OffsetFetch through the engine coordinator and its configured offset storage.

A commit is fenced as Kafka fences it (a current member of the current generation, or a consumer
outside any group while the group is empty); its committed metadata string and, from v6, the
leader epoch are stored with the offset. A fetch answers every requested partition (-1 for one
never committed), or every committed partition when the topics are null (v2+); v8+ asks for
several groups at once.
"""

from __future__ import annotations

import time
from typing import Any

from coordkit.engine.groups import ErrorCode
from coordkit.engine.groups.protocol import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from coordkit.kafka.model import TopicPartition
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.groups.waiting import coordinator
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
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

COMMIT_VERSIONS = (2, 9)
#: OffsetFetch v9+ names the member asking and its epoch (KIP-848).
FETCH_MEMBER_VERSION = 9
FETCH_VERSIONS = (1, 9)
#: Kafka's ``offset.metadata.max.bytes`` default.
MAX_METADATA = 4096
#: OffsetCommit v6+ carries the leader epoch; v7+ the group instance id.
COMMIT_EPOCH_VERSION = 6
COMMIT_INSTANCE_VERSION = 7
#: OffsetFetch v2+ has a top-level error and null topics (all); v5+ the leader epoch; v8+ groups.
FETCH_TOP_ERROR_VERSION = 2
FETCH_EPOCH_VERSION = 5
FETCH_GROUPS_VERSION = 8


def _commit(ctx: BrokerContext, request: Request) -> dict[tuple[str, int], int]:
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
    counts = coordinator(ctx).topic_partitions([topic.name for topic in body.topics])
    for topic in body.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if not 0 <= p.partition_index < counts.get(topic.name, 0):
                codes[key] = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            metadata = p.committed_metadata or ""
            if len(metadata.encode()) > MAX_METADATA:
                codes[key] = errors.OFFSET_METADATA_TOO_LARGE
                continue
            try:
                tp = TopicPartition(topic.name, p.partition_index)
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
    answer = coordinator(ctx).offset_commit(commit).error if body.group_id else None
    error = int(ErrorCode.INVALID_GROUP_ID if answer is None else answer)
    for tp in offsets:
        codes[(tp.topic, tp.partition)] = error
    return codes


async def handle_offset_commit(ctx: BrokerContext, request: Request) -> Any:
    codes = await ctx.blocking(lambda: _commit(ctx, request))
    return CommitResponse(
        throttle_time_ms=0,
        topics=[
            CommitTopic(
                name=topic.name,
                partitions=[
                    CommitPartition(
                        partition_index=p.partition_index,
                        error_code=codes[(topic.name, p.partition_index)],
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.body.topics
        ],
    )


Asked = list[tuple[str, list[int]]] | None


def _fetch(
    ctx: BrokerContext,
    group_id: str,
    asked: Asked,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> OffsetFetchResponse:
    if not group_id:
        return OffsetFetchResponse(ErrorCode.INVALID_GROUP_ID)
    partitions = None
    if asked is not None:
        partitions = [TopicPartition(t, p) for t, ps in asked for p in ps if p >= 0]
    request = OffsetFetchRequest(group_id, partitions, member_id, member_epoch)
    return coordinator(ctx).offset_fetch(request)


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
    answer = cls(
        partition_index=index,
        committed_offset=-1 if value is None else value.offset,
        metadata="" if value is None else value.metadata,
        error_code=code,
    )
    if version >= FETCH_EPOCH_VERSION:
        answer.committed_leader_epoch = -1 if value is None else value.leader_epoch
    return answer


async def handle_offset_fetch(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    version = request.version
    if version >= FETCH_GROUPS_VERSION:
        asked_groups = [
            (
                g.group_id,
                None
                if g.topics is None
                else [(t.name, list(t.partition_indexes)) for t in g.topics],
            )
            for g in body.groups
        ]
        # v9+: the member asking and its epoch (KIP-848), checked against consumer groups.
        members = [
            (g.member_id, g.member_epoch) if version >= FETCH_MEMBER_VERSION else (None, -1)
            for g in body.groups
        ]

        def fetch_all() -> list[OffsetFetchResponse]:
            return [
                _fetch(ctx, group_id, asked, *member)
                for (group_id, asked), member in zip(asked_groups, members, strict=True)
            ]

        answers = await ctx.blocking(fetch_all)
        groups = []
        for (group_id, asked), answer in zip(asked_groups, answers, strict=True):
            failed = answer.error is not ErrorCode.NONE
            groups.append(
                FetchGroup(
                    group_id=group_id,
                    error_code=int(answer.error),
                    topics=[]
                    if failed
                    else [
                        FetchGroupTopic(
                            name=topic,
                            partitions=[
                                _partition(FetchGroupPartition, version, index, value, errors.NONE)
                                for index, value in partitions
                            ],
                        )
                        for topic, partitions in _answers(answer, asked)
                    ],
                )
            )
        return FetchResponse(throttle_time_ms=0, groups=groups)
    asked = (
        None if body.topics is None else [(t.name, list(t.partition_indexes)) for t in body.topics]
    )
    answer = await ctx.blocking(lambda: _fetch(ctx, body.group_id, asked))
    error = int(answer.error)
    if error and version >= FETCH_TOP_ERROR_VERSION:
        return FetchResponse(throttle_time_ms=0, error_code=error, topics=[])
    # v0-1 have no top-level error: each partition carries it.
    topics = [
        FetchTopic(
            name=topic,
            partitions=[
                _partition(FetchPartition, version, index, None if error else value, error)
                for index, value in partitions
            ],
        )
        for topic, partitions in _answers(
            answer if not error else OffsetFetchResponse(ErrorCode.NONE), asked
        )
    ]
    response: Any = FetchResponse(throttle_time_ms=0, topics=topics)
    if version >= FETCH_TOP_ERROR_VERSION:
        response.error_code = errors.NONE
    return response
