"""DescribeShareGroupOffsets' lag (KIP-1226) when the partition's leader is a broker of another
``coordkit serve --broker-id`` process: the group coordinator asks the leader's high watermark
with ListOffsets, as Kafka 4.4's ``NetworkPartitionMetadataClient`` does. Two processes, one
broker each, on a shared store; a topic with a partition led by each; a share group made by
``kafka-share-groups.sh --reset-offsets --to-earliest`` shows the lag of every partition (its
records), whichever process leads it, through ``kafka-share-groups.sh --describe``."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from coordkit.testing.backends import NOT_APPLICABLE, Capability, capabilities_of
from coordkit.testing.servers.kafka_tools import KAFKA_KRAFT_VERSION, kafka_tool
from harness.backends import Backend
from serve import test_multiprocess
from serve.test_multiprocess import StartBroker

#: The processes' fixture (one ``coordkit serve --broker-id N`` each).
start_broker = test_multiprocess.start_broker

TOPIC = "jobs"
GROUP = "lagging"
BROKERS = (1, 2)
PARTITIONS = 4
TIMEOUT = 30


def test_lag_of_partitions_led_in_another_process(
    backend: Backend, start_broker: StartBroker
) -> None:
    if Capability.SHARED_ACROSS_PROCESSES not in capabilities_of(backend):
        pytest.skip(f"{NOT_APPLICABLE}: {backend.name} is not shared across processes")
    url = backend.new_url()
    processes = [start_broker(url, b) for b in BROKERS]
    bootstrap = ",".join(a for p in processes for a in p.addresses.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while True:
        partitions = admin.list_topics(TOPIC, timeout=TIMEOUT).topics[TOPIC].partitions
        leaders = {p.id: p.leader for p in partitions.values()}
        if len(leaders) == PARTITIONS and all(b in BROKERS for b in leaders.values()):
            break
        assert time.monotonic() < deadline, leaders
        time.sleep(0.2)
    # Partitions led by each process: whichever coordinates the group, some are elsewhere.
    assert set(leaders.values()) == set(BROKERS)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(PARTITIONS * 3):
        producer.produce(TOPIC, value=b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT) == 0

    def tool(*command: str) -> str:
        done = kafka_tool(KAFKA_KRAFT_VERSION, "kafka-share-groups", "--bootstrap-server",
                          bootstrap, "--group", GROUP, *command)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    tool("--reset-offsets", "--topic", TOPIC, "--to-earliest", "--execute")
    rows = [
        r for r in (line.split() for line in tool("--describe").splitlines()) if r[:1] == [GROUP]
    ]
    # GROUP TOPIC PARTITION START-OFFSET LAG: every partition from 0, its three records behind.
    assert sorted((int(r[2]), r[3], r[4]) for r in rows) == [
        (p, "0", "3") for p in range(PARTITIONS)
    ]
