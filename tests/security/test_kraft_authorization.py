"""The Kafka-4-only apis under an authorizer, beside Kafka 4.4 (KRaft, ``StandardAuthorizer``):
ConsumerGroupHeartbeat (Read on the group, Describe on each subscribed topic),
ConsumerGroupDescribe (Describe on the group, Describe on the topics its assignments name, the
group's authorized operations) and DescribeTopicPartitions (Describe on each topic, its
authorized operations), from principals with and without the ACLs. The same users, topics and
ACLs (made by the same CreateTopics and CreateAcls requests of a super user) on a Kafka 4.4 node
and a coordkit serve; the answers compared (tox -e py311-security)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from coordkit.kafka.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from coordkit.protocol import messages
from coordkit.serve.classes import nested
from coordkit.testing.waiting import wait_for
from security.sasl_kafka import PlainClient, SaslKafka
from serve.security_servers import SecureServe

PASSWORDS = {"alice": "alice-pw-41c9", "bob": "bob-pw-7e02", "admin": "admin-pw-c3d1"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items())
    + ";"
)
CONFIGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # The node's own PLAINTEXT connections (controller, the fixture's checks) are ANONYMOUS.
    "super.users": "User:ANONYMOUS;User:admin",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
}
T, G = ResourceType.TOPIC, ResourceType.GROUP
#: alice reads group g1 and describes topic orders; bob describes group g1 only; nobody but the
#: super user may touch topic secret or group g2.
ACLS = [
    (G, "g1", "User:alice", AclOperation.READ),
    (T, "orders", "User:alice", AclOperation.DESCRIBE),
    (G, "g1", "User:bob", AclOperation.DESCRIBE),
]
TOPIC_AUTHORIZATION_FAILED = 29
#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
NOT_READY = (14, 15, 16)
Creation = nested(messages.CreateAclsRequest, "AclCreation")
Creatable = nested(messages.CreateTopicsRequest, "CreatableTopic")
DescribeTopic = nested(messages.DescribeTopicPartitionsRequest, "TopicRequest")


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    cluster = SaslKafka(broker_ids=(1,), properties=CONFIGS)
    cluster.sasl_ports = {}
    with cluster:
        yield f"127.0.0.1:{cluster.sasl_ports[1]}"


@pytest.fixture(scope="module")
def coordkit() -> Iterator[str]:
    words = ["listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
             *(f"{name}={value}" for name, value in CONFIGS.items())]  # fmt: skip
    server = SecureServe([arg for word in words for arg in ("--config", word)])
    yield server.listeners["SASL_PLAINTEXT"]
    out, err = server.stop()
    for password in PASSWORDS.values():
        assert password not in out + err


def _client(address: str, user: str) -> PlainClient:
    return PlainClient(address, user, PASSWORDS[user])


def _setup(address: str) -> None:
    """The topics and ACLs, by the super user; back once alice's Describe on orders is in."""
    admin = _client(address, "admin")
    topics = [Creatable(name=t, num_partitions=1, replication_factor=1, assignments=[],
                        configs=[]) for t in ("orders", "secret")]  # fmt: skip
    created = admin.call(messages.CreateTopicsRequest(topics=topics, timeout_ms=30_000), 7)
    assert {int(t.error_code) for t in created.topics} <= {0, 36}
    creations = [Creation(resource_type=int(kind), resource_name=name,
                          resource_pattern_type=int(PatternType.LITERAL), principal=who, host="*",
                          operation=int(op), permission_type=int(AclPermissionType.ALLOW))
                 for kind, name, who, op in ACLS]  # fmt: skip
    answer = admin.call(messages.CreateAclsRequest(creations=creations), 3)
    assert [int(r.error_code) for r in answer.results] == [0] * len(ACLS)
    alice = _client(address, "alice")
    wait_for(lambda: int(_describe_topics(alice, ["orders"])[0][1]) == 0, 60, "the ACLs taken in")


def _heartbeat(c: PlainClient, group: str, topics: list[str]) -> Any:
    return c.call(messages.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=topics, server_assignor=None, topic_partitions=[]), 0)  # fmt: skip


def _describe_groups(c: PlainClient) -> list[Any]:
    """Each group's answer, by group id (Kafka orders the groups it describes by the offsets
    partitions of their coordinators, which coordkit does not reproduce)."""
    answer = c.call(messages.ConsumerGroupDescribeRequest(
        group_ids=["g1", "g2"], include_authorized_operations=True), 0)  # fmt: skip
    return sorted((g.group_id, int(g.error_code), g.error_message, g.authorized_operations,
                   len(g.members)) for g in answer.groups)  # fmt: skip


def _describe_topics(c: PlainClient, topics: list[str]) -> list[Any]:
    answer = c.call(messages.DescribeTopicPartitionsRequest(
        topics=[DescribeTopic(name=t) for t in topics], response_partition_limit=100), 0)  # fmt: skip
    found = [(t.name, int(t.error_code), t.topic_authorized_operations, t.topic_id.int != 0,
              len(t.partitions)) for t in answer.topics]  # fmt: skip
    # The refused come last, in the order of Kafka's HashSet of them (coordkit's: by name).
    return [t for t in found if t[1] != TOPIC_AUTHORIZATION_FAILED] + sorted(
        t for t in found if t[1] == TOPIC_AUTHORIZATION_FAILED
    )


def _answers(address: str) -> dict[str, Any]:
    _setup(address)
    alice, bob, admin = (_client(address, u) for u in ("alice", "bob", "admin"))
    found: dict[str, Any] = {}
    refused = _heartbeat(alice, "g2", ["orders"])
    found["heartbeat without Read on the group"] = refused.to_dict()
    refused = _heartbeat(alice, "g1", ["orders", "secret"])
    found["heartbeat naming a topic without Describe"] = refused.to_dict()
    # The group coordinator is up once the offsets topic is (FindCoordinator creates it).
    find = messages.FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"])
    wait_for(lambda: {int(k.error_code) for k in admin.call(find, 4).coordinators} == {0}, 60,
             "the groups' coordinator")  # fmt: skip
    wait_for(lambda: {g[1] for g in _describe_groups(admin)}.isdisjoint(NOT_READY), 60,
             "the coordinator loaded")  # fmt: skip
    joined = _heartbeat(alice, "g1", ["orders"])
    found["heartbeat allowed"] = (int(joined.error_code), bool(joined.member_id))
    # The member's target assignment (orders-0) is in the group once the coordinator computed it.
    wait_for(lambda: _describe_groups(admin)[0][4] == 1, 30, "the member in g1")
    for user, c in (("alice", alice), ("bob", bob), ("admin", admin)):
        found[f"consumer group describe, {user}"] = _describe_groups(c)
        found[f"describe topic partitions, {user}"] = _describe_topics(
            c, ["orders", "secret", "nosuch"]
        )
        every = c.call(messages.DescribeTopicPartitionsRequest(topics=[],
                                                               response_partition_limit=100), 0)  # fmt: skip
        found[f"every topic, {user}"] = sorted(t.name for t in every.topics
                                               if not t.name.startswith("__"))  # fmt: skip
    return found


def test_the_kafka_4_apis_answer_each_principal_as_kafka(kafka: str, coordkit: str) -> None:
    expected = _answers(kafka)
    found = _answers(coordkit)
    assert found == expected
    # Both refusals and allowances are in the comparison.
    assert expected["heartbeat without Read on the group"]["error_code"] == 30
    assert expected["heartbeat naming a topic without Describe"]["error_code"] == 29
    assert expected["heartbeat allowed"] == (0, True)
    assert [g[1] for g in expected["consumer group describe, bob"]] == [29, 30]
