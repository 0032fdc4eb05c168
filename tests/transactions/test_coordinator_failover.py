"""The transaction coordinator's broker crashed mid-commit (issue 38): the coordinator wrote
PrepareCommit and answered the producer's EndTxn, but its markers never left (its marker channel
is held here); its broker crashes; the broker that now leads the id's ``__transaction_state``
partition reads the PrepareCommit from the store, writes the markers with its own (higher)
coordinator epoch and completes the transaction, as Kafka's coordinator completes what it loads:
every record of the transaction becomes visible to read_committed consumers, exactly once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from coordkit.protocol import messages
from coordkit.serve.context import ServeSettings
from coordkit.serve.transactions.coordinator import coordinator_of
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory
from serve.test_replication import _state

SETTINGS = ServeSettings(
    transaction_state_num_partitions=5, transaction_abort_timed_out_cleanup_interval_ms=200
)
TIMEOUT = 30
TRANSACTIONAL_ID = "failover-txn"


def _coordinator(address: str) -> int:
    client = RawClient(address)
    try:
        request = messages.FindCoordinatorRequest(key_type=1, coordinator_keys=[TRANSACTIONAL_ID])
        found = wait_for(lambda: (a := client.call(request, 4).coordinators[0]).error_code == 0
                         and a, TIMEOUT, "a coordinator")  # fmt: skip
        return int(found.node_id)
    finally:
        client.close()


def _committed_values(bootstrap: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r{time.time_ns()}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})  # fmt: skip
    consumer.subscribe(["output"])
    found = []
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                found.append(message.value())
    finally:
        consumer.close()
    return found


def test_a_prepared_commit_is_completed_by_the_next_coordinator(
    in_process: InProcessFactory,
) -> None:
    server = in_process(brokers=3, settings=SETTINGS)
    server.server.cluster.create_topic("output", 1, 3)
    wait_for(lambda: _state(server, ("output", 0)), TIMEOUT, "a leader")
    producer = Producer(
        {"bootstrap.servers": server.bootstrap, "transactional.id": TRANSACTIONAL_ID}
    )
    producer.init_transactions(TIMEOUT)
    first = _coordinator(server.address(0))

    async def never(*_args: Any) -> bool:
        await asyncio.Event().wait()
        return False

    def hold_markers() -> None:
        coordinator_of(server.context(first)).markers.write = never  # type: ignore[method-assign]

    server.on_loop(hold_markers)
    producer.begin_transaction()
    values = [f"v{n}".encode() for n in range(10)]
    for value in values:
        producer.produce("output", value=value)
    producer.commit_transaction(TIMEOUT)  # answered once PrepareCommit is written
    assert _committed_values(server.bootstrap) == []  # no marker yet: nothing is stable

    server.server.stop_broker(first)
    survivor = next(b for b in range(3) if b != first)
    (successor,) = wait_for(lambda: (b := _coordinator(server.address(survivor))) != first
                            and (b,), TIMEOUT, "another coordinator")  # fmt: skip
    assert successor != first
    bootstrap = ",".join(server.address(b) for b in range(3) if b != first)
    wait_for(lambda: sorted(_committed_values(bootstrap)) == sorted(values), TIMEOUT,
             "the successor to complete the commit")  # fmt: skip
    client = RawClient(server.address(successor))
    try:
        request = messages.DescribeTransactionsRequest(transactional_ids=[TRANSACTIONAL_ID])
        state = client.call(request, 0).transaction_states[0]
    finally:
        client.close()
    assert (state.error_code, state.transaction_state) == (0, "CompleteCommit")
    watermarks = Consumer({"bootstrap.servers": bootstrap, "group.id": "w",
                           "isolation.level": "read_committed"})  # fmt: skip
    try:
        _low, stable = watermarks.get_watermark_offsets(TopicPartition("output", 0), TIMEOUT)
    finally:
        watermarks.close()
    assert stable == len(values) + 1  # the records and one commit marker
