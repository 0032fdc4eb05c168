"""Transactions across a mixed cluster (issue 38): a ``coordkit serve`` broker (1) and a Kafka 3.9
broker (3) on one ZooKeeper chroot, Kafka's partition verification on (its default,
``transaction.partition.verification.enable=true``, KIP-890 part 1).

A topic has a partition led by each kind (0 by coordkit, 1 by Kafka; each the other's follower).
confluent-kafka's transactional producer writes to both partitions, commits a transaction, aborts
one and commits another; a read_committed consumer reads exactly the committed records from both
leaders. The transaction coordinator is placed by giving ``__transaction_state`` one partition
(``transaction.state.log.num.partitions=1`` on both kinds, and the topic made beforehand in the
store with that partition's only replica on the chosen broker), so every transactional id is
coordinated there:

* coordkit's coordinator: Kafka's leader of partition 1 verifies each transactional batch with
  it (AddPartitionsToTxn v4+, ``verify_only``, broker to broker) and gets coordkit's markers
  (WriteTxnMarkers v1);
* Kafka 3.9's coordinator: coordkit's leader of partition 0 gets Kafka's markers.

Not the default run (marker ``slow``): ``tox -e py311-mixed``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from coordkit.engine.topics import TopicAdmin
from coordkit.kafka.coordinators import coordinator_partition
from coordkit.plugins import open_store
from coordkit.protocol import messages
from coordkit.serve.control_plane.connection import BrokerConnection
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from coordkit.testing.waiting import wait_for
from differential import requests as rq
from serve.conftest import STOP_SECONDS, ServeProcess

pytestmark = pytest.mark.slow

COORDKIT, KAFKA = 1, 3
TOPIC = "exactly-once"
#: Partition 0 led by coordkit, 1 by Kafka 3.9; each the other's follower.
ASSIGNMENT = {0: [COORDKIT, KAFKA], 1: [KAFKA, COORDKIT]}
TRANSACTION_STATE = "__transaction_state"
ONE_PARTITION = "transaction.state.log.num.partitions=1"
OFFSETS_TOPIC = "__consumer_offsets"
#: __consumer_offsets made beforehand with a partition on each kind: group coordinators of both.
OFFSETS_ASSIGNMENT = {0: [COORDKIT], 1: [KAFKA]}
WAIT_SECONDS = 90
#: The raw requests' transactional id, and their versions (Kafka 3.9's Produce: up to v11).
STRAY = "stray"
INIT_PRODUCER_ID, ADD_PARTITIONS, PRODUCE, END_TXN = 4, 3, 9, 3
#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
#: CONCURRENT_TRANSACTIONS: asked again.
SETTLING = (14, 15, 16, 51)


@attrs.define
class MixedTransactions:
    url: str
    kafka: KafkaCluster
    coordkit: ServeProcess
    coordinator: int

    @property
    def bootstrap(self) -> str:
        kafka = self.kafka.node(KAFKA).address
        return ",".join([*self.coordkit.addresses.values(), kafka])

    def state(self, topic: str, partition: int) -> dict[str, Any] | None:
        store = open_store(self.url)
        try:
            found = store.exists(f"/brokers/topics/{topic}/partitions/{partition}/state")
            if found is None:
                return None
            data, _ = store.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        finally:
            store.close()
        return dict(json.loads(data))

    def led_as_placed(self) -> bool:
        wanted = {(TOPIC, p): r for p, r in ASSIGNMENT.items()}
        wanted[(TRANSACTION_STATE, 0)] = [self.coordinator]
        wanted.update({(OFFSETS_TOPIC, p): r for p, r in OFFSETS_ASSIGNMENT.items()})
        for (topic, partition), replicas in wanted.items():
            state = self.state(topic, partition)
            if state is None or state["leader"] != replicas[0]:
                return False
            if sorted(state["isr"]) != sorted(replicas):
                return False
        return True


@pytest.fixture(params=[COORDKIT, KAFKA], ids=["coordkit-coordinator", "kafka-coordinator"])
def cluster(
    request: pytest.FixtureRequest, zookeeper: StandaloneZooKeeper
) -> Iterator[MixedTransactions]:
    coordinator = int(request.param)
    chroot = f"/mixed-txn-{uuid.uuid4().hex[:8]}"
    url = f"zookeeper://{zookeeper.hosts}{chroot}?session_timeout=6"
    serve = ServeProcess(["--store", url, "--broker-id", str(COORDKIT), "--port", "0",
                          "--config", ONE_PARTITION,
                          "--config", f"offsets.topic.num.partitions={len(OFFSETS_ASSIGNMENT)}"])  # fmt: skip
    kafka = KafkaCluster(zookeeper=zookeeper.hosts, chroot=chroot, broker_ids=(KAFKA,),
                         other_brokers=(COORDKIT,),
                         properties={"transaction.partition.verification.enable": "true",
                                     "transaction.state.log.num.partitions": "1",
                                     "transaction.state.log.replication.factor": "1",
                                     "transaction.state.log.min.isr": "1",
                                     "offsets.topic.num.partitions": str(len(OFFSETS_ASSIGNMENT)),
                                     "offsets.topic.replication.factor": "1"})  # fmt: skip
    mixed = MixedTransactions(url, kafka, serve, coordinator)
    try:
        kafka.start()
        store = open_store(url)
        try:
            admin = TopicAdmin(store)
            # The coordinator's placement: the only partition of __transaction_state, on it.
            admin.create_topic(TRANSACTION_STATE, 1, 1, assignment={0: [coordinator]},
                               config={"cleanup.policy": "compact", "min.insync.replicas": "1",
                                       "compression.type": "uncompressed",
                                       "unclean.leader.election.enable": "false"})  # fmt: skip
            admin.create_topic(TOPIC, len(ASSIGNMENT), 2, assignment=ASSIGNMENT)
            # The group coordinators' placement: a partition of __consumer_offsets on each kind.
            admin.create_topic(OFFSETS_TOPIC, len(OFFSETS_ASSIGNMENT), 1,
                               assignment=OFFSETS_ASSIGNMENT,
                               config={"cleanup.policy": "compact",
                                       "compression.type": "producer"})  # fmt: skip
        finally:
            store.close()
        wait_for(mixed.led_as_placed, WAIT_SECONDS, "the partitions led as placed, ISRs full")
        yield mixed
    finally:
        serve.process.kill()
        _out, err = serve.process.communicate(timeout=STOP_SECONDS)
        print(f"--- coordkit broker {COORDKIT}:\n{err[-20000:]}")
        print(f"--- Kafka's logs:\n{kafka.log_tail(lines=300)}")
        kafka.close()


def run_transactions(bootstrap: str) -> tuple[list[bytes], list[bytes]]:
    """A transaction committed, one aborted, one committed, each writing to both partitions:
    the values committed and the values aborted."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "mixed-txn",
                         "acks": "all", "linger.ms": 5})  # fmt: skip
    committed: list[bytes] = []
    aborted: list[bytes] = []
    producer.init_transactions(60)
    for number, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        values = [f"t{number}-p{p}-r{r}".encode() for p in ASSIGNMENT for r in range(3)]
        for value in values:
            producer.produce(TOPIC, value, partition=int(value.split(b"-p")[1][:1]))
        producer.flush(60)
        if commit:
            producer.commit_transaction(60)
            committed += values
        else:
            producer.abort_transaction(60)
            aborted += values
    return committed, aborted


def read_committed(bootstrap: str, expected: int) -> list[bytes]:
    """What a read_committed consumer reads from both partitions, from the start, until it has
    ``expected`` records and both partitions are at their end (their last stable offset)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in ASSIGNMENT])
    got: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while len(got) < expected or at_end != set(ASSIGNMENT):
            assert time.monotonic() < deadline, f"read {len(got)} of {expected}: {got}"
            message = consumer.poll(1.0)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, str(error)
                at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            got.append(message.value())
    finally:
        consumer.close()
    return got


def test_committed_records_only_across_both_kinds_of_leader(cluster: MixedTransactions) -> None:
    committed, aborted = run_transactions(cluster.bootstrap)
    got = read_committed(cluster.bootstrap, len(committed))
    assert sorted(got) == sorted(committed)
    assert not set(got) & set(aborted)
    # Each leader holds its partition's markers: 9 records and 3 control batches apiece, and
    # every offset up to the last stable one (the end) is consumed past.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ends",
                         "isolation.level": "read_committed"})  # fmt: skip
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
                for p in ASSIGNMENT]  # fmt: skip
    finally:
        consumer.close()
    assert ends == [(0, 12), (0, 12)]
    # Each leader verifies with the coordinator, of either kind: a batch of a partition never
    # added is refused INVALID_TXN_STATE (a coordinator that does not answer AddPartitionsToTxn
    # v4 has Kafka 3.9 skip the check with a warning and append it), and appended once the
    # partition is added.
    assert stray_batch(cluster, KAFKA) == [48, [0], 0, 0]
    assert stray_batch(cluster, COORDKIT) == [48, [0], 0, 0]


def group_of(partition: int) -> str:
    """A group id whose coordinator is the leader of ``__consumer_offsets`` partition
    ``partition`` (Kafka's placement, both kinds')."""
    return next(name for name in (f"copiers-{n}" for n in range(1000))
                if coordinator_partition(name, len(OFFSETS_ASSIGNMENT)) == partition)  # fmt: skip


def committed_in_transaction(cluster: MixedTransactions, group: str, commit: bool) -> int:
    """A transaction of confluent-kafka's producer writing a record and committing the group's
    offset 7 of partition 0 in it (``send_offsets_to_transaction``), committed or aborted; the
    group's committed offset after it, as a consumer reads it (-1001: none)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap,
                         "transactional.id": f"offsets-{group}-{commit}"})  # fmt: skip
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "enable.auto.commit": False})  # fmt: skip
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce(TOPIC, b"with-offsets", partition=0)
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 7)],
                                             consumer.consumer_group_metadata(), 60)  # fmt: skip
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)
        found = consumer.committed([TopicPartition(TOPIC, 0)], timeout=60)
        return int(found[0].offset)
    finally:
        consumer.close()


def test_offsets_committed_with_the_transaction_on_either_group_coordinator(
    cluster: MixedTransactions,
) -> None:
    """The group coordinator of either kind verifies TxnOffsetCommit with the transaction
    coordinator of either kind (KIP-890: a coordkit group coordinator asks Kafka's transaction
    coordinator over the wire, and Kafka's asks coordkit's), holds the offsets until the
    transaction's marker, and makes them the group's on a commit only."""
    for partition in OFFSETS_ASSIGNMENT:
        group = group_of(partition)
        assert committed_in_transaction(cluster, group, commit=False) < 0, group
        assert committed_in_transaction(cluster, group, commit=True) == 7, group


def call(address: str, request: Any, version: int) -> Any:
    host, port = address.rsplit(":", 1)
    connection = BrokerConnection((host, int(port)), "mixed-transactions", timeout=30)
    try:
        return connection.call(request, version)
    finally:
        connection.close()


def stray_batch(cluster: MixedTransactions, leader: int) -> list[Any]:
    """Raw requests: a transactional batch to the partition ``leader`` leads before the
    transaction added it, AddPartitionsToTxn of it, the batch again, EndTxn abort: their error
    codes."""
    coordinator = (cluster.coordkit.addresses[COORDKIT] if cluster.coordinator == COORDKIT
                   else cluster.kafka.node(KAFKA).address)  # fmt: skip
    partition = next(p for p, replicas in ASSIGNMENT.items() if replicas[0] == leader)
    address = (cluster.coordkit.addresses[COORDKIT] if leader == COORDKIT
               else cluster.kafka.node(KAFKA).address)  # fmt: skip
    transactional_id = f"{STRAY}-{partition}"
    init = messages.InitProducerIdRequest(transactional_id=transactional_id,
                                          transaction_timeout_ms=60_000,
                                          producer_id=-1, producer_epoch=-1)  # fmt: skip

    def initialised() -> Any:
        answer = call(coordinator, init, INIT_PRODUCER_ID)
        return None if answer.error_code in SETTLING else answer

    answer = wait_for(initialised, WAIT_SECONDS, f"InitProducerId of {transactional_id}")
    assert answer.error_code == 0, answer
    producer = (answer.producer_id, answer.producer_epoch)

    def produce(sequence: int) -> int:
        batch = rq.batch(1, producer_id=producer[0], producer_epoch=producer[1],
                         base_sequence=sequence, transactional=True,
                         first_timestamp=int(time.time() * 1000))  # fmt: skip
        request = rq.produce(TOPIC, partition, batch)
        request.transactional_id = transactional_id
        found = call(address, request, PRODUCE)
        return int(found.responses[0].partition_responses[0].error_code)

    stray = produce(0)
    Add: Any = messages.AddPartitionsToTxnRequest
    add = Add(v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer[0],
              v3_and_below_producer_epoch=producer[1],
              v3_and_below_topics=[Add.AddPartitionsToTxnTopic(name=TOPIC,
                                                               partitions=[partition])])  # fmt: skip
    added = [p.partition_error_code
             for t in call(coordinator, add, ADD_PARTITIONS).results_by_topic_v3_and_below
             for p in t.results_by_partition]  # fmt: skip
    appended = produce(0)
    end = messages.EndTxnRequest(transactional_id=transactional_id, producer_id=producer[0],
                                 producer_epoch=producer[1], committed=False)  # fmt: skip
    return [stray, added, appended, call(coordinator, end, END_TXN).error_code]
