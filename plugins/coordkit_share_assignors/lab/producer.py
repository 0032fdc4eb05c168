"""The ``share-groups`` workload's producer, in a process of its own: confluent-kafka, acks=all,
``rate`` records a second spread over the partitions, each value ``"<seq> <send time>"``.

Run as ``python -m coordkit_share_assignors.lab.producer SETTINGS_JSON`` (bootstrap, topic,
rate, log). It appends ``a SEQ PARTITION OFFSET SENT`` to its log for every acknowledged record
and ``failed SEQ`` for one the client gave up on; SIGTERM stops producing, waits for the
outstanding acknowledgements and writes ``done TIME``. End of stdin ends the process at once.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import IO, Any

#: Seconds the producer waits for outstanding acknowledgements when told to stop.
FLUSH_SECONDS = 60.0


def _exit_when_orphaned() -> None:
    """End the process when stdin ends: the workload that started it is done or gone."""

    def watch() -> None:
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str]) -> None:
    from confluent_kafka import Producer

    settings: dict[str, Any] = json.loads(argv[0])
    _exit_when_orphaned()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log: IO[str] = open(settings["log"], "a", encoding="utf-8", buffering=1)  # noqa: SIM115
    lock = threading.Lock()
    producer = Producer({"bootstrap.servers": settings["bootstrap"], "acks": "all", "linger.ms": 5})
    rate = float(settings["rate"])

    def send(seq: int) -> None:
        sent = f"{time.time():.6f}"

        def report(error: Any, message: Any) -> None:
            with lock:
                if error is None:
                    log.write(f"a {seq} {message.partition()} {message.offset()} {sent}\n")
                else:
                    log.write(f"failed {seq}\n")

        # No key: the producer spreads the records over the partitions.
        producer.produce(settings["topic"], f"{seq} {sent}".encode(), on_delivery=report)
        producer.poll(0)

    started = time.monotonic()
    seq = 0
    while not stop.is_set():
        wait = started + seq / rate - time.monotonic()
        if wait > 0:
            stop.wait(min(wait, 0.05))
            producer.poll(0)
            continue
        send(seq)
        seq += 1
    producer.flush(FLUSH_SECONDS)
    with lock:
        log.write(f"done {time.time():.6f}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
