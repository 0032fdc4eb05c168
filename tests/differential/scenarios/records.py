"""Scenarios of records: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and InitProducerId.

Versions: Produce v13, Fetch v18, ListOffsets v11, OffsetForLeaderEpoch v4, InitProducerId v5
(and Metadata v13 where a scenario reads it) — the highest both Kafka 4.4 and coordkit serve
answer. Produce 13 and Fetch 13+ name topics by id: each request is built with names and given
the ids the side's metadata has (:func:`differential.harness.by_id`; scenarios/topic_ids.py has
the ids no topic has). Every topic is placed by the harness (partition ``p`` led by broker ``p``), so leaders sit
at the same positions on both sides; records carry fixed timestamps.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from coordkit.protocol import messages
from coordkit.protocol.crc32c import crc32c
from coordkit.protocol.records import encode_batch
from coordkit.testing.waiting import wait_for
from differential import requests as rq
from differential.harness import WAIT_SECONDS, ConnectionClosedError, Side, by_id, scenario

PRODUCE = {"Produce": rq.PRODUCE}
FETCH = {"Fetch": rq.FETCH}
OFFSETS = {"ListOffsets": rq.LIST_OFFSETS}
EPOCHS = {"OffsetForLeaderEpoch": rq.OFFSET_FOR_LEADER_EPOCH}
IDEMPOTENT = {"Produce": rq.PRODUCE, "InitProducerId": rq.INIT_PRODUCER_ID}
#: Kafka's ``message.max.bytes`` default: the largest record batch a broker takes.
MESSAGE_MAX_BYTES = 1_048_588


def produced(side: Side, index: int, request: Any) -> Any:
    """A Produce answer's partition results, by topic and partition (Kafka answers them in
    no particular order)."""
    answer = side.call(index, by_id(side, request), rq.PRODUCE)
    found = [(str(t.topic_id), p.index, p) for t in answer.responses
             for p in t.partition_responses]  # fmt: skip
    return [p for _, _, p in sorted(found, key=lambda entry: entry[:2])]


def produce_to_leader(side: Side, topic: str, batch: Any, *, partition: int = 0,
                      acks: int = -1) -> Any:  # fmt: skip
    return produced(side, side.leader(topic, partition),
                    rq.produce(topic, partition, batch, acks=acks))  # fmt: skip


def fetched(side: Side, index: int, request: Any) -> Any:
    return side.call(index, by_id(side, request), rq.FETCH)


def offsets(side: Side, topic: str, timestamp: int, *, partition: int = 0, index: int | None = None,
            isolation: int = 0) -> Any:  # fmt: skip
    at = side.leader(topic, partition) if index is None else index
    answer = side.call(at, rq.list_offsets(topic, partition, timestamp, isolation),
                       rq.LIST_OFFSETS)  # fmt: skip
    return answer.topics


def topic_with_records(side: Side, *counts: int, partitions: int = 1) -> str:
    """A topic (replication factor 3) whose partition 0 holds one batch per count, written
    with acks=all (so below the high watermark), timestamps following on."""
    name = side.topic()
    side.create_topic(name, partitions=partitions, replication=3)
    first = rq.BASE_TIMESTAMP
    for count in counts:
        side.produce(name, 0, rq.batch(count, first_timestamp=first))
        first += count
    return name


def init_producer(side: Side) -> tuple[int, int]:
    answer = side.call(0, rq.init_producer_id(), rq.INIT_PRODUCER_ID)
    return int(answer.producer_id), int(answer.producer_epoch)


def wait_latest(side: Side, topic: str, offset: int) -> str:
    """Until the leader's latest offset (the high watermark) is ``offset`` (a side where it
    never is records the wait's failure)."""
    wait_for(lambda: side.latest_offset(topic, 0) == offset, WAIT_SECONDS,
             f"{side.name}: {topic} at {offset}")  # fmt: skip
    return f"latest offset {offset}"


# -- Produce -----------------------------------------------------------------------------------


@scenario("records.produce_acks_all", versions=PRODUCE)
def produce_acks_all(side: Side) -> list[Any]:
    """acks=all to the leader: NONE, base offsets 0 then 3, log start 0."""
    name = side.topic()
    side.create_topic(name)
    return [produce_to_leader(side, name, rq.batch(3)), produce_to_leader(side, name, rq.batch(2))]


@scenario("records.produce_acks_1", versions=PRODUCE)
def produce_acks_1(side: Side) -> list[Any]:
    """acks=1: answered once the leader appended."""
    name = side.topic()
    side.create_topic(name)
    return [produce_to_leader(side, name, rq.batch(2), acks=1)]


@scenario("records.produce_acks_0", versions={**PRODUCE, "Metadata": rq.METADATA})
def produce_acks_0(side: Side) -> list[Any]:
    """acks=0: no answer (the next request on the connection is the next answered), and the
    records are appended (the latest offset reaches 2)."""
    name = side.topic()
    side.create_topic(name)
    connection = side.connect(side.leader(name))
    connection.send(by_id(side, rq.produce(name, 0, rq.batch(2), acks=0)), rq.PRODUCE,
                    expect_answer=False)  # fmt: skip
    after = connection.call(rq.metadata([name]), rq.METADATA)
    return [after.topics[0].error_code, wait_latest(side, name, 2)]


@scenario("records.produce_invalid_acks", versions=PRODUCE)
def produce_invalid_acks(side: Side) -> list[Any]:
    """acks=2: INVALID_REQUIRED_ACKS."""
    name = side.topic()
    side.create_topic(name)
    return [produce_to_leader(side, name, rq.batch(1), acks=2)]


@scenario("records.produce_not_leader", versions=PRODUCE)
def produce_not_leader(side: Side) -> list[Any]:
    """To a follower: NOT_LEADER_OR_FOLLOWER."""
    name = side.topic()
    side.create_topic(name)
    follower = (side.leader(name) + 1) % side.size
    return [produced(side, follower, rq.produce(name, 0, rq.batch(1)))]


@scenario("records.produce_not_replica", versions=PRODUCE)
def produce_not_replica(side: Side) -> list[Any]:
    """To a broker that holds no replica of the partition: NOT_LEADER_OR_FOLLOWER."""
    name = side.topic()
    side.create_topic(name, replication=1)
    outsider = (side.leader(name) + 1) % side.size
    return [produced(side, outsider, rq.produce(name, 0, rq.batch(1)))]


@scenario("records.produce_unknown_topic", versions=PRODUCE)
def produce_unknown_topic(side: Side) -> list[Any]:
    """To a topic that does not exist (Produce never creates one), named by v13 with the zero
    id (the metadata's id of a missing topic): UNKNOWN_TOPIC_ID."""
    return [produced(side, 0, rq.produce(side.topic(), 0, rq.batch(1)))]


@scenario("records.produce_unknown_partition", versions=PRODUCE)
def produce_unknown_partition(side: Side) -> list[Any]:
    """To partition 5 of a one-partition topic: UNKNOWN_TOPIC_OR_PARTITION."""
    name = side.topic()
    side.create_topic(name)
    return [produced(side, side.leader(name), rq.produce(name, 5, rq.batch(1)))]


@scenario("records.produce_corrupt_crc", versions=PRODUCE)
def produce_corrupt_crc(side: Side) -> list[Any]:
    """A batch whose CRC-32C does not match its bytes: CORRUPT_MESSAGE, nothing appended."""
    name = side.topic()
    side.create_topic(name)
    data = bytearray(encode_batch(rq.batch(2)))
    data[-1] ^= 0xFF  # the last value byte: covered by the CRC
    return [produce_to_leader(side, name, bytes(data)), side.latest_offset(name, 0)]


@scenario("records.produce_truncated_batch", versions=PRODUCE)
def produce_truncated_batch(side: Side) -> list[Any]:
    """A batch cut short (its length says more than the records field holds): no whole batch,
    INVALID_RECORD."""
    name = side.topic()
    side.create_topic(name)
    data = encode_batch(rq.batch(2))[:-5]
    return [produce_to_leader(side, name, data)]


@scenario("records.produce_wrong_record_count", versions=PRODUCE)
def produce_wrong_record_count(side: Side) -> list[Any]:
    """A batch whose header counts three records but holds two (CRC recomputed): refused by
    the leader's validation, INVALID_RECORD with the log start offset."""
    name = side.topic()
    side.create_topic(name)
    data = bytearray(encode_batch(rq.batch(2)))
    struct.pack_into(">i", data, 57, 3)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return [produce_to_leader(side, name, bytes(data))]


@scenario("records.produce_magic_1", versions=PRODUCE)
def produce_magic_1(side: Side) -> list[Any]:
    """A message set in the old format v1 (magic 1): Produce v3+ takes only v2 batches,
    INVALID_RECORD."""
    name = side.topic()
    side.create_topic(name)
    # offset, size, then crc, magic 1, attributes, timestamp, key (-1), value "v".
    body = struct.pack(">bbqi", 1, 0, rq.BASE_TIMESTAMP, -1) + struct.pack(">i", 1) + b"v"
    message = struct.pack(">I", zlib.crc32(body)) + body
    data = struct.pack(">qi", 0, len(message)) + message
    return [produce_to_leader(side, name, data)]


@scenario("records.produce_empty_records", versions=PRODUCE)
def produce_empty_records(side: Side) -> list[Any]:
    """A Produce whose records field is empty (no batch at all): INVALID_RECORD."""
    name = side.topic()
    side.create_topic(name)
    return [produce_to_leader(side, name, b"")]


@scenario("records.produce_too_large", versions=PRODUCE)
def produce_too_large(side: Side) -> list[Any]:
    """A batch over the broker's ``message.max.bytes`` (1,048,588 bytes by default):
    MESSAGE_TOO_LARGE, nothing appended."""
    name = side.topic()
    side.create_topic(name)
    big = rq.batch(1, value_size=MESSAGE_MAX_BYTES + 100)
    return [produce_to_leader(side, name, big), side.latest_offset(name, 0)]


@scenario("records.produce_too_large_for_topic", versions=PRODUCE)
def produce_too_large_for_topic(side: Side) -> list[Any]:
    """A batch over the topic's ``max.message.bytes`` (set to 1,000): MESSAGE_TOO_LARGE."""
    name = side.topic()
    side.create_topic(name, configs={"max.message.bytes": "1000"})
    return [produce_to_leader(side, name, rq.batch(1, value_size=2000))]


@scenario("records.produce_two_batches", versions=PRODUCE)
def produce_two_batches(side: Side) -> list[Any]:
    """Two batches in one records field: Produce v3+ takes exactly one per partition,
    INVALID_RECORD, nothing appended."""
    name = side.topic()
    side.create_topic(name)
    data = encode_batch(rq.batch(2)) + encode_batch(rq.batch(3))
    return [produce_to_leader(side, name, data), side.latest_offset(name, 0)]


@scenario("records.produce_two_partitions", versions=PRODUCE)
def produce_two_partitions(side: Side) -> list[Any]:
    """One request to the leader of partition 0 for partitions 0 and 1 (led elsewhere): one
    appended, one NOT_LEADER_OR_FOLLOWER."""
    name = side.topic()
    side.create_topic(name, partitions=2, replication=1)
    Request: Any = messages.ProduceRequest
    request = Request(
        transactional_id=None, acks=-1, timeout_ms=30_000,
        topic_data=[Request.TopicProduceData(name=name, partition_data=[
            Request.PartitionProduceData(index=p, records=encode_batch(rq.batch(1)))
            for p in (0, 1)])],
    )  # fmt: skip
    return [produced(side, side.leader(name, 0), request)]


@scenario("records.produce_to_internal_topic", versions=PRODUCE)
def produce_to_internal_topic(side: Side) -> list[Any]:
    """A client's produce to ``__consumer_offsets``: INVALID_TOPIC_EXCEPTION (internal topics
    take only their coordinator's writes)."""
    leader = side.leader("__consumer_offsets", 0)
    return [produced(side, leader, rq.produce("__consumer_offsets", 0, rq.batch(1)))]


@scenario("records.produce_gzip", versions={**PRODUCE, **FETCH})
def produce_gzip(side: Side) -> list[Any]:
    """A gzip batch: appended, and fetched back as gzip with the same records."""
    name = side.topic()
    side.create_topic(name)
    answer = produce_to_leader(side, name, rq.batch(3, compression="gzip"))
    return [answer, fetched(side, side.leader(name), rq.fetch(name))]


@scenario("records.produce_transactional_batch", versions=IDEMPOTENT)
def produce_transactional_batch(side: Side) -> list[Any]:
    """A transactional batch in a Produce without a transactional id:
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka authorizes transactional records against the
    request's transactional id)."""
    name = side.topic()
    side.create_topic(name)
    pid, epoch = init_producer(side)
    batch = rq.batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=0,
                     transactional=True)  # fmt: skip
    return [produce_to_leader(side, name, batch)]


# -- idempotent producers -------------------------------------------------------------------------


@scenario("records.init_producer_id", versions={"InitProducerId": rq.INIT_PRODUCER_ID})
def init_producer_id(side: Side) -> list[Any]:
    """InitProducerId without a transactional id: a producer id and epoch 0; a second call
    gets another id."""
    first = side.call(0, rq.init_producer_id(), rq.INIT_PRODUCER_ID)
    second = side.call(1, rq.init_producer_id(), rq.INIT_PRODUCER_ID)
    return [first, second]


@scenario("records.idempotent_duplicate", versions=IDEMPOTENT)
def idempotent_duplicate(side: Side) -> list[Any]:
    """The same idempotent batch sent twice: the second is answered with the first's offset
    and not appended again."""
    name = side.topic()
    side.create_topic(name)
    pid, epoch = init_producer(side)
    batch = rq.batch(2, producer_id=pid, producer_epoch=epoch, base_sequence=0)
    first = produce_to_leader(side, name, batch)
    again = produce_to_leader(side, name, batch)
    return [first, again, side.latest_offset(name, 0)]


@scenario("records.idempotent_older_duplicate", versions=IDEMPOTENT)
def idempotent_older_duplicate(side: Side) -> list[Any]:
    """A retried batch older than the last one (one of the last five): its original offset."""
    name = side.topic()
    side.create_topic(name)
    pid, epoch = init_producer(side)
    batches = [rq.batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=s)
               for s in range(3)]  # fmt: skip
    answers = [produce_to_leader(side, name, b) for b in batches]
    return [answers, produce_to_leader(side, name, batches[0]), side.latest_offset(name, 0)]


@scenario("records.idempotent_out_of_order", versions=IDEMPOTENT)
def idempotent_out_of_order(side: Side) -> list[Any]:
    """Sequence 0, then sequence 5 (1 to 4 missing): OUT_OF_ORDER_SEQUENCE_NUMBER."""
    name = side.topic()
    side.create_topic(name)
    pid, epoch = init_producer(side)
    first = produce_to_leader(side, name, rq.batch(1, producer_id=pid, producer_epoch=epoch,
                                                   base_sequence=0))  # fmt: skip
    gap = produce_to_leader(side, name, rq.batch(1, producer_id=pid, producer_epoch=epoch,
                                                 base_sequence=5))  # fmt: skip
    return [first, gap, side.latest_offset(name, 0)]


@scenario("records.idempotent_unknown_producer", versions=IDEMPOTENT)
def idempotent_unknown_producer(side: Side) -> list[Any]:
    """A producer id never handed out, starting at sequence 7: the partition has no state for
    it, so the sequence cannot be checked (Kafka accepts it since KIP-360)."""
    name = side.topic()
    side.create_topic(name)
    batch = rq.batch(1, producer_id=987_654_321, producer_epoch=0, base_sequence=7)
    return [produce_to_leader(side, name, batch)]


@scenario("records.idempotent_stale_epoch", versions=IDEMPOTENT)
def idempotent_stale_epoch(side: Side) -> list[Any]:
    """Epoch 1 of a producer id appended, then a batch of epoch 0: INVALID_PRODUCER_EPOCH."""
    name = side.topic()
    side.create_topic(name)
    pid, _ = init_producer(side)
    newer = produce_to_leader(side, name, rq.batch(1, producer_id=pid, producer_epoch=1,
                                                   base_sequence=0))  # fmt: skip
    stale = produce_to_leader(side, name, rq.batch(1, producer_id=pid, producer_epoch=0,
                                                   base_sequence=1))  # fmt: skip
    return [newer, stale]


@scenario("records.idempotent_new_epoch_not_zero", versions=IDEMPOTENT)
def idempotent_new_epoch_not_zero(side: Side) -> list[Any]:
    """A new epoch of a known producer must start at sequence 0; sequence 3:
    OUT_OF_ORDER_SEQUENCE_NUMBER."""
    name = side.topic()
    side.create_topic(name)
    pid, epoch = init_producer(side)
    first = produce_to_leader(side, name, rq.batch(1, producer_id=pid, producer_epoch=epoch,
                                                   base_sequence=0))  # fmt: skip
    bumped = produce_to_leader(side, name, rq.batch(1, producer_id=pid, producer_epoch=epoch + 1,
                                                    base_sequence=3))  # fmt: skip
    return [first, bumped]


# -- Fetch ---------------------------------------------------------------------------------------


@scenario("records.fetch", versions=FETCH)
def fetch(side: Side) -> list[Any]:
    """Two batches fetched from offset 0: both, with high watermark, last stable offset and
    log start offset; the batches' offsets, leader epoch and records as produced."""
    name = topic_with_records(side, 3, 2)
    return [fetched(side, side.leader(name), rq.fetch(name))]


@scenario("records.fetch_from_middle_of_batch", versions=FETCH)
def fetch_from_middle_of_batch(side: Side) -> list[Any]:
    """From offset 1 of a three-record batch: the whole batch (from offset 0) comes back."""
    name = topic_with_records(side, 3)
    return [fetched(side, side.leader(name), rq.fetch(name, offset=1))]


@scenario("records.fetch_offset_out_of_range", versions=FETCH)
def fetch_offset_out_of_range(side: Side) -> list[Any]:
    """From offset 100 of a partition ending at 2: OFFSET_OUT_OF_RANGE."""
    name = topic_with_records(side, 2)
    return [fetched(side, side.leader(name), rq.fetch(name, offset=100))]


@scenario("records.fetch_negative_offset", versions=FETCH)
def fetch_negative_offset(side: Side) -> list[Any]:
    """From offset -1: OFFSET_OUT_OF_RANGE."""
    name = topic_with_records(side, 2)
    return [fetched(side, side.leader(name), rq.fetch(name, offset=-1))]


@scenario("records.fetch_at_log_end", versions=FETCH)
def fetch_at_log_end(side: Side) -> list[Any]:
    """From the log end offset: no records, no error."""
    name = topic_with_records(side, 2)
    return [fetched(side, side.leader(name), rq.fetch(name, offset=2))]


@scenario("records.fetch_empty_partition", versions=FETCH)
def fetch_empty_partition(side: Side) -> list[Any]:
    """From offset 0 of a partition nothing was written to: no records, high watermark 0."""
    name = side.topic()
    side.create_topic(name)
    return [fetched(side, side.leader(name), rq.fetch(name))]


@scenario("records.fetch_max_bytes_below_batch", versions=FETCH)
def fetch_max_bytes_below_batch(side: Side) -> list[Any]:
    """A response limit (``max_bytes``) of 10 bytes, smaller than the first batch: the first
    batch comes whole anyway (KIP-74), and only it."""
    name = topic_with_records(side, 3, 2)
    return [fetched(side, side.leader(name), rq.fetch(name, max_bytes=10))]


@scenario("records.fetch_partition_max_bytes_below_batch", versions=FETCH)
def fetch_partition_max_bytes_below_batch(side: Side) -> list[Any]:
    """A partition limit of 10 bytes: the first batch whole, and only it."""
    name = topic_with_records(side, 3, 2)
    return [fetched(side, side.leader(name), rq.fetch(name, partition_max_bytes=10))]


@scenario("records.fetch_read_committed", versions=FETCH)
def fetch_read_committed(side: Side) -> list[Any]:
    """isolation_level read_committed with no transaction: the same records, the last stable
    offset at the high watermark, no aborted transactions."""
    name = topic_with_records(side, 2)
    return [fetched(side, side.leader(name), rq.fetch(name, isolation=1))]


@scenario("records.fetch_from_follower", versions=FETCH)
def fetch_from_follower(side: Side) -> list[Any]:
    """A consumer's fetch (v11+, with a rack id, even empty) from a follower: asked until it
    is refused or the follower has learnt the high watermark (a follower learns it from its
    next fetch from the leader), then recorded."""
    name = topic_with_records(side, 1)
    follower = (side.leader(name) + 1) % side.size

    def settled() -> Any:
        answer = fetched(side, follower, rq.fetch(name))
        found = answer.responses[0].partitions[0]
        return answer if found.error_code or found.high_watermark == 1 else None

    return [wait_for(settled, WAIT_SECONDS, f"{side.name}: the follower's answer")]


@scenario("records.fetch_not_replica", versions=FETCH)
def fetch_not_replica(side: Side) -> list[Any]:
    """From a broker holding no replica of the partition: NOT_LEADER_OR_FOLLOWER."""
    name = side.topic()
    side.create_topic(name, replication=1)
    return [fetched(side, (side.leader(name) + 1) % side.size, rq.fetch(name))]


@scenario("records.fetch_unknown_topic", versions=FETCH)
def fetch_unknown_topic(side: Side) -> list[Any]:
    """From a topic that does not exist, named by the zero id (the metadata's id of a
    missing topic): UNKNOWN_TOPIC_ID."""
    return [fetched(side, 0, rq.fetch(side.topic()))]


@scenario("records.fetch_future_leader_epoch", versions=FETCH)
def fetch_future_leader_epoch(side: Side) -> list[Any]:
    """A current leader epoch above the leader's (5 against 0): UNKNOWN_LEADER_EPOCH."""
    name = topic_with_records(side, 1)
    return [fetched(side, side.leader(name), rq.fetch(name, current_leader_epoch=5))]


@scenario("records.fetch_current_leader_epoch", versions=FETCH)
def fetch_current_leader_epoch(side: Side) -> list[Any]:
    """The current leader epoch given right (0): records as usual."""
    name = topic_with_records(side, 1)
    return [fetched(side, side.leader(name), rq.fetch(name, current_leader_epoch=0))]


@scenario("records.fetch_two_partitions", versions=FETCH)
def fetch_two_partitions(side: Side) -> list[Any]:
    """Partitions 0 and 3 of a four-partition topic, both led by the same broker, in one
    request: one with records, one empty."""
    name = topic_with_records(side, 2, partitions=4)
    return [fetched(side, side.leader(name), rq.fetch(name, [0, 3]))]


# -- ListOffsets ----------------------------------------------------------------------------------


@scenario("records.list_offsets_earliest_latest", versions=OFFSETS)
def list_offsets_earliest_latest(side: Side) -> list[Any]:
    """Earliest (-2) and latest (-1) of a partition holding five records: 0 and 5, timestamps
    -1, the leader epoch."""
    name = topic_with_records(side, 3, 2)
    return [offsets(side, name, rq.EARLIEST_TIMESTAMP), offsets(side, name, rq.LATEST_TIMESTAMP)]


@scenario("records.list_offsets_by_timestamp", versions=OFFSETS)
def list_offsets_by_timestamp(side: Side) -> list[Any]:
    """By timestamp: the first record at or after it (its offset and timestamp), before the
    first record, inside a batch, and after the last (offset -1)."""
    name = topic_with_records(side, 3, 2)
    at = [rq.BASE_TIMESTAMP - 10, rq.BASE_TIMESTAMP + 1, rq.BASE_TIMESTAMP + 3,
          rq.BASE_TIMESTAMP + 100]  # fmt: skip
    return [offsets(side, name, t) for t in at]


@scenario("records.list_offsets_max_timestamp", versions=OFFSETS)
def list_offsets_max_timestamp(side: Side) -> list[Any]:
    """Max timestamp (-3, v7+): the offset and timestamp of the record with the largest
    timestamp (written out of order: the largest is not the last)."""
    name = side.topic()
    side.create_topic(name)
    side.produce(name, 0, rq.batch(2, first_timestamp=rq.BASE_TIMESTAMP + 50))
    side.produce(name, 0, rq.batch(2, first_timestamp=rq.BASE_TIMESTAMP))
    return [offsets(side, name, rq.MAX_TIMESTAMP)]


@scenario("records.list_offsets_empty_partition", versions=OFFSETS)
def list_offsets_empty_partition(side: Side) -> list[Any]:
    """Earliest, latest and max timestamp of an empty partition."""
    name = side.topic()
    side.create_topic(name)
    return [
        offsets(side, name, t)
        for t in (rq.EARLIEST_TIMESTAMP, rq.LATEST_TIMESTAMP, rq.MAX_TIMESTAMP)
    ]


@scenario("records.list_offsets_read_committed", versions=OFFSETS)
def list_offsets_read_committed(side: Side) -> list[Any]:
    """Latest with isolation read_committed: the last stable offset (the high watermark with
    no transaction)."""
    name = topic_with_records(side, 2)
    return [offsets(side, name, rq.LATEST_TIMESTAMP, isolation=1)]


@scenario("records.list_offsets_not_leader", versions=OFFSETS)
def list_offsets_not_leader(side: Side) -> list[Any]:
    """From a follower: NOT_LEADER_OR_FOLLOWER."""
    name = topic_with_records(side, 1)
    follower = (side.leader(name) + 1) % side.size
    return [offsets(side, name, rq.LATEST_TIMESTAMP, index=follower)]


@scenario("records.list_offsets_unknown_topic", versions=OFFSETS)
def list_offsets_unknown_topic(side: Side) -> list[Any]:
    """Of a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION."""
    return [offsets(side, side.topic(), rq.LATEST_TIMESTAMP, index=0)]


@scenario("records.list_offsets_future_leader_epoch", versions=OFFSETS)
def list_offsets_future_leader_epoch(side: Side) -> list[Any]:
    """A current leader epoch above the leader's: UNKNOWN_LEADER_EPOCH."""
    name = topic_with_records(side, 1)
    request = rq.list_offsets(name, 0, rq.LATEST_TIMESTAMP)
    request.topics[0].partitions[0].current_leader_epoch = 5
    return [side.call(side.leader(name), request, rq.LIST_OFFSETS).topics]


# -- OffsetForLeaderEpoch -----------------------------------------------------------------------


def epochs(side: Side, topic: str, leader_epoch: int, current: int = -1,
           index: int | None = None) -> Any:  # fmt: skip
    at = side.leader(topic) if index is None else index
    request = rq.offset_for_leader_epoch(topic, 0, leader_epoch, current)
    return side.call(at, request, rq.OFFSET_FOR_LEADER_EPOCH).topics


@scenario("records.offset_for_leader_epoch", versions=EPOCHS)
def offset_for_leader_epoch(side: Side) -> list[Any]:
    """Epoch 0, the leader's current one, with three records: end offset 3."""
    name = topic_with_records(side, 3)
    return [epochs(side, name, 0), epochs(side, name, 0, current=0)]


@scenario("records.offset_for_leader_epoch_future", versions=EPOCHS)
def offset_for_leader_epoch_future(side: Side) -> list[Any]:
    """An epoch above the leader's (5): epoch -1 and end offset -1."""
    name = topic_with_records(side, 2)
    return [epochs(side, name, 5)]


@scenario("records.offset_for_leader_epoch_empty", versions=EPOCHS)
def offset_for_leader_epoch_empty(side: Side) -> list[Any]:
    """Epoch 0 of a partition nothing was written to."""
    name = side.topic()
    side.create_topic(name)
    return [epochs(side, name, 0)]


@scenario("records.offset_for_leader_epoch_fenced", versions=EPOCHS)
def offset_for_leader_epoch_fenced(side: Side) -> list[Any]:
    """A current leader epoch above the leader's: UNKNOWN_LEADER_EPOCH."""
    name = topic_with_records(side, 1)
    return [epochs(side, name, 0, current=5)]


@scenario("records.offset_for_leader_epoch_not_leader", versions=EPOCHS)
def offset_for_leader_epoch_not_leader(side: Side) -> list[Any]:
    """From a follower (a consumer's request, replica id -1): NOT_LEADER_OR_FOLLOWER."""
    name = topic_with_records(side, 1)
    return [epochs(side, name, 0, index=(side.leader(name) + 1) % side.size)]


@scenario("records.offset_for_leader_epoch_unknown_topic", versions=EPOCHS)
def offset_for_leader_epoch_unknown_topic(side: Side) -> list[Any]:
    """Of a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION."""
    return [epochs(side, side.topic(), 0, index=0)]


@scenario("records.produce_acks_0_not_leader", versions={**PRODUCE, "Metadata": rq.METADATA})
def produce_acks_0_not_leader(side: Side) -> list[Any]:
    """acks=0 to a follower: the producer reads no answer, so an error can only be told by
    closing the connection (Kafka does, and the producer refreshes its metadata)."""
    name = side.topic()
    side.create_topic(name)
    connection = side.connect((side.leader(name) + 1) % side.size)
    connection.send(by_id(side, rq.produce(name, 0, rq.batch(1), acks=0)), rq.PRODUCE,
                    expect_answer=False)  # fmt: skip
    try:
        after = connection.call(rq.metadata([name]), rq.METADATA)
    except ConnectionClosedError:
        return ["closed"]
    return ["answered the next request", after.topics[0].error_code]
