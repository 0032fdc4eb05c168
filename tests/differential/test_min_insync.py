"""``min.insync.replicas`` with a replica out of the ISR, on Kafka 4.4 and on ``coordkit serve``
(#34 item 3): the same raw requests to both, the answers compared.

The scenario differential's clusters are shared by every scenario and stay whole, so this test
has a cluster pair of its own whose third broker it stops: three Kafka 4.4 KRaft nodes (the
third stopped: its controlled shutdown takes it out of the ISR) and an in-process
``coordkit serve`` of three brokers (the third crashed: the controller takes it out). A topic of
replication factor 3 with ``min.insync.replicas=3`` led by the first broker then refuses acks=all
(NOT_ENOUGH_REPLICAS, nothing appended) and takes acks=1, whose record stays above the high
watermark (Kafka 3.7+ holds the high watermark under the minimum). Produce v12 names the topic
(v13 would need each side's topic id; what is compared does not depend on it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit.protocol import messages
from coordkit.testing.servers import KafkaCluster
from coordkit.testing.waiting import wait_for
from differential import requests as rq
from differential.harness import WAIT_SECONDS, Connection
from serve.inprocess import InProcessServer

PRODUCE_BY_NAME = 12
TOPIC = "durable"


def _unchecked(_api: str, _version: int) -> None:
    """Versions are chosen here, not by the scenario table."""


def _metadata(connection: Connection) -> Any:
    request = messages.MetadataRequest(
        topics=[messages.MetadataRequest.MetadataRequestTopic(name=TOPIC)],
        allow_auto_topic_creation=False,
    )
    return connection.call(request, rq.METADATA).topics[0]


def _isr(connection: Connection) -> list[int] | None:
    topic = _metadata(connection)
    if topic.error_code or not topic.partitions or topic.partitions[0].leader_id < 0:
        return None
    return sorted(topic.partitions[0].isr_nodes)


def _produce(connection: Connection, value_count: int, acks: int) -> tuple[int, int, int]:
    answer = connection.call(rq.produce(TOPIC, 0, rq.batch(value_count), acks=acks),
                             PRODUCE_BY_NAME)  # fmt: skip
    found = answer.responses[0].partition_responses[0]
    return int(found.error_code), int(found.base_offset), int(found.log_start_offset)


def _latest(connection: Connection) -> int:
    answer = connection.call(rq.list_offsets(TOPIC, 0, rq.LATEST_TIMESTAMP), rq.LIST_OFFSETS)
    return int(answer.topics[0].partitions[0].offset)


def _play(
    addresses: dict[int, tuple[str, int]], ids: list[int], stop: Callable[[int], None]
) -> list[Any]:
    """The exchange, on a cluster of brokers ``ids`` (the first leads the topic, the third is
    stopped by ``stop``); what each request got."""
    leader = Connection(addresses[ids[0]], _unchecked)
    try:
        topic = rq.creatable(TOPIC, -1, -1, assignment={0: ids},
                             configs={"min.insync.replicas": "3"})  # fmt: skip
        created = leader.call(rq.create_topics(topic), rq.CREATE_TOPICS).topics[0].error_code
        wait_for(lambda: _isr(leader) == sorted(ids), WAIT_SECONDS, "the topic's full ISR")
        seen: list[Any] = [created, _produce(leader, 2, -1), _latest(leader)]
        stop(ids[2])
        wait_for(lambda: _isr(leader) == sorted(ids[:2]), WAIT_SECONDS, "the ISR to shrink")
        seen += [
            _produce(leader, 1, -1),  # refused: nothing appended
            _produce(leader, 1, 1),  # taken at offset 2
            _latest(leader),  # the high watermark stays at 2
            _produce(leader, 1, -1),
        ]
        return seen
    finally:
        leader.close()


def test_acks_all_below_min_insync_replicas_as_kafka() -> None:
    with KafkaCluster(broker_ids=(1, 2, 3)) as kafka:
        kafka_seen = _play(
            {i: (n.host, n.port) for i, n in kafka.nodes.items()}, [1, 2, 3], kafka.stop
        )
    server = InProcessServer("memory://differential-min-insync", 3)
    try:
        coordkit_seen = _play(
            {i: (a.host, a.port) for i, a in server.server.addresses.items()},
            [0, 1, 2],
            server.server.stop_broker,
        )
    finally:
        server.close()
    expected = [0, (0, 0, 0), 2, (19, -1, 0), (0, 2, 0), 2, (19, -1, 0)]
    assert kafka_seen == expected
    assert coordkit_seen == kafka_seen
