"""The ``real-clients`` workload's brokers: coordkit's Kafka server (what ``coordkit serve`` runs)
in a process of its own, on a private memory store, with one topic created, taking commands on
stdin so the workload can crash one broker mid-run (``coordkit serve`` has no such control).

Run as ``python -m coordkit_assignors.lab.clients.broker_host BROKERS TOPIC PARTITIONS RF
[SESSION_MS HEARTBEAT_MS ASSIGNORS]``: the last three are the consumer groups' (KIP-848)
``group.consumer.session.timeout.ms``, ``group.consumer.heartbeat.interval.ms`` and
``group.consumer.assignors`` (comma separated), Kafka's defaults when left out. It prints
``broker <id> <host:port>`` per broker, then ``ready``; on stdin, ``stop-broker <id>`` crashes
that broker (``stopped <id>`` when done). End of stdin (the workload closed it, or died)
stops everything: the host never outlives the workload.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from typing import Any

#: Seconds the topic's partitions may take to get leaders.
SETTLE_SECONDS = 60.0


def _say(*words: object) -> None:
    print(*words, flush=True)


def main(argv: list[str]) -> None:
    from coordkit.engine import EngineConfig
    from coordkit.serve import KafkaServer

    brokers, topic, partitions, factor = int(argv[0]), argv[1], int(argv[2]), int(argv[3])
    consumer_groups: dict[str, Any] = {}
    if len(argv) > 4:
        consumer_groups = {
            "consumer_group_session_timeout": int(argv[4]) / 1e3,
            "consumer_group_heartbeat_interval": int(argv[5]) / 1e3,
            "consumer_group_assignors": tuple(argv[6].split(",")),
        }
    config = EngineConfig(
        group_initial_rebalance_delay=0.5,
        offsets_topic_num_partitions=min(10, 2 * brokers),
        offsets_topic_replication_factor=min(factor, brokers),
        **consumer_groups,
    )
    server = KafkaServer(
        f"memory://lab-clients-{uuid.uuid4().hex[:12]}",
        list(range(brokers)),
        port=0,
        config=config,
    )

    def ready() -> None:
        for broker_id, address in server.addresses.items():
            _say("broker", broker_id, address)
        _say("ready")
        threading.Thread(target=_commands, args=(server,), daemon=True).start()

    with server.running():
        server.cluster.wait_settled(timeout=SETTLE_SECONDS)
        server.cluster.create_topic(topic, partitions, factor)
        server.cluster.wait_settled(timeout=SETTLE_SECONDS)
        asyncio.run(server.serve(ready))


def _commands(server: object) -> None:
    from coordkit.serve import KafkaServer

    assert isinstance(server, KafkaServer)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["stop-broker"] and len(words) == 2:
            server.stop_broker(int(words[1]))
            _say("stopped", words[1])
    server.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
