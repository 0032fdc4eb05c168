"""Scenarios of durability configs (#34 item 3): ``min.insync.replicas`` as a topic config.

Versions: CreateTopics v7 and Produce v13, the highest both Kafka 4.4 and coordkit serve answer.
Both clusters are healthy (every replica in sync) and shared by every scenario, so what is
compared is what a healthy cluster answers: a topic config is taken at creation, and Kafka
caps ``min.insync.replicas`` at the replica count (``Partition.effectiveMinIsr``), so a setting
above it refuses nothing. The refusals of an ISR below the minimum (NOT_ENOUGH_REPLICAS, the
high watermark held) need a follower out of the ISR: ``tests/serve/test_durability_configs.py``
has them. Topics are placed by the harness (partition 0 led by the first broker).
"""

from __future__ import annotations

from typing import Any

from differential import requests as rq
from differential.harness import Side, scenario
from differential.scenarios.records import produce_to_leader

VERSIONS = {"CreateTopics": rq.CREATE_TOPICS, "Produce": rq.PRODUCE}


def _create(side: Side, replication: int, configs: dict[str, str]) -> tuple[str, Any]:
    """A topic of one partition with ``configs``: its name and CreateTopics result (its
    configs left out: ``topics.create_configs`` compares those)."""
    name = side.topic()
    topic = rq.creatable(name, -1, -1, assignment=side.placement(1, replication),
                         configs=configs)  # fmt: skip
    answer = side.call(0, rq.create_topics(topic), rq.CREATE_TOPICS)
    result = answer.topics[0]
    result.configs = []
    if result.error_code == 0:
        side.wait_topic_ready(name, 1)
    return name, result


def _acks_all_then_one(side: Side, replication: int, min_insync: str) -> list[Any]:
    name, result = _create(side, replication, {"min.insync.replicas": min_insync})
    if result.error_code:
        return [result]
    return [
        result,
        produce_to_leader(side, name, rq.batch(2)),
        produce_to_leader(side, name, rq.batch(1), acks=1),
        produce_to_leader(side, name, rq.batch(1)),
    ]


@scenario("durability.min_insync_equal_to_replicas", versions=VERSIONS)
def min_insync_equal_to_replicas(side: Side) -> list[Any]:
    """Replication factor 3, ``min.insync.replicas=3``, all three in sync: acks=all and acks=1
    produces are taken (offsets 0, 2, 3)."""
    return _acks_all_then_one(side, 3, "3")


@scenario("durability.min_insync_above_replicas", versions=VERSIONS)
def min_insync_above_replicas(side: Side) -> list[Any]:
    """Replication factor 3, ``min.insync.replicas=4``: created (nothing checks it against the
    replication factor), and acks=all is taken, the minimum capped at the three replicas
    (Kafka's ``effectiveMinIsr``), as acks=1."""
    return _acks_all_then_one(side, 3, "4")


@scenario("durability.min_insync_on_one_replica", versions=VERSIONS)
def min_insync_on_one_replica(side: Side) -> list[Any]:
    """Replication factor 1, ``min.insync.replicas=2``: acks=all is taken (capped at one)."""
    return _acks_all_then_one(side, 1, "2")


@scenario("durability.min_insync_zero_refused", versions=VERSIONS)
def min_insync_zero_refused(side: Side) -> list[Any]:
    """``min.insync.replicas=0`` breaks the config's validator (at least 1): INVALID_CONFIG (the
    topic is not created: ``tests/serve/test_durability_configs.py`` checks the store)."""
    _, result = _create(side, 3, {"min.insync.replicas": "0"})
    return [result]
