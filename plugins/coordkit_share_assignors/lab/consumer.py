"""A member of the ``share-groups`` workload's share group, in a process of its own:
confluent-kafka's ``ShareConsumer`` (librdkafka) with explicit acknowledgements.

Run as ``python -m coordkit_share_assignors.lab.consumer SETTINGS_JSON`` (bootstrap, group, topic,
log, seed, release, reject). Each record's first delivery is released with probability
``release`` and rejected with probability ``reject`` (drawn from the run's seed and the record's
sequence number, so every strategy treats the same records alike); everything else is accepted.
A line ``stall SECONDS`` on stdin makes the member hold the next records it gets for that long
without acknowledging them (a slow consumer past its record lock), then accept them. End of stdin
ends the process at once; SIGTERM acknowledges what it holds and closes (leaves the group).

The log's lines are :mod:`.analysis`'s.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import zlib
from typing import IO, Any

#: Seconds one poll waits for records.
POLL_SECONDS = 0.2


class MemberLog:
    def __init__(self, path: str) -> None:
        self.file: IO[str] = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    def line(self, *words: object) -> None:
        self.file.write(" ".join(str(w) for w in words) + "\n")


def draw(seed: int, seq: int) -> float:
    """A number in [0, 1) fixed by the run's seed and the record."""
    return zlib.crc32(f"{seed}:{seq}".encode()) / 2**32


def first_action(seed: int, seq: int, release: float, reject: float) -> str:
    """What a member does with a record's first delivery (later ones are accepted: a record is
    released at most once, so the delivery-count limit never archives it)."""
    x = draw(seed, seq)
    if x < release:
        return "release"
    if x < release + reject:
        return "reject"
    return "accept"


class Stalls:
    """``stall SECONDS`` lines read from stdin; the end of stdin ends the process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: list[float] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["stall"] and len(words) == 2:
                with self.lock:
                    self.pending.append(float(words[1]))
        os._exit(0)

    def take(self) -> float | None:
        with self.lock:
            return self.pending.pop(0) if self.pending else None


def _parse(value: bytes | None) -> tuple[int, str] | None:
    words = (value or b"").decode(errors="replace").split()
    if len(words) != 2 or not words[0].isdigit():
        return None
    return int(words[0]), words[1]


def main(argv: list[str]) -> None:
    from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

    settings: dict[str, Any] = json.loads(argv[0])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stalls = Stalls()
    log = MemberLog(settings["log"])
    seed, release, reject = (
        int(settings["seed"]),
        float(settings["release"]),
        float(settings["reject"]),
    )
    kinds = {
        "accept": AcknowledgeType.ACCEPT,
        "hold": AcknowledgeType.ACCEPT,
        "release": AcknowledgeType.RELEASE,
        "reject": AcknowledgeType.REJECT,
    }
    consumer = ShareConsumer(
        {
            "bootstrap.servers": settings["bootstrap"],
            "group.id": settings["group"],
            "client.id": settings["client_id"],
            "share.acknowledgement.mode": "explicit",
            "log_level": 3,
        }
    )
    consumer.subscribe([settings["topic"]])
    log.line("start", f"{time.time():.6f}")
    while not stop.is_set():
        messages = consumer.poll(POLL_SECONDS)
        stall = stalls.take() if messages else None
        taken = []
        for message in messages:
            if message.error() is not None:
                log.line("error", f"{time.time():.6f}", str(message.error()).replace("\n", " "))
                continue
            parsed = _parse(message.value())
            count = message.delivery_count() or 1
            if parsed is None:  # not the producer's: never redeliver it
                seq, sent, action = -1, "0", "reject"
            else:
                seq, sent = parsed
                if stall is not None:
                    action = "hold"
                elif count == 1:
                    action = first_action(seed, seq, release, reject)
                else:
                    action = "accept"
            log.line("d", f"{time.time():.6f}", message.partition(), message.offset(), count,
                     seq, sent, action)  # fmt: skip
            taken.append((message, seq, action))
        if stall is not None:
            log.line("stall", f"{time.time():.6f}", stall)
            stop.wait(stall)
            log.line("resume", f"{time.time():.6f}")
        if not taken:
            continue
        for message, _seq, action in taken:
            try:
                consumer.acknowledge(message, kinds[action])
            except KafkaException:
                pass  # the commit's answer says the record was not acknowledged
        try:
            answers = consumer.commit_sync()
            failed: set[Any] = {tp.partition for tp, error in answers.items() if error}
        except KafkaException:
            failed = {m.partition() for m, _, _ in taken}
        now = f"{time.time():.6f}"
        for message, seq, action in taken:
            result = "failed" if message.partition() in failed else "ok"
            log.line("k", now, seq, message.partition(), message.offset(), action, result)
    consumer.close()
    log.line("closed", f"{time.time():.6f}")


if __name__ == "__main__":
    main(sys.argv[1:])
