"""Scenarios of transactions (issue 38): the transaction coordinator's apis (FindCoordinator for
a transactional id, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
DescribeTransactions, ListTransactions), transactional Produce, and what a read_committed Fetch
and ListOffsets answer before and after the markers.

Versions: the classic transaction protocol both sides serve (AddPartitionsToTxn v3, EndTxn v4,
TxnOffsetCommit v4: Kafka 4's later versions belong to transaction version 2 and broker
verification). The coordinator of an id is asked for first (Kafka creates ``__transaction_state``
then; both sides answer COORDINATOR_NOT_AVAILABLE until it has leaders). Markers are written after
EndTxn is answered, so a scenario waits for the last stable offset to move before it reads, and
for the coordinator to describe the transaction complete before it sends EndTxn again (until it
has written that, Kafka answers CONCURRENT_TRANSACTIONS). What brokers stamp with their own clocks
(a marker's timestamp, a transaction's start time) is compared as set or not. The transactional
records carry the current time, as a producer's do: a marker (stamped now) after records of the
scripted 2023 timestamps would roll a new segment on both sides (``segment.ms``), and Kafka's
fetch stops at a segment's end where coordkit's reads on, which is not what these scenarios
compare.
"""

from __future__ import annotations

import time
from typing import Any

from coordkit.protocol import messages
from coordkit.protocol.records import decode_batches, encode_batch
from coordkit.testing.waiting import wait_for
from differential import requests as rq
from differential.harness import WAIT_SECONDS, Side, by_id, scenario

FIND_COORDINATOR = 5
INIT_PRODUCER_ID = 5
ADD_PARTITIONS = 3
ADD_OFFSETS = 4
END_TXN = 4
TXN_OFFSET_COMMIT = 4
DESCRIBE_TRANSACTIONS = 0
LIST_TRANSACTIONS = 2
TXN = {"FindCoordinator": FIND_COORDINATOR, "InitProducerId": INIT_PRODUCER_ID,
       "AddPartitionsToTxn": ADD_PARTITIONS, "EndTxn": END_TXN}  # fmt: skip
RECORDS = {
    **TXN,
    "Produce": rq.PRODUCE,
    "Fetch": rq.FETCH,
    "ListOffsets": rq.LIST_OFFSETS,
    "DescribeTransactions": DESCRIBE_TRANSACTIONS,
}
READ_COMMITTED = 1
COORDINATOR_NOT_AVAILABLE = 15
CONCURRENT_TRANSACTIONS = 51
TIMEOUT_MS = 60_000


def coordinator(side: Side, transactional_id: str) -> int:
    """The index of the broker coordinating ``transactional_id``, once one is."""
    request = rq.find_coordinator(transactional_id, key_type=1)

    def found() -> Any:
        answer = side.call(0, request, FIND_COORDINATOR).coordinators[0]
        return None if answer.error_code == COORDINATOR_NOT_AVAILABLE else answer

    answer = wait_for(found, WAIT_SECONDS, f"{side.name}: a coordinator of {transactional_id}")
    assert answer.error_code == 0, f"{side.name}: FindCoordinator answered {answer.error_code}"
    return side.index_of(answer.node_id)


def init(side: Side, transactional_id: str, at: int, *, timeout_ms: int = TIMEOUT_MS,
         producer: tuple[int, int] = (-1, -1)) -> Any:  # fmt: skip
    Request: Any = messages.InitProducerIdRequest
    request = Request(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms,
                      producer_id=producer[0], producer_epoch=producer[1])  # fmt: skip
    return side.call(at, request, INIT_PRODUCER_ID)


def init_until_settled(side: Side, transactional_id: str, at: int) -> Any:
    """InitProducerId, again while a transaction is still completing (CONCURRENT_TRANSACTIONS):
    the answers seen on the way and the last."""
    seen: list[int] = []

    def settled() -> Any:
        answer = init(side, transactional_id, at)
        if answer.error_code == CONCURRENT_TRANSACTIONS:
            seen.append(answer.error_code)
            return None
        return answer

    answer = wait_for(settled, WAIT_SECONDS, f"{side.name}: InitProducerId of {transactional_id}")
    return sorted(set(seen)), answer


def add_partitions(side: Side, at: int, transactional_id: str, producer: tuple[int, int],
                   partitions: dict[str, list[int]]) -> Any:  # fmt: skip
    Request: Any = messages.AddPartitionsToTxnRequest
    request = Request(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer[0],
        v3_and_below_producer_epoch=producer[1],
        v3_and_below_topics=[Request.AddPartitionsToTxnTopic(name=t, partitions=p)
                             for t, p in partitions.items()],
    )  # fmt: skip
    answer = side.call(at, request, ADD_PARTITIONS)
    return sorted((t.name, p.partition_index, p.partition_error_code)
                  for t in answer.results_by_topic_v3_and_below
                  for p in t.results_by_partition)  # fmt: skip


def end_txn(side: Side, at: int, transactional_id: str, producer: tuple[int, int],
            commit: bool) -> int:  # fmt: skip
    Request: Any = messages.EndTxnRequest
    request = Request(transactional_id=transactional_id, producer_id=producer[0],
                      producer_epoch=producer[1], committed=commit)  # fmt: skip
    return int(side.call(at, request, END_TXN).error_code)


def produce_txn(side: Side, topic: str, transactional_id: str, producer: tuple[int, int],
                sequence: int, count: int, *, partition: int = 0) -> Any:  # fmt: skip
    batch = rq.batch(count, producer_id=producer[0], producer_epoch=producer[1],
                     base_sequence=sequence, transactional=True,
                     first_timestamp=int(time.time() * 1000))  # fmt: skip
    request = rq.produce(topic, partition, encode_batch(batch))
    request.transactional_id = transactional_id
    answer = side.call(side.leader(topic, partition), by_id(side, request), rq.PRODUCE)
    result = answer.responses[0].partition_responses[0]
    return result.error_code, result.base_offset


def read_committed(
    side: Side, topic: str, offset: int = 0, producer: tuple[int, int] = (-1, -1)
) -> list[Any]:
    """A read_committed Fetch of partition 0: its offsets, the aborted transactions (whether
    their producer is ``producer``, and their first offsets), and the batches as (base offset,
    control, transactional, values)."""
    request = by_id(side, rq.fetch(topic, 0, offset, isolation=READ_COMMITTED))
    answer = side.call(side.leader(topic), request, rq.FETCH).responses[0].partitions[0]
    batches = [(b.base_offset, b.is_control, b.is_transactional,
                [r.value for r in b.records] if not b.is_control else len(b.records))
               for b in decode_batches(answer.records)]  # fmt: skip
    aborted = None if answer.aborted_transactions is None else sorted(
        (a.producer_id == producer[0], a.first_offset)
        for a in answer.aborted_transactions)  # fmt: skip
    return [answer.error_code, answer.high_watermark, answer.last_stable_offset, aborted, batches]


def latest(side: Side, topic: str, isolation: int) -> int:
    request = rq.list_offsets(topic, 0, rq.LATEST_TIMESTAMP, isolation)
    answer = side.call(side.leader(topic), request, rq.LIST_OFFSETS)
    return int(answer.topics[0].partitions[0].offset)


def stable_at(side: Side, topic: str, offset: int) -> str:
    """Until read_committed's latest offset (the last stable offset) is ``offset``."""
    wait_for(lambda: latest(side, topic, READ_COMMITTED) == offset, WAIT_SECONDS,
             f"{side.name}: {topic}'s last stable offset at {offset}")  # fmt: skip
    return f"stable at {offset}"


def describe_state(side: Side, at: int, transactional_id: str) -> str:
    Request: Any = messages.DescribeTransactionsRequest
    answer = side.call(at, Request(transactional_ids=[transactional_id]), DESCRIBE_TRANSACTIONS)
    return str(answer.transaction_states[0].transaction_state)


def completed(side: Side, at: int, transactional_id: str, state: str) -> str:
    """Until the coordinator describes the transaction ``state`` (written after its markers)."""
    wait_for(lambda: describe_state(side, at, transactional_id) == state, WAIT_SECONDS,
             f"{side.name}: {transactional_id} {state}")  # fmt: skip
    return state


#: What a coordinator answers while ``__transaction_state``'s new partitions settle (Kafka's
#: leaders load them a moment after FindCoordinator names them): NOT_COORDINATOR,
#: COORDINATOR_LOAD_IN_PROGRESS.
SETTLING = (16, 14)


def ready(side: Side, transactional_id: str) -> tuple[int, Any]:
    """The coordinator's index and its first InitProducerId answer that is not one of
    :data:`SETTLING` (the coordinator asked again meanwhile)."""

    def answered() -> Any:
        at = coordinator(side, transactional_id)
        answer = init(side, transactional_id, at)
        return None if answer.error_code in SETTLING else (at, answer)

    found: tuple[int, Any] = wait_for(answered, WAIT_SECONDS,
                                      f"{side.name}: {transactional_id}'s coordinator loaded")  # fmt: skip
    return found


def begun(side: Side, suffix: str = "txn") -> tuple[str, str, int, tuple[int, int]]:
    """A topic, a transactional id, its coordinator's index and its producer (id, epoch 0)."""
    topic, transactional_id = side.topic(), side.group(suffix)
    side.create_topic(topic)
    at, answer = ready(side, transactional_id)
    assert answer.error_code == 0, f"{side.name}: InitProducerId answered {answer.error_code}"
    return topic, transactional_id, at, (answer.producer_id, answer.producer_epoch)


@scenario("transactions.init_producer_id", versions=TXN)
def init_producer_id(side: Side) -> list[Any]:
    """InitProducerId of a transactional id at its coordinator: a producer id with epoch 0,
    then the same id with epoch 1; from another broker NOT_COORDINATOR; a timeout of 0 or past
    transaction.max.timeout.ms (15 minutes) INVALID_TRANSACTION_TIMEOUT; an empty id
    INVALID_REQUEST."""
    transactional_id = side.group("txn")
    at, first = ready(side, transactional_id)
    second = init(side, transactional_id, at)
    return [
        first, second, first.producer_id == second.producer_id,
        init(side, transactional_id, (at + 1) % side.size).error_code,
        init(side, transactional_id, at, timeout_ms=0).error_code,
        init(side, transactional_id, at, timeout_ms=900_001).error_code,
    ]  # fmt: skip


@scenario("transactions.commit", versions=RECORDS)
def commit(side: Side) -> list[Any]:
    """Records of an open transaction are below the high watermark but past the last stable
    offset (read_committed reads nothing, its latest offset is the transaction's first); EndTxn
    commit: the marker follows (a control batch of one record), read_committed reads them all,
    no aborted transaction; a retried commit answers NONE."""
    topic, transactional_id, at, producer = begun(side)
    added = add_partitions(side, at, transactional_id, producer, {topic: [0]})
    produced = [produce_txn(side, topic, transactional_id, producer, 0, 2),
                produce_txn(side, topic, transactional_id, producer, 2, 1)]  # fmt: skip
    before = [read_committed(side, topic), latest(side, topic, READ_COMMITTED),
              latest(side, topic, 0)]  # fmt: skip
    ended = end_txn(side, at, transactional_id, producer, True)
    return [added, produced, before, ended, stable_at(side, topic, 4), read_committed(side, topic),
            completed(side, at, transactional_id, "CompleteCommit"),
            end_txn(side, at, transactional_id, producer, True)]  # fmt: skip


@scenario("transactions.abort", versions=RECORDS)
def abort(side: Side) -> list[Any]:
    """EndTxn abort: the marker follows; read_committed still gets the aborted batch, with the
    aborted transaction (producer id, first offset) listed so that consumers drop it; commit
    after abort is INVALID_TXN_STATE, and the next transaction's records are read."""
    topic, transactional_id, at, producer = begun(side)
    add_partitions(side, at, transactional_id, producer, {topic: [0]})
    produce_txn(side, topic, transactional_id, producer, 0, 2)
    ended = end_txn(side, at, transactional_id, producer, False)
    stable = stable_at(side, topic, 3)
    aborted_read = read_committed(side, topic, producer=producer)
    done = completed(side, at, transactional_id, "CompleteAbort")
    again = end_txn(side, at, transactional_id, producer, True)
    add_partitions(side, at, transactional_id, producer, {topic: [0]})
    produce_txn(side, topic, transactional_id, producer, 2, 1)
    end_txn(side, at, transactional_id, producer, True)
    return [ended, stable, aborted_read, done, again, stable_at(side, topic, 5),
            read_committed(side, topic, 3, producer)]  # fmt: skip


@scenario("transactions.fencing", versions=RECORDS)
def fencing(side: Side) -> list[Any]:
    """A second InitProducerId while a transaction is open aborts it with the next epoch and
    answers CONCURRENT_TRANSACTIONS until that abort completes, then the epoch after; the old
    producer is fenced everywhere: AddPartitionsToTxn and EndTxn PRODUCER_FENCED, its Produce
    INVALID_PRODUCER_EPOCH (the abort marker carried the new epoch)."""
    topic, transactional_id, at, producer = begun(side)
    add_partitions(side, at, transactional_id, producer, {topic: [0]})
    produce_txn(side, topic, transactional_id, producer, 0, 1)
    seen, fenced_by = init_until_settled(side, transactional_id, at)
    return [
        seen, fenced_by.error_code, fenced_by.producer_epoch,
        fenced_by.producer_id == producer[0],
        add_partitions(side, at, transactional_id, producer, {topic: [0]}),
        end_txn(side, at, transactional_id, producer, True),
        produce_txn(side, topic, transactional_id, producer, 1, 1),
        stable_at(side, topic, 2), read_committed(side, topic, producer=producer),
    ]  # fmt: skip


@scenario("transactions.refusals", versions=RECORDS)
def refusals(side: Side) -> list[Any]:
    """AddPartitionsToTxn of a missing topic: UNKNOWN_TOPIC_OR_PARTITION, the others
    OPERATION_NOT_ATTEMPTED; of another producer id INVALID_PRODUCER_ID_MAPPING; of an unknown
    transactional id INVALID_PRODUCER_ID_MAPPING; EndTxn of a transaction never begun
    INVALID_TXN_STATE; a transactional Produce of an older epoch INVALID_PRODUCER_EPOCH."""
    topic, transactional_id, at, producer = begun(side)
    missing = side.topic("missing")
    return [
        add_partitions(side, at, transactional_id, producer, {topic: [0], missing: [0]}),
        add_partitions(side, at, transactional_id, (producer[0] + 1, 0), {topic: [0]}),
        add_partitions(side, at, side.group("unknown"), producer, {topic: [0]}),
        end_txn(side, at, transactional_id, producer, True),
    ]


@scenario("transactions.describe_and_list",
          versions={**RECORDS, "ListTransactions": LIST_TRANSACTIONS})  # fmt: skip
def describe_and_list(side: Side) -> list[Any]:
    """DescribeTransactions at the coordinator: an open transaction's state, timeout, producer
    and partitions (its start time set), an unknown id TRANSACTIONAL_ID_NOT_FOUND; from another
    broker NOT_COORDINATOR. ListTransactions of every broker, filtered by the scenario's id
    pattern: the id once, Ongoing; a state filter that names no state is listed back."""
    topic, transactional_id, at, producer = begun(side)
    add_partitions(side, at, transactional_id, producer, {topic: [0]})
    Describe: Any = messages.DescribeTransactionsRequest
    asked = Describe(transactional_ids=[transactional_id, side.group("unknown")])
    described = side.call(at, asked, DESCRIBE_TRANSACTIONS).transaction_states
    elsewhere = side.call((at + 1) % side.size, Describe(transactional_ids=[transactional_id]),
                          DESCRIBE_TRANSACTIONS).transaction_states[0].error_code  # fmt: skip
    List: Any = messages.ListTransactionsRequest
    pattern = f"{side.prefix}.*"
    listed = []
    for index in range(side.size):
        answer = side.call(index, List(state_filters=["Ongoing", "Sleeping"], producer_id_filters=[],
                                       duration_filter=-1, transactional_id_pattern=pattern),
                           LIST_TRANSACTIONS)  # fmt: skip
        listed.append([answer.error_code, answer.unknown_state_filters,
                       [(s.transactional_id, s.transaction_state)
                        for s in answer.transaction_states]])  # fmt: skip
    found = [(d.error_code, d.transactional_id, d.transaction_state, d.transaction_timeout_ms,
              d.transaction_start_time_ms >= 0, d.producer_epoch,
              sorted((t.topic, t.partitions) for t in d.topics)) for d in described]  # fmt: skip
    return [found, elsewhere, sorted(listed, key=repr)]


@scenario("transactions.offsets_commit_with_the_transaction",
          versions={**TXN, "AddOffsetsToTxn": ADD_OFFSETS, "TxnOffsetCommit": TXN_OFFSET_COMMIT,
                    "OffsetFetch": rq.OFFSET_FETCH,
                    "DescribeTransactions": DESCRIBE_TRANSACTIONS})  # fmt: skip
def offsets_commit_with_the_transaction(side: Side) -> list[Any]:
    """AddOffsetsToTxn then TxnOffsetCommit at the group's coordinator: the offset is not the
    group's until the transaction commits (OffsetFetch -1), then it is; an aborted
    transaction's offset never is."""
    topic, transactional_id, at, producer = begun(side)
    group = side.group("consumers")
    group_at = side.coordinator(group)

    def committed() -> Any:
        answer = side.call(group_at, rq.offset_fetch({group: {topic: [0]}}, ids=side.topic_id),
                           rq.OFFSET_FETCH)  # fmt: skip
        return [p.committed_offset for g in answer.groups for t in g.topics for p in t.partitions]

    def offsets(offset: int) -> Any:
        Request: Any = messages.TxnOffsetCommitRequest
        request = Request(
            transactional_id=transactional_id, group_id=group, producer_id=producer[0],
            producer_epoch=producer[1], generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None,
            topics=[Request.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                Request.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                        committed_leader_epoch=-1,
                                                        committed_metadata="m")])],
        )  # fmt: skip
        answer = side.call(group_at, request, TXN_OFFSET_COMMIT)
        return [(t.name, p.partition_index, p.error_code) for t in answer.topics
                for p in t.partitions]  # fmt: skip

    AddOffsets: Any = messages.AddOffsetsToTxnRequest
    add = AddOffsets(transactional_id=transactional_id, producer_id=producer[0],
                     producer_epoch=producer[1], group_id=group)  # fmt: skip
    added = side.call(at, add, ADD_OFFSETS).error_code
    first = offsets(5)
    pending = committed()
    ended = end_txn(side, at, transactional_id, producer, True)
    visible = wait_for(lambda: (found := committed()) == [5] and found, WAIT_SECONDS,
                       f"{side.name}: the committed offset")  # fmt: skip
    done = completed(side, at, transactional_id, "CompleteCommit")
    again = side.call(at, add, ADD_OFFSETS).error_code
    second = offsets(9)
    aborted = end_txn(side, at, transactional_id, producer, False)
    settled = completed(side, at, transactional_id, "CompleteAbort")
    return [added, first, pending, ended, visible, done, again, second, aborted, settled,
            committed()]  # fmt: skip
