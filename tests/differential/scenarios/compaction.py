"""Scenarios of compacted topics (#35 item 3): the same batches written to a topic with
``cleanup.policy=compact`` on both clusters, each batch in a segment of its own
(``segment.ms`` of a second, the batches' timestamps two seconds apart), then, once each side's
log cleaner cleaned it (every ``log.cleaner.backoff.ms``, a second on both clusters, see
``clusters.SHARED_CONFIGS``; the cleaners' timing differs, so the end state is compared), what
a Fetch from the start returns: each batch's base offset, last offset delta, record offsets, keys
and values, whether it carries a delete horizon, and its max timestamp; and what a record without
key gets from Produce.

Below the active segment only the newest record of each key is left, at its offset; a batch
that lost every record goes, but the last one before the active segment is kept, empty; the
tombstone stays (``delete.retention.ms``: a day) with its batch's delete horizon set. Versions:
CreateTopics v7, Produce and Fetch the highest both answer.
"""

from __future__ import annotations

from typing import Any

from coordkit.protocol.records import RecordBatch, decode_batches, new_batch
from coordkit.testing.waiting import wait_for
from differential import requests as rq
from differential.harness import WAIT_SECONDS, Side, by_id, scenario
from differential.scenarios.records import fetched

VERSIONS = {"CreateTopics": rq.CREATE_TOPICS, "Produce": rq.PRODUCE, "Fetch": rq.FETCH}
CONFIGS = {"cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.01"}
#: Each batch's keys (None: a tombstone of the key before it), in order.
BATCHES: tuple[tuple[tuple[bytes, bool], ...], ...] = (
    ((b"a", True), (b"b", True), (b"c", True)),
    ((b"a", True), (b"d", True)),
    ((b"b", True), (b"c", True)),
    ((b"e", True),),
    ((b"a", True), (b"b", True)),
    ((b"c", False),),  # a tombstone of c
    ((b"d", True), (b"e", True)),
    ((b"d", True),),  # the last before the active segment: superseded by the active one
    ((b"a", True), (b"d", True)),  # the active segment
)


def _batch(number: int) -> RecordBatch:
    timestamp = rq.BASE_TIMESTAMP + number * 2_000
    return new_batch(
        [(key, b"%s-%d" % (key, number) if live else None) for key, live in BATCHES[number]],
        timestamp=timestamp,
    )


def _expected() -> list[int]:
    """The offsets left after a cleaning: the newest of each key below the active segment, and
    the active segment's records."""
    offset = 0
    newest: dict[bytes, int] = {}
    for keys in BATCHES[:-1]:
        for key, _live in keys:
            newest[key] = offset
            offset += 1
    return sorted(newest.values()) + list(range(offset, offset + len(BATCHES[-1])))


def _from_the_start(side: Side, name: str) -> list[Any]:
    """Every batch from the start to the high watermark, a Fetch at a time (Kafka's answers
    hold one segment's batches)."""
    leader = side.leader(name)
    found: list[Any] = []
    offset = 0
    while True:
        answer = fetched(side, leader, rq.fetch(name, 0, offset))
        partition = answer.responses[0].partitions[0]
        batches = decode_batches(bytes(partition.records or b""))
        found += [
            (b.base_offset, b.last_offset_delta, b.has_delete_horizon, b.max_timestamp,
             [(r.offset, r.key, r.value) for r in b.records])
            for b in batches
        ]  # fmt: skip
        if not batches or batches[-1].next_offset >= partition.high_watermark:
            return found
        offset = batches[-1].next_offset


@scenario("compaction.the_newest_record_of_every_key_survives", versions=VERSIONS,
          compare_messages=True)  # fmt: skip
def newest_record_of_every_key_survives(side: Side) -> list[Any]:
    """Nine batches of keys a to e (a tombstone of c among them), each in a segment of its
    own; once cleaned, every batch from the start (a Fetch at a time), and a Produce of a
    record without key (INVALID_RECORD, Kafka's message and record errors compared)."""
    name = side.topic()
    topic = rq.creatable(name, -1, -1, assignment=side.placement(1, 3), configs=CONFIGS)
    answer = side.call(0, rq.create_topics(topic), rq.CREATE_TOPICS)
    assert answer.topics[0].error_code == 0, answer
    side.wait_topic_ready(name, 1)
    for number in range(len(BATCHES)):
        side.produce(name, 0, _batch(number))
    expected = _expected()

    def cleaned() -> list[Any] | None:
        found = _from_the_start(side, name)
        offsets = [offset for *_batch, kept in found for offset, _k, _v in kept]
        return found if offsets == expected else None

    found = wait_for(cleaned, WAIT_SECONDS, f"{side.name}: {name} cleaned down to {expected}")
    keyless = new_batch([(None, b"no key")], timestamp=rq.BASE_TIMESTAMP)
    request = by_id(side, rq.produce(name, 0, keyless))
    refused = side.call(side.leader(name), request, rq.PRODUCE)
    return [found, refused]
