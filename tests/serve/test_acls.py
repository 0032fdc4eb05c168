"""CreateAcls, DescribeAcls and DeleteAcls on ``coordkit serve``, and the authorizer's decisions
on the apis it guards, through raw requests of an unauthenticated connection (``User:ANONYMOUS``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit.engine.acls import AclAdmin
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
from coordkit.protocol import messages
from coordkit.protocol.records import encode_batch, new_batch
from coordkit.serve.broker_config import parse_broker_configs
from coordkit.serve.classes import nested
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, in_process_fixture  # noqa: F401

ANONYMOUS = "User:ANONYMOUS"
Creation = nested(messages.CreateAclsRequest, "AclCreation")
DeleteFilter = nested(messages.DeleteAclsRequest, "DeleteAclsFilter")
AUTHORIZER = ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer"]


def _settings(*words: str) -> Any:
    return parse_broker_configs(words).serve_settings()


def _creation(name: str, operation: AclOperation, *, kind: ResourceType = ResourceType.TOPIC,
              pattern: PatternType = PatternType.LITERAL, principal: str = ANONYMOUS) -> Any:  # fmt: skip
    return Creation(resource_type=int(kind), resource_name=name, resource_pattern_type=int(pattern),
                    principal=principal, host="*", operation=int(operation),
                    permission_type=int(AclPermissionType.ALLOW))  # fmt: skip


def _describe_all() -> Any:
    return messages.DescribeAclsRequest(
        resource_type_filter=int(ResourceType.ANY), resource_name_filter=None,
        pattern_type_filter=int(PatternType.ANY), principal_filter=None, host_filter=None,
        operation=int(AclOperation.ANY), permission_type=int(AclPermissionType.ANY),
    )  # fmt: skip


def test_without_an_authorizer_the_acl_apis_are_security_disabled(
    in_process: InProcessFactory, raw_client: Callable[[str], RawClient]
) -> None:
    server = in_process(1)
    client = raw_client(server.address(0))
    create = client.call(
        messages.CreateAclsRequest(creations=[_creation("t", AclOperation.READ)]), 3
    )
    assert [(r.error_code, r.error_message) for r in create.results] == [
        (54, "No Authorizer is configured.")
    ]
    described = client.call(_describe_all(), 3)
    assert (described.error_code, described.error_message) == (
        54, "No Authorizer is configured on the broker",
    )  # fmt: skip
    assert AclAdmin(server.server.cluster.admin_store).read_all() == {}


def test_acl_apis_with_the_kafka_authorizer(
    in_process: InProcessFactory, raw_client: Callable[[str], RawClient]
) -> None:
    server = in_process(1, settings=_settings(*AUTHORIZER))
    store = server.server.cluster.admin_store
    client = raw_client(server.address(0))
    request = messages.CreateAclsRequest(creations=[_creation("t", AclOperation.READ)])
    # no ACL lets ANONYMOUS alter the cluster: refused, nothing written
    assert [r.error_code for r in client.call(request, 3).results] == [31]
    assert client.call(_describe_all(), 3).error_code == 31
    assert AclAdmin(store).read_all() == {}
    # granted Alter on the cluster (written to the store as kafka-acls would)
    cluster = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME)
    alter = AccessControlEntry(ANONYMOUS, "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    AclAdmin(store).add([AclBinding(cluster, alter)])
    wait_for(lambda: client.call(_describe_all(), 3).error_code == 0, what="the ACL taken in")
    request = messages.CreateAclsRequest(creations=[
        _creation("t", AclOperation.READ),
        _creation("app-", AclOperation.READ, kind=ResourceType.GROUP, pattern=PatternType.PREFIXED),
        _creation("other", AclOperation.READ, kind=ResourceType.CLUSTER),
        _creation("t", AclOperation.ANY),
    ])  # fmt: skip
    results = [(r.error_code, r.error_message) for r in client.call(request, 3).results]
    assert results == [
        (0, None), (0, None),
        (42, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (42, "Invalid operation ANY"),
    ]  # fmt: skip
    assert store.get("/kafka-acl/Topic/t")[0] == (
        b'{"acls":[{"principal":"User:ANONYMOUS","permissionType":"Allow","host":"*",'
        b'"operation":"Read"}],"version":1}'
    )
    described = client.call(_describe_all(), 3)
    assert sorted(
        (r.resource_type, r.resource_name, r.pattern_type, a.operation)
        for r in described.resources
        for a in r.acls
    ) == [(2, "t", 3, 3), (3, "app-", 4, 3), (4, CLUSTER_NAME, 3, 7)]
    delete = messages.DeleteAclsRequest(filters=[DeleteFilter(
        resource_type_filter=int(ResourceType.TOPIC), resource_name_filter=None,
        pattern_type_filter=int(PatternType.ANY), principal_filter=ANONYMOUS, host_filter=None,
        operation=int(AclOperation.ANY), permission_type=int(AclPermissionType.ANY))])  # fmt: skip
    [result] = client.call(delete, 3).filter_results
    assert result.error_code == 0
    assert [(m.resource_name, m.operation) for m in result.matching_acls] == [("t", 3)]
    assert store.exists("/kafka-acl/Topic/t") is None


CreatableTopic = nested(messages.CreateTopicsRequest, "CreatableTopic")
MetadataTopic = nested(messages.MetadataRequest, "MetadataRequestTopic")
Produce = messages.ProduceRequest
Fetch = messages.FetchRequest
CommitTopic = nested(messages.OffsetCommitRequest, "OffsetCommitRequestTopic")
CommitPartition = nested(messages.OffsetCommitRequest, "OffsetCommitRequestPartition")


def _grant(store: Any, kind: ResourceType, name: str, operation: AclOperation,
           pattern: PatternType = PatternType.LITERAL) -> None:  # fmt: skip
    entry = AccessControlEntry(ANONYMOUS, "*", operation, AclPermissionType.ALLOW)
    AclAdmin(store).add([AclBinding(ResourcePattern(kind, name, pattern), entry)])


def _create(client: RawClient, name: str) -> int:
    topic = CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[],
                           configs=[])  # fmt: skip
    request = messages.CreateTopicsRequest(topics=[topic], timeout_ms=30_000, validate_only=False)
    return int(client.call(request, 7).topics[0].error_code)


def _listed(client: RawClient, *names: str) -> dict[str, int]:
    asked = None if not names else [MetadataTopic(name=n) for n in names]
    request = messages.MetadataRequest(topics=asked, allow_auto_topic_creation=False)
    return {t.name: t.error_code for t in client.call(request, 12).topics}


def _produce(client: RawClient, topic: str) -> int:
    records = encode_batch(new_batch([(b"k", b"v")]))
    data = Produce.TopicProduceData(name=topic, partition_data=[
        Produce.PartitionProduceData(index=0, records=records)])  # fmt: skip
    response = client.call(Produce(acks=-1, timeout_ms=5_000, topic_data=[data]), 8)
    return int(response.responses[0].partition_responses[0].error_code)


def _fetch(client: RawClient, topic: str) -> Any:
    part = Fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    request = Fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                    topics=[Fetch.FetchTopic(topic=topic, partitions=[part])])  # fmt: skip
    return client.call(request, 12).responses[0].partitions[0]


GrowTopic = nested(messages.CreatePartitionsRequest, "CreatePartitionsTopic")
OffsetsTopic = nested(messages.ListOffsetsRequest, "ListOffsetsTopic")
OffsetsPartition = nested(messages.ListOffsetsRequest, "ListOffsetsPartition")


def _list_offsets(client: RawClient, topic: str) -> int:
    part = OffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)
    request = messages.ListOffsetsRequest(replica_id=-1, isolation_level=0,
                                          topics=[OffsetsTopic(name=topic, partitions=[part])])  # fmt: skip
    return int(client.call(request, 7).topics[0].partitions[0].error_code)


def _describe_configs(client: RawClient, resource_type: int, name: str) -> tuple[int, str]:
    Resource = nested(messages.DescribeConfigsRequest, "DescribeConfigsResource")
    request = messages.DescribeConfigsRequest(
        resources=[Resource(resource_type=resource_type, resource_name=name,
                            configuration_keys=None)],
        include_synonyms=False, include_documentation=False)  # fmt: skip
    result = client.call(request, 4).results[0]
    return int(result.error_code), result.error_message


def _fetch_offsets(
    client: RawClient, group: str, topics: list[str]
) -> tuple[int, dict[str, tuple[int, int]]]:
    """OffsetFetch v7 (one group, a top-level error): the error and each topic's partition 0."""
    Topic = nested(messages.OffsetFetchRequest, "OffsetFetchRequestTopic")
    request = messages.OffsetFetchRequest(
        group_id=group, topics=[Topic(name=t, partition_indexes=[0]) for t in topics],
        require_stable=False,
    )  # fmt: skip
    answer = client.call(request, 7)
    found = {t.name: (t.partitions[0].error_code, t.partitions[0].committed_offset)
             for t in answer.topics}  # fmt: skip
    return int(answer.error_code), found


def _delete_offsets(client: RawClient, group: str, topics: list[str]) -> tuple[int, dict[str, int]]:
    Topic = nested(messages.OffsetDeleteRequest, "OffsetDeleteRequestTopic")
    Partition = nested(messages.OffsetDeleteRequest, "OffsetDeleteRequestPartition")
    request = messages.OffsetDeleteRequest(group_id=group, topics=[
        Topic(name=t, partitions=[Partition(partition_index=0)]) for t in topics])  # fmt: skip
    answer = client.call(request, 0)
    return int(answer.error_code), {t.name: t.partitions[0].error_code for t in answer.topics}


def _commit(client: RawClient, group: str, topic: str) -> int:
    partition = CommitPartition(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                committed_metadata="")  # fmt: skip
    request = messages.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[CommitTopic(name=topic, partitions=[partition])],
    )  # fmt: skip
    return int(client.call(request, 8).topics[0].partitions[0].error_code)


def test_a_principal_without_acls_is_refused_and_nothing_is_written(
    in_process: InProcessFactory, raw_client: Callable[[str], RawClient]
) -> None:
    server = in_process(1, settings=_settings(*AUTHORIZER))
    store = server.server.cluster.admin_store
    client = raw_client(server.address(0))
    assert _create(client, "t") == 29
    assert store.exists("/brokers/topics/t") is None
    _grant(store, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CREATE)
    wait_for(lambda: _create(client, "t") == 0, what="Create on the cluster taken in")
    assert _create(client, "u") == 0
    assert _create(client, "v") == 0  # no ACL will name v
    # no Describe on either: hidden from a listing, refused by name
    assert _listed(client) == {}
    assert _listed(client, "t") == {"t": 29}
    assert _produce(client, "t") == 29
    assert _fetch(client, "t").error_code == 29
    assert _list_offsets(client, "t") == 29
    _grant(store, ResourceType.TOPIC, "t", AclOperation.WRITE)
    _grant(store, ResourceType.TOPIC, "u", AclOperation.READ, PatternType.PREFIXED)
    wait_for(lambda: _listed(client) == {"t": 0, "u": 0}, what="Write and Read taken in")
    assert _produce(client, "t") == 0
    assert _fetch(client, "t").error_code == 29  # Write gives no Read
    assert _list_offsets(client, "t") == 0  # Write implies Describe
    grow = messages.CreatePartitionsRequest(topics=[GrowTopic(name="u", count=3, assignments=None)],
                                            timeout_ms=5_000, validate_only=False)  # fmt: skip
    assert client.call(grow, 3).results[0].error_code == 29  # Read gives no Alter
    # configs: DescribeConfigs / AlterConfigs on the topic, the group (Kafka 4's GROUP
    # resource), or on the cluster for a broker and client metrics (Kafka's ConfigHelper)
    assert _describe_configs(client, 2, "u") == (29, "Topic authorization failed.")
    assert _describe_configs(client, 4, "0") == (31, "Cluster authorization failed.")
    assert _describe_configs(client, 32, "g") == (30, "Group authorization failed.")
    assert _describe_configs(client, 16, "m") == (31, "Cluster authorization failed.")
    _grant(store, ResourceType.GROUP, "g", AclOperation.DESCRIBE_CONFIGS)
    wait_for(lambda: _describe_configs(client, 32, "g")[0] == 0, what="DescribeConfigs on g")
    assert _describe_configs(client, 32, "h")[0] == 30
    Alterable = nested(messages.IncrementalAlterConfigsRequest, "AlterConfigsResource")
    alter = messages.IncrementalAlterConfigsRequest(validate_only=False, resources=[Alterable(
        resource_type=2, resource_name="t", configs=[Alterable.AlterableConfig(
            name="retention.ms", config_operation=0, value="1000")])])  # fmt: skip
    configs_before = store.get("/config/topics/t")
    assert client.call(alter, 1).responses[0].error_code == 29
    assert store.get("/config/topics/t") == configs_before
    assert store.children("/brokers/topics/u/partitions") == ["0"]
    assert _produce(client, "u") == 29
    fetched = _fetch(client, "u")
    assert (fetched.error_code, fetched.high_watermark, bytes(fetched.records)) == (0, 0, b"")
    deleted = client.call(messages.DeleteTopicsRequest(topic_names=["t"], timeout_ms=5_000), 5)
    assert deleted.responses[0].error_code == 29
    assert store.exists("/brokers/topics/t") is not None
    # the group apis: Read on the group first, then Read on each committed topic
    assert _commit(client, "g", "u") == 30
    heartbeat = messages.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    assert client.call(heartbeat, 4).error_code == 30
    find = messages.FindCoordinatorRequest(key="g", key_type=0)
    assert client.call(find, 3).error_code == 30  # Describe on the group: nothing created
    assert store.exists("/brokers/topics/__consumer_offsets") is None
    _grant(store, ResourceType.GROUP, "g", AclOperation.READ)
    # the offsets topic is created by a first FindCoordinator (Describe on the group: implied)
    wait_for(lambda: client.call(find, 3).error_code == 0, what="the group's coordinator")
    wait_for(lambda: _commit(client, "g", "u") == 0, what="Read on the group taken in")
    assert _commit(client, "g", "t") == 29
    assert _commit(client, "h", "u") == 30
    # the group h exists (a member of another principal could have made it): hidden from a
    # principal without Describe on it, refused by name; g listed and described
    _grant(store, ResourceType.GROUP, "h", AclOperation.READ)
    wait_for(lambda: _commit(client, "h", "u") == 0, what="Read on h taken in")
    AclAdmin(store).remove([AclBindingFilter(ResourceType.GROUP, "h")])
    wait_for(lambda: _commit(client, "h", "u") == 30, what="Read on h taken away")
    listed = client.call(messages.ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    assert [g.group_id for g in listed.groups] == ["g"]
    described = client.call(messages.DescribeGroupsRequest(
        groups=["g", "h"], include_authorized_operations=False), 5).groups  # fmt: skip
    # Kafka's KafkaApis answers the refused groups first
    assert [(d.group_id, d.error_code) for d in described] == [("h", 30), ("g", 0)]
    # OffsetFetch: Describe on the group, then on each topic (refused when named, else left out)
    assert _fetch_offsets(client, "g", ["u", "v"]) == (0, {"u": (0, 1), "v": (29, -1)})
    assert _fetch_offsets(client, "h", ["u"]) == (30, {})
    Group = nested(messages.OffsetFetchRequest, "OffsetFetchRequestGroup")
    GroupTopic = nested(messages.OffsetFetchRequest, "OffsetFetchRequestTopics")
    request = messages.OffsetFetchRequest(require_stable=False, groups=[
        Group(group_id="g", topics=None),  # every topic: v left out (no offsets there anyway)
        Group(group_id="g", topics=[GroupTopic(name="v", partition_indexes=[0])]),
        Group(group_id="h", topics=None),
    ])  # fmt: skip
    answered = client.call(request, 8).groups
    assert [(g.error_code, [(t.name, t.partitions[0].error_code) for t in g.topics])
            for g in answered] == [(0, [("u", 0)]), (0, [("v", 29)]), (30, [])]  # fmt: skip
    deleted = client.call(messages.DeleteGroupsRequest(groups_names=["g"]), 2).results
    assert [(d.group_id, d.error_code) for d in deleted] == [("g", 30)]  # Read gives no Delete
    assert _delete_offsets(client, "g", ["u"]) == (30, {})
    _grant(store, ResourceType.GROUP, "g", AclOperation.DELETE)
    wait_for(lambda: _delete_offsets(client, "g", ["u", "v"])[0] == 0, what="Delete taken in")
    assert _delete_offsets(client, "g", ["u", "v"]) == (0, {"u": 0, "v": 29})
    assert _fetch_offsets(client, "g", ["u"]) == (0, {"u": (0, -1)})  # u's offset deleted
