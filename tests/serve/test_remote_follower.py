"""A follower of a leader in another process (:class:`RemoteFollower`) copying a fetch answer:
an answer for a log that moved while the fetch was in flight (another round copied or truncated
meanwhile) is dropped, as Kafka's fetcher drops a response whose fetch state changed
(``AbstractFetcherThread.processFetchRequest``), instead of being taken for a divergence."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from coordkit.protocol import messages
from coordkit.protocol.records import encode_batch, new_batch
from coordkit.serve.classes import nested
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.remote_replicas import RemoteFollower

TP = ("t", 0)
FetchResponse = messages.FetchResponse
Topic = nested(FetchResponse, "FetchableTopicResponse")
Partition = nested(FetchResponse, "PartitionData")


def _leaders_log(count: int) -> PartitionLog:
    leader = PartitionLog()
    for n in range(count):
        leader.append(encode_batch(new_batch([(None, b"%d" % n)], timestamp=n)), leader_epoch=3)
    return leader


class Reported:
    def __init__(self) -> None:
        self.ends: list[dict[Any, int]] = []

    def report_log_ends(self, broker: int, ends: dict[Any, int], *, fetched: bool) -> None:
        self.ends.append(dict(ends))


class MovingConnection:
    """Answers a fetch from ``fetch_offset`` of the leader's log, after ``meanwhile`` ran (what
    another round does to the follower's log while this fetch is in flight)."""

    def __init__(self, leader: PartitionLog, meanwhile: Any) -> None:
        self.leader = leader
        self.meanwhile = meanwhile

    async def call(self, request: Any, version: int, timeout: float) -> Any:
        (topic,) = request.topics
        (asked,) = topic.partitions
        self.meanwhile()
        return FetchResponse(responses=[Topic(topic=topic.topic, partitions=[Partition(
            partition_index=asked.partition, error_code=0,
            high_watermark=self.leader.log_end, last_stable_offset=self.leader.log_end,
            log_start_offset=self.leader.log_start,
            records=self.leader.read(asked.fetch_offset, 1 << 20))])])  # fmt: skip


def _follower(own: PartitionLog, reported: Reported) -> RemoteFollower:
    ctx: Any = SimpleNamespace(broker_id=2, logs=SimpleNamespace(get=lambda tp: own),
                               broker=SimpleNamespace(alive=True))  # fmt: skip
    return RemoteFollower(ctx, reported, local=(), addresses=dict, fetch_wait=0.01)  # type: ignore[arg-type]


def test_an_answer_for_a_log_that_moved_meanwhile_is_dropped() -> None:
    leader = _leaders_log(5)
    own = PartitionLog()
    reported = Reported()
    follower = _follower(own, reported)
    state: Any = SimpleNamespace(leader_epoch=3)
    # Another round copies everything while this fetch (asked at offset 0) is in flight.
    connection = MovingConnection(leader, lambda: own.append_copied(leader.read(0, 1 << 20)))
    follower._checked_epoch[TP] = 3  # the leader's epoch, compared already
    served = asyncio.run(follower._fetch(connection, [(TP, state)]))  # type: ignore[arg-type]
    assert not served
    assert reported.ends == []
    assert own.log_end == 5
    assert own.read(0, 1 << 20) == leader.read(0, 1 << 20)
    # Not taken for a divergence: no truncation by leader epoch is asked again.
    assert follower._checked_epoch == {TP: 3}


def test_an_answer_for_a_log_that_stayed_is_copied() -> None:
    leader = _leaders_log(5)
    own = PartitionLog()
    reported = Reported()
    follower = _follower(own, reported)
    state: Any = SimpleNamespace(leader_epoch=3)
    connection = MovingConnection(leader, lambda: None)
    assert asyncio.run(follower._fetch(connection, [(TP, state)]))  # type: ignore[arg-type]
    assert reported.ends == [{TP: 5}]
    assert own.read(0, 1 << 20) == leader.read(0, 1 << 20)
    assert follower.high_watermarks[TP] == 5
