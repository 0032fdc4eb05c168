"""A lab workload's brokers: coordkit's Kafka server (what ``coordkit serve`` runs) in a process of
its own, on a private memory store, with one topic created, taking commands on stdin so the
workload can crash one broker mid-run (``coordkit serve`` has no such control).

Run as ``python -m coordkit.lab.serve_host BROKERS TOPIC PARTITIONS RF [KEY=VALUE ...]``: the
``KEY=VALUE`` words are broker configs by Kafka's names, as ``coordkit serve --config`` takes them
(``group.consumer.assignors=uniform,range``, ``group.share.record.lock.duration.ms=3000``, ...),
refused in one line (status 2) when wrong; the others keep Kafka's defaults, as on ``coordkit
serve``. It prints ``broker <id> <host:port>`` per broker, then ``ready``; on stdin,
``stop-broker <id>`` crashes that broker (``stopped <id>`` when done). End of stdin (the
workload closed it, or died) stops everything: the host never outlives the workload.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid

#: Seconds the topic's partitions may take to get leaders.
SETTLE_SECONDS = 60.0


def _say(*words: object) -> None:
    print(*words, flush=True)


def main(argv: list[str]) -> None:
    from coordkit.serve import KafkaServer
    from coordkit.serve.broker_config import BrokerConfigError, parse_broker_configs

    brokers, topic, partitions, factor = int(argv[0]), argv[1], int(argv[2]), int(argv[3])
    try:
        configs = parse_broker_configs(argv[4:])
    except BrokerConfigError as exc:
        print(exc, file=sys.stderr, flush=True)
        sys.exit(2)
    server = KafkaServer(
        f"memory://lab-{uuid.uuid4().hex[:12]}",
        list(range(brokers)),
        port=0,
        config=configs.engine_config(),
        settings=configs.serve_settings(),
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
