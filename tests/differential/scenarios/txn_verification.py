"""Scenarios of the brokers' AddPartitionsToTxn (v4+, KIP-890 part 1): a partition leader asks the
transaction coordinator whether the partitions of a transactional Produce are in the producer's
transaction (``verify_only``), batched by transactional id. Kafka 3.9's leaders send it to the
coordinator before they append a transactional batch (``transaction.partition.verification.
enable``); here the scenarios send it as a broker would, without an authorizer (ClusterAction is
everybody's), and compare the coordinator's answers.
"""

from __future__ import annotations

from typing import Any

from coordkit.kafka.coordinators import coordinator_partition
from coordkit.protocol import messages
from differential.clusters import SHARED_CONFIGS
from differential.harness import Side, scenario
from differential.scenarios.transactions import (
    RECORDS,
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
