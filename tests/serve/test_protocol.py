"""``coordkit serve`` on the wire, through coordkit's own codec: what kafka-python never sends
(malformed frames, unknown versions, requests to the wrong broker) and what it relies on."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaAdminClient

from coordkit.protocol import KafkaCodec, messages
from coordkit.protocol.records import decode_batches, encode_batch, new_batch
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient, ServeFactory, ServeProcess

Connect = Callable[[str], RawClient]
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
UNSUPPORTED_VERSION = 35
#: ApiVersions v3 with a client software name and version: Kafka refuses v3+ without them.
API_VERSIONS_V3 = messages.ApiVersionsRequest(
    client_software_name="coordkit-tests", client_software_version="1.0"
)

Metadata = messages.MetadataRequest
Produce = messages.ProduceRequest
Fetch = messages.FetchRequest


def _metadata(client: RawClient, *topics: str, auto_create: bool = False) -> Any:
    request = Metadata(
        topics=[Metadata.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=auto_create,
    )
    return client.call(request, 12)


def _create_topic(server: ServeProcess, topic: str, partitions: int, factor: int) -> None:
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(topic, partitions, factor)])
    finally:
        admin.close()


def _produce(client: RawClient, topic: str, partition: int, *values: bytes) -> Any:
    records = encode_batch(new_batch([(b"k", v) for v in values]))
    data = Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=partition, records=records)]
    )
    response = client.call(Produce(acks=-1, timeout_ms=5_000, topic_data=[data]), 8)
    return response.responses[0].partition_responses[0]


def _fetch_request(topic: str, partition: int, offset: int, max_wait_ms: int) -> Any:
    fetch_partition = Fetch.FetchPartition(
        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    return Fetch(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[Fetch.FetchTopic(topic=topic, partitions=[fetch_partition])],
    )


def test_api_versions_advertises_what_is_served(serve: ServeFactory, raw_client: Connect) -> None:
    server = serve(brokers=1)
    response = raw_client(server.addresses[0]).call(API_VERSIONS_V3, 3)
    assert response.error_code == 0
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges == {
        18: (0, 5),  # ApiVersions
        3: (0, 13),  # Metadata
        0: (3, 13),  # Produce: record batches v2 .. topics by id
        1: (4, 18),  # Fetch: likewise
        2: (1, 11),  # ListOffsets
        23: (2, 4),  # OffsetForLeaderEpoch
        22: (0, 5),  # InitProducerId
        19: (2, 7),  # CreateTopics
        20: (1, 6),  # DeleteTopics: topics by name or id
        37: (0, 3),  # CreatePartitions
        10: (0, 5),  # FindCoordinator
        11: (0, 9),  # JoinGroup
        14: (0, 5),  # SyncGroup
        12: (0, 4),  # Heartbeat
        13: (0, 5),  # LeaveGroup
        8: (2, 10),  # OffsetCommit
        9: (1, 10),  # OffsetFetch
        15: (0, 6),  # DescribeGroups
        16: (0, 5),  # ListGroups
        68: (0, 1),  # ConsumerGroupHeartbeat
        69: (0, 1),  # ConsumerGroupDescribe
        32: (1, 4),  # DescribeConfigs
        33: (0, 2),  # AlterConfigs
        44: (0, 1),  # IncrementalAlterConfigs
        # ZooKeeper mode's controller requests and ControlledShutdown, as Kafka 3.9 serves them.
        4: (0, 7),  # LeaderAndIsr
        5: (0, 4),  # StopReplica
        6: (0, 8),  # UpdateMetadata
        7: (0, 3),  # ControlledShutdown
        56: (2, 3),  # AlterPartition: a Kafka 3.9 leader's ISR change to the controller
        67: (0, 0),  # AllocateProducerIds: a Kafka 3.9 broker's block of producer ids
        # The admin apis (issue 35 item 2), Kafka 4.4's versions.
        60: (0, 2),  # DescribeCluster
        35: (1, 5),  # DescribeLogDirs
        21: (0, 2),  # DeleteRecords
        43: (0, 2),  # ElectLeaders
        45: (0, 1),  # AlterPartitionReassignments
        46: (0, 0),  # ListPartitionReassignments
        61: (0, 0),  # DescribeProducers
        75: (0, 0),  # DescribeTopicPartitions
        42: (0, 3),  # DeleteGroups
        47: (0, 0),  # OffsetDelete
        # ACLs (issue 36 item 3), Kafka 4.4's versions.
        29: (1, 3),  # DescribeAcls
        30: (1, 3),  # CreateAcls
        31: (1, 3),  # DeleteAcls
        # Authentication and SCRAM users (issue 36 item 2), Kafka 4.4's versions.
        17: (0, 1),  # SaslHandshake
        36: (0, 2),  # SaslAuthenticate
        50: (0, 0),  # DescribeUserScramCredentials
        51: (0, 0),  # AlterUserScramCredentials
        # Transactions (issue 38): the classic protocol's versions (transaction version 1).
        24: (0, 5),  # AddPartitionsToTxn: v4-5 are Kafka 3.9's leaders' verification (KIP-890)
        25: (0, 4),  # AddOffsetsToTxn
        26: (0, 4),  # EndTxn: v5 is transaction version 2
        27: (1, 2),  # WriteTxnMarkers: a coordinator's markers to a partition leader
        28: (0, 4),  # TxnOffsetCommit
        65: (0, 0),  # DescribeTransactions
        66: (0, 2),  # ListTransactions
        # Client quotas and config resources (issue 35), Kafka 4.4's versions.
        48: (0, 1),  # DescribeClientQuotas
        49: (0, 1),  # AlterClientQuotas
        74: (0, 1),  # ListConfigResources
        # Share groups (issue 37): the versions Kafka 4.4's share consumers negotiate.
        76: (1, 1),  # ShareGroupHeartbeat
        77: (1, 1),  # ShareGroupDescribe
        78: (1, 2),  # ShareFetch
        79: (1, 2),  # ShareAcknowledge
        90: (0, 1),  # DescribeShareGroupOffsets
        91: (0, 0),  # AlterShareGroupOffsets
        92: (0, 0),  # DeleteShareGroupOffsets
    }


def test_an_unknown_api_versions_version_gets_a_v0_error(serve: ServeFactory) -> None:
    server = serve(brokers=1)
    host, port = server.addresses[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        # ApiVersions v9 (no such version), correlation id 42, then a client id: Kafka answers
        # in v0 with UNSUPPORTED_VERSION and its own ApiVersions range.
        body = struct.pack(">hhih", 18, 9, 42, 2) + b"me" + b"\x00\x00"
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read(sock, 4))[0]
        correlation, response = KafkaCodec().decode_response("ApiVersions", 0, _read(sock, size))
    assert correlation == 42
    assert response.error_code == UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 5)]


def _read(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">i", -5),  # a negative size
        struct.pack(">i", 200 * 1024 * 1024),  # over the 100 MiB frame limit
        struct.pack(">ihhi", 8, 3, 12, 1),  # Metadata v12 cut after the header's correlation id
        struct.pack(">ihhi", 8, 999, 0, 1),  # an api key Kafka does not have
        struct.pack(">ihhih", 10, 0, 0, 1, -1),  # Produce v0: a version not served
    ],
    ids=["negative-size", "too-large", "truncated", "unknown-api", "unserved-version"],
)
def test_a_malformed_frame_closes_only_its_connection(
    serve: ServeFactory, raw_client: Connect, frame: bytes
) -> None:
    server = serve(brokers=1)
    address = server.addresses[0]
    other = raw_client(address)
    assert other.call(API_VERSIONS_V3, 3).error_code == 0
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as bad:
        bad.sendall(frame)
        assert bad.recv(1024) == b""  # closed by the server, nothing answered
    # The connection opened before and a new one are both still served.
    assert other.call(API_VERSIONS_V3, 3).error_code == 0
    assert raw_client(address).call(messages.ApiVersionsRequest(), 2).error_code == 0


def test_metadata_of_an_unknown_topic(serve: ServeFactory, raw_client: Connect) -> None:
    server = serve(brokers=2)
    client = raw_client(server.addresses[0])
    response = _metadata(client, "nothing-here", auto_create=True)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("nothing-here", UNKNOWN_TOPIC_OR_PARTITION)
    ]
    assert sorted((b.node_id, f"{b.host}:{b.port}") for b in response.brokers) == sorted(
        server.addresses.items()
    )
    assert response.controller_id in server.addresses


def test_auto_creation_when_enabled(serve: ServeFactory, raw_client: Connect) -> None:
    server = serve("--auto-create-topics", brokers=1)
    client = raw_client(server.addresses[0])
    assert _metadata(client, "made", auto_create=False).topics[0].error_code == (
        UNKNOWN_TOPIC_OR_PARTITION
    )
    first = _metadata(client, "made", auto_create=True).topics[0]
    assert first.error_code == LEADER_NOT_AVAILABLE  # Kafka's answer while it elects leaders

    def elected() -> Any:
        topic = _metadata(client, "made").topics[0]
        led = topic.error_code == 0 and all(p.leader_id != -1 for p in topic.partitions)
        return topic if led else None

    topic = wait_for(elected, what="the auto-created topic's leader")
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes)
            for p in topic.partitions] == [(0, 0, [0], [0])]  # fmt: skip


def test_only_the_leader_serves_a_partition(serve: ServeFactory, raw_client: Connect) -> None:
    server = serve(brokers=3)
    _create_topic(server, "led", 3, 2)
    clients = {b: raw_client(a) for b, a in server.addresses.items()}
    topic = _metadata(clients[0], "led").topics[0]
    assert topic.error_code == 0
    for partition in topic.partitions:
        leader = partition.leader_id
        assert leader in partition.isr_nodes
        assert leader in partition.replica_nodes
        produced = _produce(clients[leader], "led", partition.partition_index, b"a", b"b")
        assert (produced.error_code, produced.base_offset) == (0, 0)
        for other in set(server.addresses) - {leader}:
            refused = _produce(clients[other], "led", partition.partition_index, b"c")
            assert refused.error_code == NOT_LEADER_OR_FOLLOWER
            fetched = clients[other].call(
                _fetch_request("led", partition.partition_index, 0, 0), 12
            )
            refusal = fetched.responses[0].partitions[0]
            assert refusal.error_code == NOT_LEADER_OR_FOLLOWER
            # As Kafka: the current leader is named from Fetch v16 on (KIP-951), not in v12.
            assert refusal.current_leader.leader_id == -1
        again = _produce(clients[leader], "led", partition.partition_index, b"d")
        assert again.base_offset == 2
        answer = clients[leader].call(_fetch_request("led", partition.partition_index, 1, 0), 12)
        data = answer.responses[0].partitions[0]
        assert data.high_watermark == 3
        values = [(r.offset, r.value) for b in decode_batches(data.records) for r in b.records]
        # Whole batches come back: the first one holds offset 0 as well.
        assert values == [(0, b"a"), (1, b"b"), (2, b"d")]


def test_a_waiting_fetch_is_answered_by_a_produce(serve: ServeFactory, raw_client: Connect) -> None:
    server = serve(brokers=1)
    _create_topic(server, "polled", 1, 1)
    waiting = raw_client(server.addresses[0])
    producing = raw_client(server.addresses[0])
    # At the log end with min_bytes 1: the fetch waits (up to a minute) for records.
    correlation = waiting.send(_fetch_request("polled", 0, 0, 60_000), 12)
    answered: list[Any] = []
    reader = threading.Thread(target=lambda: answered.append(waiting.receive("Fetch", 12)))
    reader.start()
    # Another connection is served while that fetch waits, and its produce wakes the fetch.
    assert _produce(producing, "polled", 0, b"woken").error_code == 0
    reader.join(timeout=60)
    assert answered, "the waiting fetch was not answered"
    got_correlation, response = answered[0]
    assert got_correlation == correlation
    records = decode_batches(response.responses[0].partitions[0].records)
    assert [r.value for b in records for r in b.records] == [b"woken"]
