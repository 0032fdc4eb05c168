"""A partition leader verifies a transactional Produce with the transaction coordinator before
it appends (KIP-890 part 1, ``transaction.partition.verification.enable``, Kafka's default), on
every store: a batch to a partition its transaction never added is refused as Kafka's leader
refuses it and appends nothing, whichever broker coordinates the id; once added it is appended;
a verification answered before the transaction ended lets nothing in after its marker. The same
answers as Kafka 4.4's: tests/differential/scenarios/txn_verification.py."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from coordkit.engine.states import TP
from coordkit.protocol import messages
from coordkit.protocol.records import encode_batch, new_batch, read_batch_header
from coordkit.serve import errors
from coordkit.serve.context import ServeSettings
from coordkit.serve.dataplane.producer_state import ProducerStates
from coordkit.serve.dataplane.transaction_index import EndTxnMarker, end_txn_marker
from coordkit.serve.transactions.verification import (
    NETWORK_EXCEPTION,
    NOT_ADDED_MESSAGE,
    SupportedOperation,
    handler_code,
    producer_error,
    txn_offset_commit_error,
)
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer
from serve.test_replication import _state, _topic

Produce = messages.ProduceRequest
Add = messages.AddPartitionsToTxnRequest
TOPIC = "ledger"
WAIT_SECONDS = 30
TRANSACTIONAL_KEY = 1


class Transaction:
    """A transactional id's producer, driven by raw requests to its coordinator."""

    def __init__(self, server: InProcessServer, transactional_id: str) -> None:
        self.server = server
        self.transactional_id = transactional_id
        finder = RawClient(server.address(0))
        Find = messages.FindCoordinatorRequest
        try:
            found = wait_for(
                lambda: (a := finder.call(Find(key_type=TRANSACTIONAL_KEY,
                                               coordinator_keys=[transactional_id]), 4)
                         .coordinators[0]).error_code == 0 and a,
                WAIT_SECONDS, "a transaction coordinator")  # fmt: skip
        finally:
            finder.close()
        self.coordinator_id = int(found.node_id)
        self.coordinator = RawClient(server.address(self.coordinator_id))
        request = messages.InitProducerIdRequest(transactional_id=transactional_id,
                                                 transaction_timeout_ms=60_000)  # fmt: skip
        init = wait_for(lambda: (a := self.coordinator.call(request, 4)).error_code == 0 and a,
                        WAIT_SECONDS, "a producer id")  # fmt: skip
        self.producer = (int(init.producer_id), int(init.producer_epoch))

    def add(self, tp: TP) -> int:
        answer = self.coordinator.call(Add(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer[0],
            v3_and_below_producer_epoch=self.producer[1],
            v3_and_below_topics=[Add.AddPartitionsToTxnTopic(name=tp[0], partitions=[tp[1]])],
        ), 3)  # fmt: skip
        return int(answer.results_by_topic_v3_and_below[0].results_by_partition[0]
                   .partition_error_code)  # fmt: skip

    def end(self, commit: bool) -> int:
        request = messages.EndTxnRequest(transactional_id=self.transactional_id,
                                         producer_id=self.producer[0],
                                         producer_epoch=self.producer[1], committed=commit)  # fmt: skip
        return int(self.coordinator.call(request, 3).error_code)

    def close(self) -> None:
        self.coordinator.close()


def _batch(producer: tuple[int, int], sequence: int, *values: bytes) -> bytes:
    return encode_batch(new_batch([(None, v) for v in values], producer_id=producer[0],
                                  producer_epoch=producer[1], base_sequence=sequence,
                                  is_transactional=True))  # fmt: skip


def _produce(server: InProcessServer, transactional_id: str, parts: dict[TP, bytes],
             version: int = 9, acks: int = -1) -> dict[TP, Any]:  # fmt: skip
    """One Produce to the leader of the first partition: each partition's answer."""
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), records in parts.items():
        by_topic.setdefault(topic, []).append(
            Produce.PartitionProduceData(index=partition, records=records)
        )
    request = Produce(transactional_id=transactional_id, acks=acks, timeout_ms=10_000,
                      topic_data=[Produce.TopicProduceData(name=t, partition_data=p)
                                  for t, p in by_topic.items()])  # fmt: skip
    leader = _state(server, next(iter(parts))).leader
    client = RawClient(server.address(leader))
    try:
        answer = client.call(request, version)
    finally:
        client.close()
    return {(t.name, p.index): p for t in answer.responses for p in t.partition_responses}


def _log_end(server: InProcessServer, tp: TP) -> int:
    leader = _state(server, tp).leader
    return int(server.on_loop(lambda: server.context(leader).logs.get(tp).log_end))


def _coordinated_elsewhere(server: InProcessServer, leader: int) -> Transaction:
    """A transaction whose coordinator is not ``leader`` (its leader asks over the wire)."""
    for n in range(200):
        transaction = Transaction(server, f"remote-{n}")
        if transaction.coordinator_id != leader:
            return transaction
        transaction.close()
    raise AssertionError("every transactional id tried is coordinated by the leader")


@pytest.fixture
def server(in_process: InProcessFactory) -> InProcessServer:
    found = in_process(brokers=3)
    _topic(found, TOPIC, 2, 3)
    return found


@pytest.mark.parametrize("version", [9, 11])
def test_a_partition_never_added_is_refused_and_nothing_appended(
    server: InProcessServer, version: int
) -> None:
    tp = (TOPIC, 0)
    transaction = _coordinated_elsewhere(server, _state(server, tp).leader)
    try:
        refused = _produce(server, transaction.transactional_id,
                           {tp: _batch(transaction.producer, 0, b"stray")}, version)[tp]  # fmt: skip
        if version < 11:
            assert (refused.error_code, refused.error_message) == (
                errors.INVALID_TXN_STATE,
                NOT_ADDED_MESSAGE,
            )
        else:
            assert (refused.error_code, refused.error_message) == (
                errors.TRANSACTION_ABORTABLE,
                None,
            )
        assert (refused.base_offset, refused.log_start_offset) == (-1, -1)
        assert _log_end(server, tp) == 0

        assert transaction.add(tp) == errors.NONE
        appended = _produce(server, transaction.transactional_id,
                            {tp: _batch(transaction.producer, 0, b"in the transaction")},
                            version)[tp]  # fmt: skip
        assert (appended.error_code, appended.base_offset) == (errors.NONE, 0)
        assert transaction.end(commit=True) == errors.NONE
        wait_for(lambda: _log_end(server, tp) == 2, WAIT_SECONDS, "the commit marker")
        # The transaction is over: its partitions are no longer in it.
        after = wait_for(
            lambda: (a := _produce(server, transaction.transactional_id,
                                   {tp: _batch(transaction.producer, 1, b"late")}, version)[tp])
            .error_code != errors.NOT_ENOUGH_REPLICAS and a,
            WAIT_SECONDS, "the coordinator done with the commit")  # fmt: skip
        assert after.error_code == refused.error_code
        assert _log_end(server, tp) == 2
    finally:
        transaction.close()


def test_the_coordinator_is_asked_whether_it_is_the_leader_or_not(server: InProcessServer) -> None:
    """The leader verifies with its own coordinator in process and another over the wire."""
    tp = (TOPIC, 1)
    leader = _state(server, tp).leader
    seen = set()
    for n in range(200):
        transaction = Transaction(server, f"where-{n}")
        try:
            here = transaction.coordinator_id == leader
            if here in seen:
                continue
            seen.add(here)
            stray = _produce(server, transaction.transactional_id,
                             {tp: _batch(transaction.producer, 0, b"stray")})[tp]  # fmt: skip
            assert stray.error_code == errors.INVALID_TXN_STATE, here
            assert transaction.add(tp) == errors.NONE
            kept = _produce(server, transaction.transactional_id,
                            {tp: _batch(transaction.producer, 0, b"kept")})[tp]  # fmt: skip
            assert kept.error_code == errors.NONE, here
            assert transaction.end(commit=False) == errors.NONE
        finally:
            transaction.close()
        if seen == {True, False}:
            return
    raise AssertionError(f"no transactional id coordinated {'away from' if True in seen else 'by'} "
                         f"the leader in 200 tries")  # fmt: skip


def test_another_producer_or_epoch_is_what_the_coordinator_says(server: InProcessServer) -> None:
    tp = (TOPIC, 0)
    transaction = _coordinated_elsewhere(server, _state(server, tp).leader)
    try:
        producer_id, epoch = transaction.producer
        stranger = _produce(server, transaction.transactional_id,
                            {tp: _batch((producer_id + 1, 0), 0, b"x")})[tp]  # fmt: skip
        assert stranger.error_code == errors.INVALID_PRODUCER_ID_MAPPING
        fenced = _produce(server, transaction.transactional_id,
                          {tp: _batch((producer_id, epoch + 1), 0, b"x")})[tp]  # fmt: skip
        assert fenced.error_code == errors.INVALID_PRODUCER_EPOCH
        # Two producers' transactional batches in one request: the whole request is refused.
        both = _produce(server, transaction.transactional_id, {
            tp: _batch(transaction.producer, 0, b"a"),
            (TOPIC, 1): _batch((producer_id + 1, 0), 0, b"b"),
        })  # fmt: skip
        assert {p: a.error_code for p, a in both.items()} == {
            tp: errors.INVALID_PRODUCER_ID_MAPPING,
            (TOPIC, 1): errors.INVALID_PRODUCER_ID_MAPPING,
        }
        assert _log_end(server, tp) == 0
    finally:
        transaction.close()


def test_without_verification_a_stray_batch_opens_a_transaction(
    in_process: InProcessFactory,
) -> None:
    """``transaction.partition.verification.enable=false``: what Kafka's leader did before
    KIP-890 (and how a hanging transaction comes about)."""
    server = in_process(brokers=3,
                        settings=ServeSettings(transaction_partition_verification_enable=False))  # fmt: skip
    _topic(server, TOPIC, 1, 3)
    tp = (TOPIC, 0)
    transaction = Transaction(server, "unverified")
    try:
        stray = _produce(server, transaction.transactional_id,
                         {tp: _batch(transaction.producer, 0, b"stray")})[tp]  # fmt: skip
        assert (stray.error_code, stray.base_offset) == (errors.NONE, 0)
    finally:
        transaction.close()


def test_a_verification_from_before_the_marker_lets_nothing_in() -> None:
    """Kafka's ABA case: verified while the transaction was open, the batch arrives after its
    marker; the guard it was verified under is gone, so it is refused (else it would open a
    transaction no coordinator knows)."""
    states = ProducerStates()
    producer = (7, 0)
    first = read_batch_header(_batch(producer, 0, b"a"))
    guard = states.start_verification(producer[0])
    assert guard is not None
    assert states.check(first, {}, guard, verification=True) == errors.NONE
    # Verified but not yet appended: a guard taken again is the same one.
    assert states.start_verification(producer[0]) is guard
    # The transaction's marker lands first (the coordinator aborted it meanwhile).
    marker = end_txn_marker(*producer, EndTxnMarker(commit=False, coordinator_epoch=0), 0)
    states.record(attrs.evolve(read_batch_header(marker), base_offset=5), marker)
    assert states.check(first, {}, guard, verification=True) == errors.INVALID_TXN_STATE
    assert states.check(first, {}, None, verification=True) == errors.INVALID_TXN_STATE
    # Without verification the batch would be taken (what the setting turns off).
    assert states.check(first, {}, None, verification=False) == errors.NONE
    # A new verification gives a new guard, which lets it in; once appended the transaction is
    # open and its next batches need none.
    fresh = states.start_verification(producer[0])
    assert fresh is not None
    assert fresh is not guard
    assert states.check(first, {}, fresh, verification=True) == errors.NONE
    states.record(attrs.evolve(first, base_offset=10))
    assert states.start_verification(producer[0]) is None
    second = read_batch_header(_batch(producer, 1, b"b"))
    assert states.check(second, {}, None, verification=True) == errors.NONE


@pytest.mark.parametrize(
    ("coordinator", "operation", "told"),
    [
        (errors.TRANSACTION_ABORTABLE, SupportedOperation.DEFAULT_ERROR,
         (errors.INVALID_TXN_STATE, NOT_ADDED_MESSAGE)),
        (errors.TRANSACTION_ABORTABLE, SupportedOperation.GENERIC_ERROR,
         (errors.TRANSACTION_ABORTABLE, None)),
        (errors.PRODUCER_FENCED, SupportedOperation.GENERIC_ERROR,
         (errors.INVALID_PRODUCER_EPOCH, None)),
        (errors.CONCURRENT_TRANSACTIONS, SupportedOperation.GENERIC_ERROR,
         (errors.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added to the "
          "transaction. Underlying error: CONCURRENT_TRANSACTIONS")),
        (errors.CONCURRENT_TRANSACTIONS, SupportedOperation.ADD_PARTITION,
         (errors.CONCURRENT_TRANSACTIONS, None)),
        (errors.NOT_COORDINATOR, SupportedOperation.ADD_PARTITION,
         (errors.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added to the "
          "transaction. Underlying error: NOT_COORDINATOR")),
        (errors.INVALID_PRODUCER_ID_MAPPING, SupportedOperation.DEFAULT_ERROR,
         (errors.INVALID_PRODUCER_ID_MAPPING, None)),
    ],
)  # fmt: skip
def test_what_the_producer_is_told(coordinator: int, operation: Any, told: Any) -> None:
    """Kafka 4.4's ``AddPartitionsToTxnHandler`` then ``handleProduceAppend`` translation."""
    refusal = producer_error(coordinator, operation)
    assert (refusal.code, refusal.message) == told


@pytest.mark.parametrize(("version", "operation"), [
    (3, SupportedOperation.DEFAULT_ERROR), (10, SupportedOperation.DEFAULT_ERROR),
    (11, SupportedOperation.GENERIC_ERROR), (12, SupportedOperation.ADD_PARTITION),
    (13, SupportedOperation.ADD_PARTITION),
])  # fmt: skip
def test_what_each_produce_version_knows(version: int, operation: Any) -> None:
    assert SupportedOperation.for_produce(version) is operation


@pytest.mark.parametrize(
    ("version", "coordinator", "answered"),
    [
        (4, errors.TRANSACTION_ABORTABLE, errors.TRANSACTION_ABORTABLE),
        (3, errors.TRANSACTION_ABORTABLE, errors.INVALID_TXN_STATE),
        (4, errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH),
        (4, errors.CONCURRENT_TRANSACTIONS, errors.CONCURRENT_TRANSACTIONS),
        (4, NETWORK_EXCEPTION, errors.COORDINATOR_LOAD_IN_PROGRESS),
        (4, errors.COORDINATOR_NOT_AVAILABLE, errors.COORDINATOR_NOT_AVAILABLE),
        (0, errors.INVALID_PRODUCER_ID_MAPPING, errors.INVALID_PRODUCER_ID_MAPPING),
    ],
)  # fmt: skip
def test_what_a_txn_offset_commit_is_told(version: int, coordinator: int, answered: int) -> None:
    """Kafka 4.4's group coordinator: the handler's translation for the request's version, then
    ``CoordinatorOperationExceptionHelper``'s."""
    operation = SupportedOperation.for_txn_offset_commit(version)
    assert txn_offset_commit_error(handler_code(coordinator, operation)) == answered
