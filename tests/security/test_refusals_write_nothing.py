"""A refused request writes nothing (#36's intruder matrix): the apis guarded last, on a ``coordkit
serve`` with the ``kafka`` authorizer, from a principal (``User:ANONYMOUS``) that may create and
write topic t, describe the topics named ``auto-`` and read group g, and nothing more: each
refusal comes with Kafka's code, and the store and the log are as before it (tox -e
py311-security)."""

from __future__ import annotations

from typing import Any

from coordkit.engine.acls import AclAdmin
from coordkit.engine.groups.metadata import group_path
from coordkit.kafka.acls import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from coordkit.kafka.layout import PREFERRED_REPLICA_ELECTION, REASSIGN_PARTITIONS
from coordkit.protocol import messages
from coordkit.protocol.records import encode_batch, new_batch
from coordkit.serve.broker_config import parse_broker_configs
from coordkit.serve.classes import nested
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, in_process_fixture  # noqa: F401

Op, T, G, C = AclOperation, ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
R = messages


def _grant(store: Any, kind: ResourceType, name: str, operation: AclOperation,
           pattern: PatternType = PatternType.LITERAL) -> None:  # fmt: skip
    entry = AccessControlEntry("User:ANONYMOUS", "*", operation, AclPermissionType.ALLOW)
    AclAdmin(store).add([AclBinding(ResourcePattern(kind, name, pattern), entry)])


def _create(client: RawClient, name: str) -> int:
    topic = nested(R.CreateTopicsRequest, "CreatableTopic")(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])  # fmt: skip
    return int(client.call(R.CreateTopicsRequest(topics=[topic], timeout_ms=30_000), 7)
               .topics[0].error_code)  # fmt: skip


def _produce(client: RawClient, topic: str) -> int:
    P = R.ProduceRequest
    data = P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(
        index=0, records=encode_batch(new_batch([(b"k", b"v")] * 3)))])  # fmt: skip
    answer = client.call(P(acks=-1, timeout_ms=5_000, topic_data=[data]), 8)
    return int(answer.responses[0].partition_responses[0].error_code)


def _earliest(client: RawClient, topic: str) -> tuple[int, int]:
    Topic = nested(R.ListOffsetsRequest, "ListOffsetsTopic")
    Partition = nested(R.ListOffsetsRequest, "ListOffsetsPartition")
    request = R.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[Topic(
        name=topic, partitions=[Partition(partition_index=0, current_leader_epoch=-1,
                                          timestamp=-2)])])  # fmt: skip
    answer = client.call(request, 7).topics[0].partitions[0]
    return int(answer.error_code), answer.offset


def _heartbeat(client: RawClient, group: str, topics: list[str]) -> int:
    request = R.ConsumerGroupHeartbeatRequest(group_id=group, member_id="", member_epoch=0,
                                              rebalance_timeout_ms=30_000,
                                              subscribed_topic_names=topics, topic_partitions=[])  # fmt: skip
    return int(client.call(request, 0).error_code)


def _elect(client: RawClient, topic: str) -> int:
    Tps = nested(R.ElectLeadersRequest, "TopicPartitions")
    request = R.ElectLeadersRequest(election_type=0, timeout_ms=10_000,
                                    topic_partitions=[Tps(topic=topic, partitions=[0])])  # fmt: skip
    return int(client.call(request, 2).error_code)


def test_a_refused_request_writes_nothing(in_process: InProcessFactory) -> None:
    words = ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
             "auto.create.topics.enable=true"]  # fmt: skip
    server = in_process(1, settings=parse_broker_configs(words).serve_settings())
    store = server.server.cluster.admin_store
    client = RawClient(server.address(0))
    _grant(store, C, CLUSTER_NAME, Op.CREATE)
    wait_for(lambda: _create(client, "t") == 0, what="Create on the cluster taken in")
    AclAdmin(store).remove([AclBindingFilter(C, CLUSTER_NAME)])
    _grant(store, T, "t", Op.WRITE)
    _grant(store, T, "auto-", Op.DESCRIBE, PatternType.PREFIXED)
    _grant(store, G, "g", Op.READ)
    wait_for(lambda: _produce(client, "t") == 0, what="Write on t taken in")

    # Metadata: Describe on auto-x but no Create: refused, not created.
    Md = nested(R.MetadataRequest, "MetadataRequestTopic")
    wait_for(lambda: int(client.call(R.MetadataRequest(topics=[Md(name="auto-x")],
                                                       allow_auto_topic_creation=True), 12)
                         .topics[0].error_code) == 29, what="Create on the cluster taken away")  # fmt: skip
    assert store.exists("/brokers/topics/auto-x") is None
    # Reassignments and elections: no Alter on the cluster.
    Re = nested(R.AlterPartitionReassignmentsRequest, "ReassignableTopic")
    altered = client.call(R.AlterPartitionReassignmentsRequest(timeout_ms=10_000, topics=[Re(
        name="t", partitions=[Re.ReassignablePartition(partition_index=0, replicas=[0])])]), 0)  # fmt: skip
    assert int(altered.error_code) == 31
    assert [int(p.error_code) for p in altered.responses[0].partitions] == [31]
    assert store.exists(REASSIGN_PARTITIONS) is None
    assert _elect(client, "t") == 31
    assert store.exists(PREFERRED_REPLICA_ELECTION) is None
    # SCRAM users: no Alter on the cluster, no credential written.
    Upsert = nested(R.AlterUserScramCredentialsRequest, "ScramCredentialUpsertion")
    scram = client.call(R.AlterUserScramCredentialsRequest(deletions=[], upsertions=[Upsert(
        name="mallory", mechanism=1, iterations=4096, salt=b"s" * 16,
        salted_password=b"p" * 32)]), 0)  # fmt: skip
    assert [(r.user, int(r.error_code)) for r in scram.results] == [("mallory", 31)]
    assert store.exists("/config/users/mallory") is None
    # DeleteRecords: Write is no Delete, the log start stays.
    Del = nested(R.DeleteRecordsRequest, "DeleteRecordsTopic")
    deleted = client.call(R.DeleteRecordsRequest(timeout_ms=10_000, topics=[Del(name="t", partitions=[
        Del.DeleteRecordsPartition(partition_index=0, offset=-1)])]), 2)  # fmt: skip
    assert int(deleted.topics[0].partitions[0].error_code) == 29
    assert _earliest(client, "t") == (0, 0)
    # ConsumerGroupHeartbeat: a topic without Describe, a group without Read: no group made
    # (the coordinator is up: FindCoordinator made the offsets topic).
    find = R.FindCoordinatorRequest(key_type=0, coordinator_keys=["g"])
    wait_for(lambda: int(client.call(find, 4).coordinators[0].error_code) == 0,
             what="g's coordinator")  # fmt: skip
    wait_for(lambda: int(client.call(R.ConsumerGroupDescribeRequest(group_ids=["g"]), 0)
                         .groups[0].error_code) == 69, what="g's coordinator loaded")  # fmt: skip
    assert _heartbeat(client, "g", ["t", "secret"]) == 29
    assert _heartbeat(client, "h", ["t"]) == 30
    described = client.call(R.ConsumerGroupDescribeRequest(group_ids=["g", "h"]), 0).groups
    assert sorted((d.group_id, int(d.error_code)) for d in described) == [("g", 69), ("h", 30)]
    assert store.exists(group_path("g")) is None
    assert store.exists(group_path("h")) is None
    # DescribeLogDirs: no Describe on the cluster, no directory shown.
    log_dirs = client.call(R.DescribeLogDirsRequest(topics=None), 4)
    assert (int(log_dirs.error_code), log_dirs.results) == (31, [])

    # The same requests allowed once the ACLs are there: the refusals were the ACLs'.
    _grant(store, C, CLUSTER_NAME, Op.ALTER)
    _grant(store, T, "t", Op.DELETE)
    wait_for(lambda: _elect(client, "t") == 0, what="Alter on the cluster taken in")
    deleted = client.call(R.DeleteRecordsRequest(timeout_ms=10_000, topics=[Del(name="t", partitions=[
        Del.DeleteRecordsPartition(partition_index=0, offset=-1)])]), 2)  # fmt: skip
    assert int(deleted.topics[0].partitions[0].error_code) == 0
    assert _earliest(client, "t") == (0, 3)
    assert _heartbeat(client, "g", ["t"]) == 0
