"""The group coordinator's broker crashes: clients find the new coordinator (NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE meanwhile), which resumes the group from its persisted metadata: the
generation, each member's opaque assignment bytes and metadata, and the committed offsets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from coordkit.kafka.model import TopicPartition
from coordkit.testing.waiting import wait_for
from harness.consumer_bytes import assignment_bytes, subscription_bytes
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, in_process_fixture  # noqa: F401
from serve.test_groups import (
    DescribeGroups,
    FindCoordinator,
    OffsetCommit,
    OffsetFetch,
    _create_topic,
    _heartbeat,
    _join_new,
    _sync,
)
from serve.workers import (
    PARTITIONS,
    TOPIC,
    WAIT,
    Member,
    members_fixture,  # noqa: F401
    read_all,
    split,
    workers_fixture,  # noqa: F401
)

pytestmark = pytest.mark.timeout(180)
COORDINATOR_NOT_AVAILABLE = 15


def _produce_to(bootstrap: str, first: int, count: int) -> list[str]:
    """``count`` keyed records, retried until acknowledged (leaders may be moving)."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=5, enable_idempotence=False, retries=20
    )
    values = [f"v{i}" for i in range(first, first + count)]
    futures = [producer.send(TOPIC, key=v.encode(), value=v.encode()) for v in values]
    producer.flush(timeout=60)
    for future in futures:
        future.get(timeout=60)
    producer.close(timeout=30)
    return values


def _lookup(client: RawClient, group: str, not_on: int | None = None) -> tuple[int, Any]:
    def ask() -> tuple[int, Any] | None:
        answer = client.call(FindCoordinator(key=group, key_type=0), 3)
        if answer.error_code == COORDINATOR_NOT_AVAILABLE or answer.node_id == not_on:
            return None
        assert answer.error_code == 0
        return answer.node_id, f"{answer.host}:{answer.port}"

    return wait_for(ask, 60, f"a coordinator of {group} other than {not_on}")


def test_a_new_coordinator_resumes_the_group(in_process: InProcessFactory, raw_client: Any) -> None:
    server = in_process(brokers=3)
    group = "moving"
    lookup = raw_client(server.address(0))
    _create_topic(lookup, "orders", 2)  # commits are for topics that exist
    old, address = _lookup(lookup, group)
    member = raw_client(address)
    joined = _join_new(member, group)
    mine = assignment_bytes({TopicPartition("orders", 0), TopicPartition("orders", 1)})
    assert _sync(member, group, joined, {joined.member_id: mine}).error_code == 0
    commit = member.call(
        OffsetCommit(
            group_id=group,
            generation_id_or_member_epoch=joined.generation_id,
            member_id=joined.member_id,
            topics=[
                OffsetCommit.OffsetCommitRequestTopic(
                    name="orders",
                    partitions=[
                        OffsetCommit.OffsetCommitRequestPartition(
                            partition_index=1,
                            committed_offset=17,
                            committed_leader_epoch=2,
                            committed_metadata="m",
                        )
                    ],
                )
            ],
        ),
        8,
    )
    assert commit.topics[0].partitions[0].error_code == 0

    server.server.stop_broker(old)
    survivor = next(b for b in range(3) if b != old)
    new, new_address = _lookup(raw_client(server.address(survivor)), group, not_on=old)
    assert new != old
    moved = raw_client(new_address)
    # The member carries on in its generation: no rebalance, its assignment bytes kept.
    assert _heartbeat(moved, group, joined.generation_id, joined.member_id) == 0
    again = _sync(moved, group, joined)
    assert (again.error_code, again.assignment) == (0, mine)
    fetched = moved.call(
        OffsetFetch(
            group_id=group,
            topics=[OffsetFetch.OffsetFetchRequestTopic(name="orders", partition_indexes=[1])],
        ),
        7,
    )
    [partition] = fetched.topics[0].partitions
    assert (partition.committed_offset, partition.committed_leader_epoch, partition.metadata) == (
        17,
        2,
        "m",
    )
    [described] = moved.call(DescribeGroups(groups=[group]), 5).groups
    assert (described.group_state, described.protocol_data) == ("Stable", "range")
    [shown] = described.members
    assert shown.member_metadata == subscription_bytes(["orders"])
    assert shown.member_assignment == mine


def test_kafka_python_members_follow_the_coordinator(
    in_process: InProcessFactory, members: Callable[..., Member]
) -> None:
    """kafka-python members find the new coordinator on their own after its broker crashes, and
    go on reading and committing: records produced after the crash are all read, partitions still
    split. (The topic lives on the other brokers: only the coordinator moves.)"""
    server = in_process(brokers=3)
    group_id = "follows"
    coordinator, _ = _lookup(RawClient(server.address(0)), group_id)
    others = [b for b in range(3) if b != coordinator]
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
    try:
        placement = {p: others if p % 2 else others[::-1] for p in range(PARTITIONS)}
        admin.create_topics([NewTopic(TOPIC, replica_assignments=placement)])
    finally:
        admin.close()
    group = [members("kafka-python", server.bootstrap, group_id, f"kp-{i}") for i in range(2)]
    wait_for(lambda: split(group), WAIT, "two members to split the partitions")
    before = _produce_to(server.bootstrap, 0, 60)
    wait_for(lambda: read_all(group, set(before)), WAIT, "every record read")

    server.server.stop_broker(coordinator)
    moved, _ = _lookup(RawClient(server.address(others[0])), group_id, not_on=coordinator)
    assert moved in others
    after = _produce_to(server.bootstrap, 1000, 60)
    wait_for(lambda: read_all(group, set(after)), WAIT, "every record read after the crash")
    wait_for(lambda: split(group), WAIT, "the partitions split")
    for member in group:
        member.stop()  # commits and leaves through the new coordinator
    [described] = RawClient(server.address(moved)).call(DescribeGroups(groups=[group_id]), 5).groups
    assert (described.error_code, described.group_state) == (0, "Empty")
