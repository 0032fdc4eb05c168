"""aiokafka's transactions (``transactional_id``, ``producer.transaction()``,
``send_offsets_to_transaction``) and its read_committed consumer against ``coordkit serve``
(issue 38): a consume-transform-produce loop with every other transaction aborted (an exception
leaving the transaction's block) puts every input record exactly once in the output, and the
group's committed offset is the committed transactions'."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from coordkit.serve.context import ServeSettings
from coordkit.testing.waiting import wait_for
from serve.inprocess import InProcessFactory
from serve.test_replication import _state

SETTINGS = ServeSettings(transaction_state_num_partitions=5)
RECORDS = 30
TIMEOUT = 30


class _Aborted(Exception):
    """Raised in a transaction's block to abort it."""


async def _copy(bootstrap: str) -> int:
    """The loop: every other transaction aborted and its records read again; what it copied."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="aio-copiers",
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                isolation_level="read_committed")  # fmt: skip
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-copy")
    tp = TopicPartition("input", 0)
    await consumer.start()
    await producer.start()
    copied = rounds = 0
    try:
        consumer.assign([tp])
        deadline = time.monotonic() + 60
        while copied < RECORDS and time.monotonic() < deadline:
            batch = (await consumer.getmany(tp, timeout_ms=500, max_records=4)).get(tp, [])
            if not batch:
                continue
            rounds += 1
            try:
                async with producer.transaction():
                    for record in batch:
                        await producer.send("output", record.value.upper())
                    await producer.send_offsets_to_transaction(
                        {tp: batch[-1].offset + 1}, "aio-copiers"
                    )
                    if rounds % 2 == 0:
                        raise _Aborted
            except _Aborted:
                consumer.seek(tp, await consumer.committed(tp) or 0)
                continue
            copied += len(batch)
    finally:
        await producer.stop()
        await consumer.stop()
    return copied


async def _read_committed(bootstrap: str) -> list[bytes]:
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                              isolation_level="read_committed")  # fmt: skip
    await reader.start()
    found: list[bytes] = []
    try:
        reader.assign([TopicPartition("output", 0)])
        while batch := await reader.getmany(timeout_ms=3_000):
            found += [record.value for records in batch.values() for record in records]
    finally:
        await reader.stop()
    return found


async def _committed(bootstrap: str) -> int | None:
    check = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="aio-copiers",
                             enable_auto_commit=False)  # fmt: skip
    await check.start()
    try:
        found: int | None = await check.committed(TopicPartition("input", 0))
        return found
    finally:
        await check.stop()


def test_aiokafka_copies_exactly_once(in_process: InProcessFactory) -> None:
    server = in_process(brokers=3, settings=SETTINGS)
    for topic in ("input", "output"):
        server.server.cluster.create_topic(topic, 1, 3)
    wait_for(lambda: all(_state(server, (t, 0)) for t in ("input", "output")), TIMEOUT, "leaders")
    inputs = [f"record-{n:03d}".encode() for n in range(RECORDS)]

    async def seed() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
        await producer.start()
        try:
            for value in inputs:
                await producer.send("input", value)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(seed())
    assert asyncio.run(_copy(server.bootstrap)) == RECORDS
    output = asyncio.run(_read_committed(server.bootstrap))
    assert sorted(output) == sorted(value.upper() for value in inputs)
    assert asyncio.run(_committed(server.bootstrap)) == RECORDS
