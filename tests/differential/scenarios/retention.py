"""Scenarios of log retention (#34 item 3): a topic's ``retention.bytes`` or ``retention.ms``
deleting whole segments at the brokers' retention check (every second on both clusters, see
``clusters.SHARED_CONFIGS``), and what the leader answers once the log start moved: a Fetch
below it (OFFSET_OUT_OF_RANGE, no offsets), a Fetch at it, ListOffsets EARLIEST, LATEST and by a
timestamp older than every record.

Segments are Kafka 4.4's smallest (``segment.bytes`` of 1 MiB, its minimum) and batches of one
400 kB record, so that two make a segment on both sides (the batches are the same bytes). Fetched
records are compared by their offsets, not their 400 kB values. Versions: CreateTopics v7,
Produce, Fetch and ListOffsets the highest both answer.
"""

from __future__ import annotations

from typing import Any

from coordkit.protocol.records import decode_batches
from coordkit.testing.waiting import wait_for
from differential import requests as rq
from differential.harness import WAIT_SECONDS, Side, scenario
from differential.scenarios.records import fetched, offsets

VERSIONS = {"CreateTopics": rq.CREATE_TOPICS, "Produce": rq.PRODUCE, "Fetch": rq.FETCH,
            "ListOffsets": rq.LIST_OFFSETS}  # fmt: skip
SEGMENT_BYTES = 1 << 20
VALUE_SIZE = 400_000
EARLIEST = -2
LATEST = -1


def _topic(side: Side, configs: dict[str, str]) -> str:
    name = side.topic()
    topic = rq.creatable(name, -1, -1, assignment=side.placement(1, 3), configs=configs)
    answer = side.call(0, rq.create_topics(topic), rq.CREATE_TOPICS)
    assert answer.topics[0].error_code == 0, answer
    side.wait_topic_ready(name, 1)
    return name


def _earliest(side: Side, name: str) -> int:
    return int(offsets(side, name, EARLIEST)[0].partitions[0].offset)


def _after_retention(side: Side, name: str, start: int) -> list[Any]:
    """Once the log start is ``start``: what the leader answers about the log."""
    wait_for(lambda: _earliest(side, name) == start, WAIT_SECONDS,
             f"{side.name}: {name}'s log start to move to {start}")  # fmt: skip
    leader = side.leader(name)
    found: list[Any] = [
        offsets(side, name, EARLIEST),
        offsets(side, name, LATEST),
        offsets(side, name, rq.BASE_TIMESTAMP - 1),
    ]
    for offset in (start - 1, start):
        answer = fetched(side, leader, rq.fetch(name, 0, offset))
        partition = answer.responses[0].partitions[0]
        records = bytes(partition.records or b"")
        partition.records = b""
        found.append(partition)
        found.append([r.offset for b in decode_batches(records) for r in b.records])
    return found


@scenario("retention.bytes_deletes_the_oldest_segments", versions=VERSIONS)
def bytes_deletes_the_oldest_segments(side: Side) -> list[Any]:
    """Six batches of 400 kB in segments of two, ``retention.bytes`` of 1.3 MB: the first
    segment goes (the second would leave less), the log starts at 2."""
    name = _topic(side, {"segment.bytes": str(SEGMENT_BYTES), "retention.bytes": "1300000"})
    for i in range(6):
        side.produce(
            name, 0, rq.batch(1, value_size=VALUE_SIZE, first_timestamp=rq.BASE_TIMESTAMP + i)
        )
    return _after_retention(side, name, 2)


@scenario("retention.ms_deletes_every_segment", versions=VERSIONS)
def ms_deletes_every_segment(side: Side) -> list[Any]:
    """Three batches stamped in 2023, ``retention.ms`` of a minute: every segment goes, the
    active one too (Kafka rolls an empty one at the log end first), the log starts at its end."""
    name = _topic(side, {"retention.ms": "60000"})
    for i in range(3):
        side.produce(name, 0, rq.batch(2, first_timestamp=rq.BASE_TIMESTAMP + 2 * i))
    return _after_retention(side, name, 6)


@scenario("retention.segment_bytes_below_a_mebibyte", versions={"CreateTopics": rq.CREATE_TOPICS})
def segment_bytes_below_a_mebibyte(side: Side) -> list[Any]:
    """A topic created with ``segment.bytes`` of 1024: Kafka 4 refuses anything under 1 MiB
    (KIP-1030); the answer's error code is compared."""
    name = side.topic()
    topic = rq.creatable(name, -1, -1, assignment=side.placement(1, 1),
                         configs={"segment.bytes": "1024"})  # fmt: skip
    answer = side.call(0, rq.create_topics(topic), rq.CREATE_TOPICS)
    return [answer.topics[0].error_code]
