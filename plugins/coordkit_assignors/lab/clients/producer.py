"""The producer of the ``real-clients`` workload, in a process of its own: keyed records at a
steady rate, acks=all, each value ``"<seq> <send time>"``.

Run as ``python -m coordkit_assignors.lab.clients.producer SETTINGS_JSON`` (bootstrap, topic,
rate, client, log). It appends ``a seq partition offset sent`` to its log for every acknowledged
record and ``failed seq`` for one the client gave up on; SIGTERM stops producing, waits for the
outstanding acknowledgements and writes ``done T``. End of stdin ends the process at once.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from coordkit_assignors.lab.clients.consumer import _exit_when_orphaned

#: Seconds the producer waits for outstanding acknowledgements when told to stop.
FLUSH_SECONDS = 30.0
#: Keys cycle through this many values (records of one key stay in order on one partition).
KEYS = 101


class AckLog:
    def __init__(self, path: str) -> None:
        self.file: IO[str] = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self.lock = threading.Lock()

    def acked(self, seq: int, partition: int, offset: int, sent: str) -> None:
        with self.lock:
            self.file.write(f"a {seq} {partition} {offset} {sent}\n")

    def failed(self, seq: int) -> None:
        with self.lock:
            self.file.write(f"failed {seq}\n")

    def done(self) -> None:
        with self.lock:
            self.file.write(f"done {time.time():.6f}\n")


def _paced(rate: float, stop: threading.Event, send: Callable[[int, bytes, str], None]) -> None:
    """``send(seq, key, send time)`` ``rate`` times a second until ``stop``; the value is
    ``b"<seq> <send time>"``."""
    started = time.monotonic()
    seq = 0
    while not stop.is_set():
        due = started + seq / rate
        wait = due - time.monotonic()
        if wait > 0:
            stop.wait(wait)
            continue
        send(seq, f"key-{seq % KEYS}".encode(), f"{time.time():.6f}")
        seq += 1


def _kafka_python(settings: dict[str, Any], log: AckLog, stop: threading.Event) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=settings["bootstrap"], acks="all", linger_ms=5, retries=1_000_000
    )

    def send(seq: int, key: bytes, sent: str) -> None:
        value = f"{seq} {sent}".encode()
        future = producer.send(settings["topic"], key=key, value=value)
        future.add_callback(lambda meta: log.acked(seq, meta.partition, meta.offset, sent))
        future.add_errback(lambda _exc: log.failed(seq))

    _paced(float(settings["rate"]), stop, send)
    producer.flush(timeout=FLUSH_SECONDS)
    producer.close(timeout=FLUSH_SECONDS)


async def _aiokafka(settings: dict[str, Any], log: AckLog, stop: threading.Event) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=settings["bootstrap"], acks="all", linger_ms=5)
    await producer.start()
    pending: set[asyncio.Future[Any]] = set()

    def record(seq: int, sent: str) -> Callable[[asyncio.Future[Any]], None]:
        def done(future: asyncio.Future[Any]) -> None:
            pending.discard(future)
            if future.cancelled() or future.exception() is not None:
                log.failed(seq)
            else:
                meta = future.result()
                log.acked(seq, meta.partition, meta.offset, sent)

        return done

    try:
        started = time.monotonic()
        seq = 0
        rate = float(settings["rate"])
        while not stop.is_set():
            wait = started + seq / rate - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            sent = f"{time.time():.6f}"
            key = f"key-{seq % KEYS}".encode()
            future = await producer.send(settings["topic"], f"{seq} {sent}".encode(), key=key)
            pending.add(future)
            future.add_done_callback(record(seq, sent))
            seq += 1
        if pending:
            await asyncio.wait(pending, timeout=FLUSH_SECONDS)
    finally:
        await producer.stop()


def _confluent(settings: dict[str, Any], log: AckLog, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": settings["bootstrap"], "acks": "all", "linger.ms": 5})

    def send(seq: int, key: bytes, sent: str) -> None:
        def report(error: Any, message: Any) -> None:
            if error is None:
                log.acked(seq, message.partition(), message.offset(), sent)
            else:
                log.failed(seq)

        producer.produce(settings["topic"], f"{seq} {sent}".encode(), key, on_delivery=report)
        producer.poll(0)

    _paced(float(settings["rate"]), stop, send)
    producer.flush(FLUSH_SECONDS)


def main(argv: list[str]) -> None:
    settings: dict[str, Any] = json.loads(argv[0])
    _exit_when_orphaned()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log = AckLog(settings["log"])
    client = settings["client"]
    if client == "kafka-python":
        _kafka_python(settings, log, stop)
    elif client == "aiokafka":
        asyncio.run(_aiokafka(settings, log, stop))
    else:
        _confluent(settings, log, stop)
    log.done()


if __name__ == "__main__":
    main(sys.argv[1:])
