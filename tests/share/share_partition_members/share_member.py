"""A share-group member on confluent-kafka's ``ShareConsumer`` (librdkafka), explicit
acknowledgements. Arguments: BOOTSTRAP GROUP TOPIC POLICY, where POLICY says what it does with
each record it gets:

* ``accept``: accept every record;
* ``triage``: reject a value starting ``rej``, release one starting ``rel``, accept the rest;
* ``hold``: acknowledge nothing and stop polling once it got records (to be killed).

It prints one JSON object a line: ``{"event": "record", "partition", "offset", "delivery",
"value", "ack", "committed"}`` for each record once its acknowledgement was committed
(``committed``: the broker took its partition's acknowledgements), ``{"event": "closed"}`` after
SIGTERM's close (which leaves the group)."""

from __future__ import annotations

import json
import signal
import sys
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

stopping = False


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def stop(_signum: int, _frame: object) -> None:
    global stopping
    stopping = True


def main() -> None:
    bootstrap, group, topic, policy = sys.argv[1:5]
    signal.signal(signal.SIGTERM, stop)
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    say(event="subscribed")
    while not stopping:
        messages = consumer.poll(0.5)
        got = []
        for message in messages:
            if message.error() is not None:
                say(event="error", error=str(message.error()))
                continue
            value = (message.value() or b"").decode()
            if policy == "hold":
                ack, kind = "none", None
            elif policy == "triage" and value.startswith("rej"):
                ack, kind = "reject", AcknowledgeType.REJECT
            elif policy == "triage" and value.startswith("rel"):
                ack, kind = "release", AcknowledgeType.RELEASE
            else:
                ack, kind = "accept", AcknowledgeType.ACCEPT
            got.append(dict(partition=message.partition(), offset=message.offset(),
                            delivery=message.delivery_count(), value=value, ack=ack))  # fmt: skip
            if kind is not None:
                consumer.acknowledge(message, kind)
        if got and policy == "hold":
            for record in got:
                say(event="record", committed=False, **record)
            say(event="holding")
            while not stopping:
                time.sleep(0.1)
            break
        if got:
            # What the broker made of each partition's acknowledgements (None: done).
            results = consumer.commit_sync()
            failed = {tp.partition for tp, error in results.items() if error is not None}
            for record in got:
                say(event="record", committed=record["partition"] not in failed, **record)
    consumer.close()
    say(event="closed")


if __name__ == "__main__":
    main()
