"""DescribeLogDirs: the broker's log directory, each partition replica it holds there with its
size and offset lag (Kafka's ``ReplicaManager.describeLogDirs``).

A broker of ``coordkit serve`` has one log directory (``--data-dir``'s broker directory), or
none when its logs are in memory: then it answers one entry named ``memory:`` with the logs it
holds, and no volume sizes (-1, the schema's default). Per partition, as Kafka: the size of its
segments, and the offset lag ``max(high watermark - log end, 0)``; no log is a future one
(AlterReplicaLogDirs, which makes them, is not served). Topics null: every log; otherwise the
partitions named that the broker holds (a topic with none left out).

Under an authorizer it needs Describe on the cluster: else CLUSTER_AUTHORIZATION_FAILED (v3+'s
top-level code) and no directories, as Kafka's ``KafkaApis.handleDescribeLogDirsRequest``.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from coordkit.kafka.acls import AclOperation
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.fetch import high_watermark
from coordkit.serve.authorization import CLUSTER_AUTHORIZATION_FAILED, cluster_allowed
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

Response = messages.DescribeLogDirsResponse
Result = nested(Response, "DescribeLogDirsResult")
Topic_ = nested(Response, "DescribeLogDirsTopic")
Partition_ = nested(Response, "DescribeLogDirsPartition")

VERSIONS = (1, 5)
#: The name of a broker's logs kept in memory (no directory).
MEMORY_DIR = "memory:"
UNKNOWN_BYTES = -1


def _volume(path: str) -> tuple[int, int]:
    """Kafka's ``FileStore.getTotalSpace`` and ``getUsableSpace`` of the directory's volume."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return UNKNOWN_BYTES, UNKNOWN_BYTES
    return usage.total, usage.free


def _held(ctx: BrokerContext) -> None:
    """Every replica assigned to this broker has a log, as Kafka's brokers create one when they
    become a replica; coordkit's are made by their first append or fetch, so a leader without
    records would otherwise be missing."""
    for tp, state in ctx.replication.partitions():
        if ctx.broker_id in state.replicas and ctx.logs.find(tp) is None:
            ctx.logs.get(tp)


def _describe(ctx: BrokerContext, request: Request) -> Any:
    asked = request.body.topics
    wanted = None if asked is None else {(t.topic, p) for t in asked for p in t.partitions}
    _held(ctx)
    by_topic: dict[str, list[Any]] = {}
    for tp, partition_log in sorted(ctx.logs.logs()):
        if wanted is not None and tp not in wanted:
            continue
        lag = max(high_watermark(ctx, tp, partition_log) - partition_log.log_end, 0)
        by_topic.setdefault(tp[0], []).append(
            Partition_(partition_index=tp[1], partition_size=partition_log.size,
                       offset_lag=lag, is_future_key=False)
        )  # fmt: skip
    directory = ctx.logs.directory
    if directory is None:
        path, total, usable = MEMORY_DIR, UNKNOWN_BYTES, UNKNOWN_BYTES
    else:
        path = os.path.abspath(directory.path)
        total, usable = _volume(path)
    result = Result(
        error_code=errors.NONE,
        log_dir=path,
        topics=[Topic_(name=topic, partitions=parts) for topic, parts in by_topic.items()],
        total_bytes=total,
        usable_bytes=usable,
        is_cordoned=False,
    )
    return Response(throttle_time_ms=0, error_code=errors.NONE, results=[result])


async def handle_describe_log_dirs(ctx: BrokerContext, request: Request) -> Any:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return Response(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED, results=[])
    return _describe(ctx, request)
