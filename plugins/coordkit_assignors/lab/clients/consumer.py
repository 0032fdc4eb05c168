"""One consumer of the ``real-clients`` workload, in a process of its own: a real Kafka client
(kafka-python, aiokafka or confluent-kafka) in a consumer group, recording what it did; with
``"protocol": "consumer"`` in the settings, confluent-kafka joins with Kafka 4's consumer
protocol (KIP-848, ``group.protocol=consumer``) and ``assignor`` is the server-side assignor.

Run as ``python -m coordkit_assignors.lab.clients.consumer SETTINGS_JSON`` (written by
:meth:`~coordkit_assignors.lab.clients.run.ClientsRun._start_consumer`). It appends to its log
file, one line per fact, times from ``time.time()`` (every process of the run shares the clock):

* ``assigned T p,p,...`` / ``revoked T p,...`` / ``lost T p,...``: partitions the rebalance
  listener was given (``-``: none); owned = assigned minus revoked or lost, eager or cooperative;
* ``r T partition offset seq sent``: a record received at ``T``, produced at ``sent``;
* ``closed T``: left the group cleanly (SIGTERM).

Records are written (and flushed) before their offsets are committed, so a record the log lacks
was never committed and is delivered again to whoever takes the partition over. End of stdin
(the workload closed it, or died) ends the process at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from typing import IO, Any

#: Records a poll may return (small batches commit often: fewer records delivered twice).
MAX_RECORDS = 200
#: Milliseconds a commit may wait (kafka-python's waits for ever by default: through a
#: coordinator's failover, polling would stop).
COMMIT_MS = 5000


class Recorder:
    """The consumer's log file (line buffered: a SIGKILL loses nothing written)."""

    def __init__(self, path: str) -> None:
        self.file: IO[str] = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    def partitions(self, what: str, partitions: Iterable[int]) -> None:
        listed = ",".join(str(p) for p in sorted(partitions)) or "-"
        self.file.write(f"{what} {time.time():.6f} {listed}\n")

    def records(self, records: Iterable[tuple[int, int, bytes]]) -> None:
        now = time.time()
        lines = []
        for partition, offset, value in records:
            seq, sent = value.decode().split()
            lines.append(f"r {now:.6f} {partition} {offset} {seq} {sent}\n")
        self.file.write("".join(lines))

    def closed(self) -> None:
        self.file.write(f"closed {time.time():.6f}\n")


def _exit_when_orphaned() -> None:
    """End the process when stdin ends: the workload that started it is done or gone."""

    def watch() -> None:
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _kafka_python(settings: dict[str, Any], log: Recorder, stop: threading.Event) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            log.partitions("revoked", (tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            log.partitions("assigned", (tp.partition for tp in assigned))

        def on_partitions_lost(self, lost: Any) -> None:
            log.partitions("lost", (tp.partition for tp in lost))

    consumer = KafkaConsumer(
        partition_assignment_strategy=[_kafka_python_assignor(settings["assignor"])],
        max_poll_records=MAX_RECORDS,
        **_java_style(settings),
    )
    consumer.subscribe([settings["topic"]], listener=Listener())
    while not stop.is_set():
        batch = consumer.poll(timeout_ms=100)
        log.records((r.partition, r.offset, r.value) for rs in batch.values() for r in rs)
        if batch:
            try:
                consumer.commit(timeout_ms=COMMIT_MS)
            except KafkaError:
                pass  # a rebalance in progress: whoever takes the partition reads them again
    consumer.close()


def _kafka_python_assignor(name: str) -> Any:
    if name.startswith("coordkit-"):
        from coordkit.clients.kafka_python import assignor

        return assignor(name.removeprefix("coordkit-"))
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    return {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }[name]


async def _aiokafka(settings: dict[str, Any], log: Recorder, stop: threading.Event) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            log.partitions("revoked", (tp.partition for tp in revoked))

        async def on_partitions_assigned(self, assigned: Any) -> None:
            log.partitions("assigned", (tp.partition for tp in assigned))

    consumer = AIOKafkaConsumer(
        partition_assignment_strategy=[_aiokafka_assignor(settings["assignor"])],
        max_poll_records=MAX_RECORDS,
        **_java_style(settings),
    )
    consumer.subscribe([settings["topic"]], listener=Listener())
    await consumer.start()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=100)
            log.records((r.partition, r.offset, r.value) for rs in batch.values() for r in rs)
            if batch:
                try:
                    await consumer.commit()
                except KafkaError:
                    pass
    finally:
        await consumer.stop()


def _aiokafka_assignor(name: str) -> Any:
    if name.startswith("coordkit-"):
        from coordkit.clients.aiokafka import assignor

        return assignor(name.removeprefix("coordkit-"))
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    return {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }[name]


def _java_style(settings: dict[str, Any]) -> dict[str, Any]:
    """The consumer options kafka-python and aiokafka share."""
    return {
        "bootstrap_servers": settings["bootstrap"],
        "group_id": settings["group"],
        "client_id": settings["client_id"],
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "session_timeout_ms": settings["session_ms"],
        "heartbeat_interval_ms": settings["heartbeat_ms"],
        "max_poll_interval_ms": settings["max_poll_ms"],
    }


def _confluent(settings: dict[str, Any], log: Recorder, stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException

    config = {
        "bootstrap.servers": settings["bootstrap"],
        "group.id": settings["group"],
        "client.id": settings["client_id"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "max.poll.interval.ms": settings["max_poll_ms"],
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if settings.get("protocol") == "consumer":
        # KIP-848: the broker assigns with the server-side assignor named here; librdkafka
        # refuses a session, heartbeat or assignment strategy of its own (the broker's rule).
        config |= {"group.protocol": "consumer", "group.remote.assignor": settings["assignor"]}
    else:
        config |= {
            "partition.assignment.strategy": settings["assignor"],
            "session.timeout.ms": settings["session_ms"],
            "heartbeat.interval.ms": settings["heartbeat_ms"],
        }
    consumer = Consumer(config)

    def listener(what: str) -> Any:
        return lambda _consumer, parts: log.partitions(what, (p.partition for p in parts))

    consumer.subscribe(
        [settings["topic"]],
        on_assign=listener("assigned"),
        on_revoke=listener("revoked"),
        on_lost=listener("lost"),
    )
    while not stop.is_set():
        records: list[Any] = [r for r in consumer.consume(MAX_RECORDS, 0.1) if r.error() is None]
        log.records((r.partition(), r.offset(), r.value()) for r in records)
        if records:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException:
                pass
    consumer.close()


def main(argv: list[str]) -> None:
    settings: dict[str, Any] = json.loads(argv[0])
    _exit_when_orphaned()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log = Recorder(settings["log"])
    client = settings["client"]
    if client == "kafka-python":
        _kafka_python(settings, log, stop)
    elif client == "aiokafka":
        asyncio.run(_aiokafka(settings, log, stop))
    else:
        _confluent(settings, log, stop)
    log.closed()


if __name__ == "__main__":
    main(sys.argv[1:])
