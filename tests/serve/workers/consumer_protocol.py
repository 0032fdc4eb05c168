"""A member of a consumer group on librdkafka (confluent-kafka) with ``group.protocol=consumer``
(KIP-848), run as ``python consumer_protocol.py SETTINGS-JSON`` by :mod:`serve.workers.modern`;
``ConsumerProtocolMember.java`` beside it is the same member on Kafka's Java consumer. Both print:

* ``assigned <ms> <topic>:<partition> ...``: what it owns, whenever that changes (``<ms>``: the
  wall clock, so that the test can order the members' ownerships);
* ``record <partition> <offset> <value>`` for every record;
* ``committed <partition>:<next offset> ...`` after each successful synchronous commit (of the
  offsets it read and owns: every loop, and of a partition in its revocation callback, before it
  is given up), ``commit-failed <error>`` when one fails;
* ``closed`` once it committed and left the group on SIGTERM.

Only the standard library and the client are imported here."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any

_lock = threading.Lock()


def _say(*words: object) -> None:
    line = " ".join(str(w) for w in words) + "\n"
    with _lock:  # one write per line: a process killed meanwhile leaves no half line
        sys.stdout.write(line)
        sys.stdout.flush()


def _error(exc: object) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}:{text}" if text else type(exc).__name__


def main(conf: dict[str, Any]) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    topic = conf["topic"]
    settings = {
        "bootstrap.servers": conf["bootstrap"], "group.id": conf["group"],
        "client.id": conf["name"], "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "max.poll.interval.ms": 10_000, "topic.metadata.refresh.interval.ms": 1_000,
        "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 1_000,
    }  # fmt: skip
    if conf.get("instance"):
        settings["group.instance.id"] = conf["instance"]
    if conf.get("assignor"):
        settings["group.remote.assignor"] = conf["assignor"]
    if conf.get("debug"):
        settings["debug"] = conf["debug"]
    consumer = Consumer(settings)
    owned: set[int] = set()
    pending: dict[int, int] = {}

    def show() -> None:
        _say("assigned", round(time.time() * 1000), *(f"{topic}:{p}" for p in sorted(owned)))

    def commit(partitions: set[int] | None = None) -> None:
        offsets = {p: n for p, n in pending.items() if p in owned
                   and (partitions is None or p in partitions)}  # fmt: skip
        if not offsets:
            return
        try:
            answer = consumer.commit(
                offsets=[TopicPartition(topic, p, n) for p, n in sorted(offsets.items())],
                asynchronous=False,
            )
        except KafkaException as exc:
            _say("commit-failed", _error(exc))
            return
        errors = [tp.error for tp in answer if tp.error is not None]
        if errors:
            _say("commit-failed", *(_error(e) for e in errors))
            return
        for partition, offset in offsets.items():
            if pending.get(partition) == offset:
                del pending[partition]
        _say("committed", *(f"{p}:{n}" for p, n in sorted(offsets.items())))

    # KIP-848 rebalances incrementally: confluent-kafka hands over only what moves (and
    # incrementally assigns or unassigns it after the callback).
    def on_assign(_consumer: Any, parts: Any) -> None:
        owned.update(p.partition for p in parts)
        show()

    def on_revoke(_consumer: Any, parts: Any) -> None:
        revoked = {p.partition for p in parts}
        commit(revoked)  # what was read is committed before the partition is given up
        drop(revoked)

    def on_lost(_consumer: Any, parts: Any) -> None:
        drop({p.partition for p in parts})  # fenced: a commit would be refused

    def drop(partitions: set[int]) -> None:
        owned.difference_update(partitions)
        for partition in partitions:
            pending.pop(partition, None)
        show()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    while not stop.is_set():
        for r in consumer.consume(100, 0.2):
            if r.error() is not None:
                continue
            _say("record", r.partition(), r.offset(), r.value().decode())
            pending[r.partition()] = r.offset() + 1
        commit()
    commit()
    consumer.close()  # revokes (its callback commits nothing more) and leaves the group
    _say("closed")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
