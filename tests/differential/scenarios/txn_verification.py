"""Scenarios of the brokers' AddPartitionsToTxn (v4+, KIP-890 part 1): a partition leader asks the
transaction coordinator whether the partitions of a transactional Produce are in the producer's
transaction (``verify_only``), batched by transactional id. Kafka 3.9's leaders send it to the
coordinator before they append a transactional batch (``transaction.partition.verification.
enable``); here the scenarios send it as a broker would, without an authorizer (ClusterAction is
everybody's), and compare the coordinator's answers.
"""

from __future__ import annotations

import time
from typing import Any

from coordkit.kafka.coordinators import coordinator_partition
from coordkit.protocol import messages
from coordkit.protocol.records import encode_batch
from differential import requests as rq
from differential.clusters import SHARED_CONFIGS
from differential.harness import Side, by_id, scenario
from differential.scenarios.transactions import (
    RECORDS,
    add_partitions,
    begun,
    completed,
    end_txn,
    produce_txn,
    stable_at,
)

VERIFY_VERSION = 5
#: The first broker version: the same answers but TRANSACTION_ABORTABLE unknown to its leader.
FIRST_BROKER_VERSION = 4
VERIFY = {**RECORDS, "AddPartitionsToTxn": VERIFY_VERSION}

Request: Any = messages.AddPartitionsToTxnRequest


def transaction(transactional_id: str, producer: tuple[int, int],
                partitions: dict[str, list[int]], *, verify_only: bool = True) -> Any:  # fmt: skip
    return Request.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer[0], producer_epoch=producer[1],
        verify_only=verify_only,
        topics=[Request.AddPartitionsToTxnTopic(name=t, partitions=p)
                for t, p in partitions.items()],
    )  # fmt: skip


def verify(side: Side, at: int, transactions: list[Any], names: dict[str, str],
           version: int = VERIFY_VERSION) -> list[Any]:  # fmt: skip
    """A broker's AddPartitionsToTxn: the top-level code and, per transaction (by its role in
    ``names``: the scenario's own names differ between the sides), each partition's code."""
    answer = side.call(at, Request(transactions=transactions), version)
    return [answer.error_code, sorted(
        (names.get(r.transactional_id, r.transactional_id), names.get(t.name, t.name),
         p.partition_index, p.partition_error_code)
        for r in answer.results_by_transaction for t in r.topic_results
        for p in t.results_by_partition)]  # fmt: skip


def unknown_beside(side: Side, transactional_id: str) -> str:
    """An id without state that the coordinator of ``transactional_id`` coordinates too (the
    same ``__transaction_state`` partition), so both sides answer it from that coordinator."""
    partitions = int(SHARED_CONFIGS["transaction.state.log.num.partitions"])
    wanted = coordinator_partition(transactional_id, partitions)
    return next(name for name in (side.group(f"unknown{n}") for n in range(1000))
                if coordinator_partition(name, partitions) == wanted)  # fmt: skip


def add(side: Side, at: int, transactional_id: str, producer: tuple[int, int],
        partitions: dict[str, list[int]], version: int) -> list[Any]:  # fmt: skip
    """The partitions added by a broker's AddPartitionsToTxn (``verify_only`` false)."""
    names = {transactional_id: "txn", **{t: t.rsplit("-", 1)[-1] for t in partitions}}
    return verify(side, at, [transaction(transactional_id, producer, partitions,
                                         verify_only=False)], names, version)  # fmt: skip


@scenario("transactions.verify_partitions", versions=VERIFY)
def verify_partitions(side: Side) -> list[Any]:
    """A transaction added partition 0 of a topic: verified NONE; partition 1 (never added)
    TRANSACTION_ABORTABLE; in one batch another producer id INVALID_PRODUCER_ID_MAPPING and an
    id without state INVALID_PRODUCER_ID_MAPPING (each transaction answered on its own);
    another epoch PRODUCER_FENCED; a missing topic UNKNOWN_TOPIC_OR_PARTITION with the others
    OPERATION_NOT_ATTEMPTED; at another broker NOT_COORDINATOR; once the transaction
    committed, nothing is in it (TRANSACTION_ABORTABLE)."""
    topic, transactional_id, at, producer = begun(side)
    two = side.topic("two")
    side.create_topic(two, partitions=2)
    unknown = unknown_beside(side, transactional_id)
    names = {transactional_id: "txn", unknown: "unknown", topic: "topic", two: "two",
             side.topic("missing"): "missing"}  # fmt: skip
    added = add(side, at, transactional_id, producer, {topic: [0], two: [0]}, VERIFY_VERSION)
    ongoing = verify(side, at, [transaction(transactional_id, producer,
                                            {topic: [0], two: [0, 1]})], names)  # fmt: skip
    batched = verify(side, at, [
        transaction(transactional_id, (producer[0] + 1, producer[1]), {topic: [0]}),
        transaction(unknown, producer, {topic: [0]}),
    ], names)  # fmt: skip
    fenced = verify(side, at, [transaction(transactional_id, (producer[0], producer[1] + 1),
                                           {topic: [0]})], names)  # fmt: skip
    missing = verify(side, at, [transaction(transactional_id, producer,
                                            {topic: [0], side.topic("missing"): [0]})], names)  # fmt: skip
    elsewhere = verify(side, (at + 1) % side.size,
                       [transaction(transactional_id, producer, {topic: [0]})], names)  # fmt: skip
    produce_txn(side, topic, transactional_id, producer, 0, 1)
    ended = end_txn(side, at, transactional_id, producer, True)
    stable = stable_at(side, topic, 2)
    done = completed(side, at, transactional_id, "CompleteCommit")
    after = verify(side, at, [transaction(transactional_id, producer, {topic: [0]})], names)
    return [added, ongoing, batched, fenced, missing, elsewhere, ended, stable, done, after]


@scenario("transactions.verify_partitions_v4",
          versions={**VERIFY, "AddPartitionsToTxn": FIRST_BROKER_VERSION},
          older_versions="AddPartitionsToTxn v4: a leader of before KIP-890's "
          "TRANSACTION_ABORTABLE (Kafka 3.6-3.7's)")  # fmt: skip
def verify_partitions_v4(side: Side) -> list[Any]:
    """At v4 the coordinator answers a partition never added TRANSACTION_ABORTABLE too (the
    leader, not the coordinator, turns it into INVALID_TXN_STATE for older clients)."""
    topic, transactional_id, at, producer = begun(side)
    names = {transactional_id: "txn", topic: "topic"}
    side.create_topic(side.topic("two"), partitions=2)
    two = side.topic("two")
    names[two] = "two"
    added = add(side, at, transactional_id, producer, {two: [0]}, FIRST_BROKER_VERSION)
    verified = verify(side, at, [transaction(transactional_id, producer,
                                             {topic: [0], two: [0, 1]})], names,
                      FIRST_BROKER_VERSION)  # fmt: skip
    return [added, verified]


@scenario("transactions.add_partitions_as_a_broker", versions=VERIFY)
def add_partitions_as_a_broker(side: Side) -> list[Any]:
    """A broker's AddPartitionsToTxn without ``verify_only`` (transaction version 2's: Kafka
    3.9's leaders never send it) adds the partitions as a client's does: the transaction is
    ongoing with them, and verified NONE after."""
    topic, transactional_id, at, producer = begun(side)
    names = {transactional_id: "txn", topic: "topic"}
    added = verify(side, at, [transaction(transactional_id, producer, {topic: [0]},
                                          verify_only=False)], names)  # fmt: skip
    verified = verify(side, at, [transaction(transactional_id, producer, {topic: [0]})], names)
    return [added, verified]


# -- the partition leader's side: a transactional Produce verified before it is appended ------

#: Produce v3-10's clients know no TRANSACTION_ABORTABLE; v11's do; v12+ has the leader add
#: the partition (transaction version 2's producers).
PRODUCE_DEFAULT_ERROR = 10
PRODUCE_GENERIC_ERROR = 11


def produce_raw(side: Side, topic: str, transactional_id: str, producer: tuple[int, int],
                sequence: int, version: int, *, partition: int = 0) -> list[Any]:  # fmt: skip
    """A transactional Produce of one record to ``partition`` at ``version``: the code, the
    message, whether it got an offset, its log start offset."""
    request = rq.produce(topic, partition, encode_batch(rq.batch(
        1, producer_id=producer[0], producer_epoch=producer[1], base_sequence=sequence,
        transactional=True, first_timestamp=int(time.time() * 1000))))  # fmt: skip
    request.transactional_id = transactional_id
    if version >= rq.PRODUCE:
        by_id(side, request)
    answer = side.call(side.leader(topic, partition), request, version)
    result = answer.responses[0].partition_responses[0]
    return [result.error_code, result.error_message, result.base_offset >= 0,
            result.log_start_offset]  # fmt: skip


def two_producers(side: Side, topic: str, transactional_id: str, producer: tuple[int, int],
                  version: int) -> list[Any]:  # fmt: skip
    """One Produce of two partitions whose transactional batches name two producer ids."""
    request = rq.produce(topic, 0, encode_batch(rq.batch(
        1, producer_id=producer[0], producer_epoch=producer[1], base_sequence=0,
        transactional=True, first_timestamp=int(time.time() * 1000))))  # fmt: skip
    partitions = request.topic_data[0].partition_data
    partitions.append(type(partitions[0])(index=1, records=encode_batch(rq.batch(
        1, producer_id=producer[0] + 1, producer_epoch=0, base_sequence=0, transactional=True,
        first_timestamp=int(time.time() * 1000)))))  # fmt: skip
    request.transactional_id = transactional_id
    if version >= rq.PRODUCE:
        by_id(side, request)
    answer = side.call(side.leader(topic, 0), request, version)
    return sorted((p.index, p.error_code) for p in answer.responses[0].partition_responses)


def leaders_verify(side: Side, version: int) -> list[Any]:
    """A raw transactional Produce at ``version``, as Kafka's leader verifies it with the
    coordinator: a partition never added is refused (what the version's client knows), the
    same once added is appended; another producer id's and an older epoch's are what the
    coordinator says of them; batches of two producers in one request are refused whole
    (whichever broker leads the partitions); after the commit the partition is out of the
    transaction again."""
    topic, transactional_id, at, producer = begun(side)
    two = side.topic("two")
    side.create_topic(two, partitions=2)
    never_added = produce_raw(side, topic, transactional_id, producer, 0, version)
    stranger = produce_raw(side, topic, transactional_id, (producer[0] + 1, 0), 0, version)
    fenced = produce_raw(side, topic, transactional_id, (producer[0], producer[1] + 1), 0,
                         version)  # fmt: skip
    both = two_producers(side, two, transactional_id, producer, version)
    added = add_partitions(side, at, transactional_id, producer, {topic: [0]})
    appended = produce_raw(side, topic, transactional_id, producer, 0, version)
    again = produce_raw(side, topic, transactional_id, producer, 1, version)
    ended = end_txn(side, at, transactional_id, producer, True)
    stable = stable_at(side, topic, 3)
    done = completed(side, at, transactional_id, "CompleteCommit")
    after = produce_raw(side, topic, transactional_id, producer, 2, version)
    return [never_added, stranger, fenced, both, added, appended, again, ended, stable, done,
            after]  # fmt: skip


@scenario("transactions.produce_verified_v10",
          versions={**RECORDS, "Produce": PRODUCE_DEFAULT_ERROR},
          older_versions="Produce v10: a client before TRANSACTION_ABORTABLE, told "
          "INVALID_TXN_STATE")  # fmt: skip
def produce_verified_v10(side: Side) -> list[Any]:
    """:func:`leaders_verify` at Produce v10: a partition never added INVALID_TXN_STATE "Partition
    was not added to the transaction"."""
    return leaders_verify(side, PRODUCE_DEFAULT_ERROR)


@scenario("transactions.produce_verified_v11",
          versions={**RECORDS, "Produce": PRODUCE_GENERIC_ERROR},
          older_versions="Produce v11: the highest a producer of transaction version 1 sends "
          "(Kafka's Java producer's), told TRANSACTION_ABORTABLE")  # fmt: skip
def produce_verified_v11(side: Side) -> list[Any]:
    """:func:`leaders_verify` at Produce v11: a partition never added TRANSACTION_ABORTABLE."""
    return leaders_verify(side, PRODUCE_GENERIC_ERROR)
