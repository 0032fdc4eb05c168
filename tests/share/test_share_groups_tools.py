"""kafka-share-groups (Kafka 4.4's tool, from the fetched jars) against ``coordkit serve`` and a
Kafka 4.4 node side by side: the same share group (one member over a topic of three partitions,
joined by raw ShareGroupHeartbeats until it holds them all) listed and described the same, but
for the coordinator's address. Needs Java 17 and the Kafka 4.4 jar cache (it fails saying how to
get them)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from coordkit.engine.config import EngineConfig
from coordkit.protocol import messages
from coordkit.testing.servers import KafkaCluster
from coordkit.testing.servers.kafka_tools import KAFKA_KRAFT_VERSION, kafka_tool
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, in_process_fixture  # noqa: F401

GROUP = "tools-share"
TOPIC = "tools-jobs"
MEMBER = "AAAAAAAAAAAAAAAAAAAAAA"
DEADLINE = 60.0
Heartbeat = messages.ShareGroupHeartbeatRequest


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    properties = {
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
    }
    with KafkaCluster(broker_ids=(1,), properties=properties) as cluster:
        node = cluster.nodes[1]
        yield f"{node.host}:{node.port}"


def prepare(bootstrap: str) -> RawClient:
    """The topic, then the member, heartbeating until it holds all three partitions."""
    client = RawClient(bootstrap)
    create = messages.CreateTopicsRequest
    client.call(
        create(topics=[create.CreatableTopic(name=TOPIC, num_partitions=3, replication_factor=1,
                                             assignments=[], configs=[])],
               timeout_ms=30_000, validate_only=False),
        7,
    )  # fmt: skip
    deadline = time.monotonic() + DEADLINE
    find = messages.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP])
    while client.call(find, 4).coordinators[0].error_code and time.monotonic() < deadline:
        time.sleep(0.2)  # the offsets topic is made by the first FindCoordinator
    epoch, held = 0, 0
    while time.monotonic() < deadline:
        answer = client.call(
            Heartbeat(group_id=GROUP, member_id=MEMBER, member_epoch=epoch, rack_id=None,
                      subscribed_topic_names=[TOPIC] if epoch == 0 else None), 1,
        )  # fmt: skip
        if answer.error_code == 0:
            epoch = answer.member_epoch
            if answer.assignment is not None:
                held = sum(len(t.partitions) for t in answer.assignment.topic_partitions)
            if held == 3:
                return client
        time.sleep(0.3)
    raise AssertionError(f"{bootstrap}: the member did not get the three partitions")


def outputs(bootstrap: str, client: RawClient) -> list[str]:
    """The tool's answers, with the coordinator's address and id made alike."""
    shown = []
    for args in (["--list"], ["--describe", "--group", GROUP, "--members"],
                 ["--describe", "--group", GROUP, "--state"]):  # fmt: skip
        done = kafka_tool(KAFKA_KRAFT_VERSION, "kafka-share-groups", "--bootstrap-server",
                          bootstrap, *args)  # fmt: skip
        assert done.returncode == 0, done.stderr
        text = done.stdout.replace(bootstrap, "<coordinator>")
        shown.append(re.sub(r"\(\d+\)", "(<id>)", re.sub(r" +", " ", text)).strip())
    return shown


def test_kafka_share_groups_lists_and_describes_as_on_kafka(
    kafka: str, in_process: InProcessFactory
) -> None:
    served = in_process(brokers=1, config=EngineConfig(share_group_session_timeout=120.0))
    on_kafka = outputs(kafka, prepare(kafka))
    on_coordkit = outputs(served.bootstrap, prepare(served.bootstrap))
    assert on_coordkit == on_kafka
    assert f"{MEMBER} /127.0.0.1" in on_kafka[1]
    assert "Stable 1" in on_kafka[2]
