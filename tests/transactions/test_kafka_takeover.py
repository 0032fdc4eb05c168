"""A log with transactions that ``coordkit serve`` wrote, taken over by Kafka 3.9 (issue 38, the
log side): a ``coordkit serve --broker-id 1 --data-dir DIR`` process gets a committed transaction,
an aborted one (its ``.txnindex`` entry written) and one left open; then a Kafka 3.9 broker of
the same id, on the same chroot and directory, serves them as Kafka does: read_committed
consumers read the committed records only, never the aborted ones (Kafka reads coordkit's
``.txnindex``: the segments are below the recovery point coordkit checkpointed, so Kafka does not
rebuild them), and the last stable offset stays at the open transaction's first offset (Kafka
rebuilt the producers' state, open transaction included, from coordkit's batches)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from coordkit.protocol import messages
from coordkit.protocol.records import encode_batch, new_batch
from coordkit.serve.dataplane.transaction_index import TransactionIndex
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient, ServeProcess

CHROOT = "/transactions"
TOPIC = "ledger"
WAIT_SECONDS = 60
TIMEOUT = 30


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[StandaloneZooKeeper]:
    server = StandaloneZooKeeper().start()
    yield server
    server.close()


def _transaction(bootstrap: str, transactional_id: str, values: list[bytes], commit: bool) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    for value in values:
        producer.produce(TOPIC, value=value, partition=0)
    producer.flush(TIMEOUT)
    if commit:
        producer.commit_transaction(TIMEOUT)
    else:
        producer.abort_transaction(TIMEOUT)


def _open_transaction(address: str, transactional_id: str) -> int:
    """A transaction begun and left open (raw requests: no client to abort it at its end); the
    offset of its first record."""
    client = RawClient(address)
    try:
        Find = messages.FindCoordinatorRequest
        wait_for(lambda: client.call(Find(key_type=1, coordinator_keys=[transactional_id]), 4)
                 .coordinators[0].error_code == 0, WAIT_SECONDS, "a coordinator")  # fmt: skip
        request = messages.InitProducerIdRequest(transactional_id=transactional_id,
                                                 transaction_timeout_ms=900_000)  # fmt: skip
        init = wait_for(lambda: (found := client.call(request, 4)).error_code == 0 and found,
                        WAIT_SECONDS, "a producer id")  # fmt: skip
        Add = messages.AddPartitionsToTxnRequest
        added = client.call(Add(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=init.producer_id,
            v3_and_below_producer_epoch=init.producer_epoch,
            v3_and_below_topics=[Add.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]), 3)  # fmt: skip
        assert (
            added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        )
        Produce = messages.ProduceRequest
        batch = encode_batch(new_batch([(None, b"open")], producer_id=init.producer_id,
                                       producer_epoch=init.producer_epoch, base_sequence=0,
                                       is_transactional=True))  # fmt: skip
        data = Produce.TopicProduceData(
            name=TOPIC, partition_data=[Produce.PartitionProduceData(index=0, records=batch)]
        )
        answer = client.call(Produce(transactional_id=transactional_id, acks=-1,
                                     timeout_ms=10_000, topic_data=[data]), 9)  # fmt: skip
        result = answer.responses[0].partition_responses[0]
        assert result.error_code == 0
        return int(result.base_offset)
    finally:
        client.close()


def _read_committed(bootstrap: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             isolation_level="read_committed", consumer_timeout_ms=3_000)  # fmt: skip
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        return [r.value for r in consumer]
    finally:
        consumer.close()


def _end_offsets(bootstrap: str) -> tuple[int, int]:
    """(read_committed's end offset — the last stable offset —, read_uncommitted's)."""
    tp = TopicPartition(TOPIC, 0)
    found = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
        try:
            found.append(consumer.end_offsets([tp])[tp])
        finally:
            consumer.close()
    return found[0], found[1]


def test_kafka_serves_coordkits_transactions(
    zookeeper: StandaloneZooKeeper, tmp_path: Path
) -> None:
    url = f"zookeeper://{zookeeper.hosts}{CHROOT}"
    data_dir = tmp_path / "logs"
    server = ServeProcess(["--store", url, "--port", "0", "--data-dir", str(data_dir),
                           "--broker-id", "1"])  # fmt: skip
    try:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
        # Small segments: the abort's marker lands in a segment before the last, which Kafka
        # does not recover (it recovers the last one after any stop without its marker file).
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={"segment.bytes": "150"})])
        admin.close()
        _transaction(server.bootstrap, "committer", [b"a1", b"a2"], commit=True)
        _transaction(server.bootstrap, "aborter", [b"b1", b"b2", b"b3"], commit=False)
        _transaction(server.bootstrap, "committer", [b"a3"], commit=True)
        open_at = _open_transaction(server.addresses[1], "hanging")
        assert _read_committed(server.bootstrap) == [b"a1", b"a2", b"a3"]
        served_ends = _end_offsets(server.bootstrap)
        assert served_ends == (open_at, open_at + 1)
    finally:
        status, _out, err = server.stop()
        assert status == 0, err
    partition_dir = data_dir / "broker-1" / f"{TOPIC}-0"
    indexes = sorted(partition_dir.glob("*.txnindex"))
    entries = [
        e for path in indexes for e in TransactionIndex.parse(path.read_bytes(), str(path)).entries
    ]
    # b1-b3 at offsets 3-5 (after a1, a2 and their marker), ended by the abort marker at 6.
    assert [(e.first_offset, e.last_offset) for e in entries] == [(3, 6)]
    (indexed,) = [int(path.stem) for path in indexes]
    last = max(int(path.stem) for path in partition_dir.glob("*.log"))
    assert indexed < last

    kafka = KafkaCluster(zookeeper=zookeeper.hosts, chroot=CHROOT, broker_ids=(1,),
                         log_dirs={1: data_dir / "broker-1"})  # fmt: skip
    with kafka:
        wait_for(lambda: _end_offsets(kafka.bootstrap) == served_ends, WAIT_SECONDS,
                 "Kafka 3.9 to serve coordkit's log with its last stable offset")  # fmt: skip
        assert _read_committed(kafka.bootstrap) == [b"a1", b"a2", b"a3"]
        # Kafka did not recover the segment of the abort (it is below the recovery point
        # coordkit checkpointed), so it read coordkit's .txnindex rather than rebuilding it.
        recovered = [line for line in kafka.node(1).log_since_start().splitlines()
                     if f"Recovering unflushed segment {indexed}." in line]  # fmt: skip
        assert recovered == []
