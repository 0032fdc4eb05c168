"""``kafka-transactions`` (Kafka 4.4's tool) finding, aborting and force-terminating
transactions, on ``coordkit serve`` beside a Kafka 4.4 node, the same story on both and their
outputs compared (issue 38: "Kafka's ``kafka-transactions`` tool works against coordkit serve").

A hanging transaction is one a partition holds open that its coordinator does not know of: here
a transactional batch of an initialised producer to a partition its transaction never added,
which both brokers take only with ``transaction.partition.verification.enable=false`` (with it
on, the leader refuses the batch: tests/transactions/test_produce_verification.py). The batch
carries a 2023 timestamp, so the transaction is older than ``find-hanging``'s
``--max-transaction-timeout`` at once. ``find-hanging`` names it (DescribeProducers, then
ListTransactions by producer id and DescribeTransactions), ``abort`` ends it (WriteTxnMarkers to
the leader), and ``find-hanging`` then names nothing. ``forceTerminateTransaction`` fences a live
transaction's producer (InitProducerId, which aborts the transaction): the producer's commit is
refused and a read_committed consumer reads none of its records."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coordkit.protocol import messages
from coordkit.protocol.records import encode_batch, new_batch
from coordkit.serve.context import ServeSettings
from coordkit.testing.servers import KafkaCluster
from coordkit.testing.servers.kafka_tools import KAFKA_KRAFT_VERSION, kafka_tool
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory

TOPIC = "output"
WAIT_SECONDS = 60
TIMEOUT = 30
#: 2023-01-01: a transaction's last timestamp far older than any --max-transaction-timeout.
OLD_TIMESTAMP = 1_672_531_200_000
TRANSACTIONAL_KEY = 1
#: One broker on each side, which keeps every internal topic; leaders take unverified batches.
KAFKA_PROPERTIES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "transaction.partition.verification.enable": "false",
}
SETTINGS = ServeSettings(
    transaction_partition_verification_enable=False,
    transaction_state_num_partitions=5,
    transaction_state_replication_factor=1,
    transaction_state_min_isr=1,
)

Tool = Callable[..., str]
#: What each side stamps with its own clock or numbering: not compared.
UNCOMPARED = frozenset({"Duration(min)", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                        "CoordinatorId", "Coordinator"})  # fmt: skip
#: Transaction states on the way to the end of a fence.
SETTLING = ("Ongoing", "PrepareAbort", "PrepareEpochFence")


def _tool_at(bootstrap: str) -> Tool:
    def tool(*args: str) -> str:
        done = kafka_tool(KAFKA_KRAFT_VERSION, "kafka-transactions", "--bootstrap-server",
                          bootstrap, *args)  # fmt: skip
        assert done.returncode == 0, (
            f"kafka-transactions {' '.join(args)}:\n{done.stdout}{done.stderr}"
        )
        return done.stdout

    return tool


def _table(output: str) -> list[dict[str, str]]:
    """The rows of a table kafka-transactions prints (a header line, then one line a row)."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    if not lines:
        return []
    header, *rows = lines
    return [dict(zip(header, row, strict=False)) for row in rows]


def _stray_transaction(bootstrap: str, transactional_id: str) -> dict[str, int]:
    """A producer of ``transactional_id`` initialised, and its batch written to the partition
    without AddPartitionsToTxn: its producer id, epoch and the batch's offset."""
    client = RawClient(bootstrap)
    try:
        Find = messages.FindCoordinatorRequest
        wait_for(lambda: client.call(Find(key_type=TRANSACTIONAL_KEY,
                                          coordinator_keys=[transactional_id]), 4)
                 .coordinators[0].error_code == 0, WAIT_SECONDS, "a coordinator")  # fmt: skip
        request = messages.InitProducerIdRequest(transactional_id=transactional_id,
                                                 transaction_timeout_ms=60_000)  # fmt: skip
        init = wait_for(lambda: (a := client.call(request, 4)).error_code == 0 and a,
                        WAIT_SECONDS, "a producer id")  # fmt: skip
        batch = encode_batch(new_batch([(None, b"hanging")], producer_id=init.producer_id,
                                       producer_epoch=init.producer_epoch, base_sequence=0,
                                       is_transactional=True, timestamp=OLD_TIMESTAMP))  # fmt: skip
        Produce = messages.ProduceRequest
        data = Produce.TopicProduceData(
            name=TOPIC, partition_data=[Produce.PartitionProduceData(index=0, records=batch)]
        )
        answer = client.call(Produce(transactional_id=transactional_id, acks=-1,
                                     timeout_ms=10_000, topic_data=[data]), 9)  # fmt: skip
        result = answer.responses[0].partition_responses[0]
        assert result.error_code == 0, f"the stray batch was refused: {result.error_code}"
        return {"producer": int(init.producer_id), "epoch": int(init.producer_epoch),
                "offset": int(result.base_offset)}  # fmt: skip
    finally:
        client.close()


def _last_stable_offset(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso",
                         "isolation.level": "read_committed"})  # fmt: skip
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), TIMEOUT)[1])
    finally:
        consumer.close()


def _read_committed(bootstrap: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.partition.eof": True})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    found: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                break  # the end of the partition (its last stable offset)
            found.append(message.value())
    finally:
        consumer.close()
    return found


def _create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        future.result(TIMEOUT)


def story(bootstrap: str, broker_id: int) -> dict[str, Any]:
    """The tool's story on the cluster at ``bootstrap`` (one broker, ``broker_id``): what it
    found and did, with each side's own producer ids replaced by their roles."""
    _create_topic(bootstrap)
    tool = _tool_at(bootstrap)
    stray = _stray_transaction(bootstrap, "stray")
    search = ("find-hanging", "--topic", TOPIC, "--partition", "0")
    found = _table(tool(*search))
    by_broker = _table(tool("find-hanging", "--broker-id", str(broker_id)))
    producers = _table(tool("describe-producers", "--topic", TOPIC, "--partition", "0"))
    tool("abort", "--topic", TOPIC, "--partition", "0", "--start-offset", str(stray["offset"]))
    wait_for(lambda: _last_stable_offset(bootstrap) > stray["offset"], WAIT_SECONDS,
             "the last stable offset past the aborted transaction")  # fmt: skip
    after_abort = _table(tool(*search))

    live = Producer({"bootstrap.servers": bootstrap, "transactional.id": "live"})
    live.init_transactions(TIMEOUT)
    live.begin_transaction()
    live.produce(TOPIC, value=b"terminated", partition=0)
    live.flush(TIMEOUT)
    before_terminate = _table(tool("describe", "--transactional-id", "live"))
    terminated = tool("forceTerminateTransaction", "--transactionalId", "live")
    with pytest.raises(KafkaException) as refused:
        live.commit_transaction(TIMEOUT)
    # The fence aborts the transaction with the next epoch, then InitProducerId completes.
    described = wait_for(
        lambda: (rows := _table(tool("describe", "--transactional-id", "live")))
        and rows[0].get("TransactionState") not in SETTLING and rows,
        WAIT_SECONDS, "the terminated transaction settled",
    )  # fmt: skip
    named = {str(stray["producer"]): "stray-producer",
             before_terminate[0]["ProducerId"]: "live-producer"}  # fmt: skip

    def roles(rows: list[dict[str, str]]) -> list[dict[str, str]]:
        return [{k: named.get(v, v) if k == "ProducerId" else v for k, v in row.items()
                 if k not in UNCOMPARED} for row in rows]  # fmt: skip

    return {
        "found": roles(found),
        "found_by_broker": roles(by_broker),
        "producers": roles(producers),
        "after_abort": roles(after_abort),
        "before_terminate": roles(before_terminate),
        "terminated": terminated,
        "commit_refused": refused.value.args[0].code(),
        "described": roles(described),
        "read_committed": sorted(_read_committed(bootstrap)),
    }


@pytest.fixture(scope="module")
def kafka_story() -> Iterator[dict[str, Any]]:
    """The story on a Kafka 4.4 node (once for every store)."""
    with KafkaCluster(broker_ids=(1,), properties=KAFKA_PROPERTIES) as cluster:
        yield story(cluster.bootstrap, 1)


def test_find_hanging_abort_and_force_terminate_as_on_kafka(
    kafka_story: dict[str, Any], in_process: InProcessFactory
) -> None:
    server = in_process(brokers=1, settings=SETTINGS)
    got = story(server.bootstrap, 0)
    assert got == kafka_story
    # And what the story means, whichever side: the stray transaction was found and then gone.
    assert [(r["Topic"], r["ProducerId"]) for r in got["found"]] == [(TOPIC, "stray-producer")]
    assert got["after_abort"] == []
    assert [r["TransactionState"] for r in got["before_terminate"]] == ["Ongoing"]
    assert got["described"][0]["ProducerEpoch"] != got["before_terminate"][0]["ProducerEpoch"]
    assert b"terminated" not in got["read_committed"]
