"""One consumer-group member in a process of its own, so that the benchmark can kill it as a crash
would: ``python member_process.py BOOTSTRAP GROUP TOPIC STRATEGY``.

It prints one JSON line per change of what it owns, ``{"assigned": [...]}`` or
``{"revoked": [...]}`` (partition numbers), and polls until it is killed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from confluent_kafka import Consumer


def main(bootstrap: str, group: str, topic: str, strategy: str) -> None:
    def tell(what: str, partitions: list[Any]) -> None:
        print(json.dumps({what: [p.partition for p in partitions]}), flush=True)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "partition.assignment.strategy": strategy,
            # The benchmark's members all keep these (see groups.MEMBER_CONFIG).
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000,
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda _c, partitions: tell("assigned", partitions),
        on_revoke=lambda _c, partitions: tell("revoked", partitions),
    )
    while True:
        consumer.poll(0.1)


if __name__ == "__main__":
    main(*sys.argv[1:5])
