"""The share-group offset admin apis answered by ``coordkit serve`` (in this process, on the
``--backend`` store), driven by raw requests: DescribeShareGroupOffsets from the stored
share-partition states (start offset, leader epoch, lag), AlterShareGroupOffsets starting a
partition afresh — which its leader reads again when a member opens a share session — and
DeleteShareGroupOffsets, each answered as Kafka 4.4 answers them."""

from __future__ import annotations

from typing import Any

from coordkit.protocol import messages
from coordkit.serve import errors
from coordkit.serve.classes import nested
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401
from share.test_share_partitions_wire import (
    ACCEPT,
    GROUP,
    TOPIC,
    Member,
    acquired,
    produce,
    server_fixture,  # noqa: F401 - the fixture "server"
    topic_id,
)

DescribeRequest = messages.DescribeShareGroupOffsetsRequest
DescribeGroup = nested(DescribeRequest, "DescribeShareGroupOffsetsRequestGroup")
DescribeTopic = nested(DescribeRequest, "DescribeShareGroupOffsetsRequestTopic")
AlterRequest = messages.AlterShareGroupOffsetsRequest
AlterTopic = nested(AlterRequest, "AlterShareGroupOffsetsRequestTopic")
AlterPartition = nested(AlterRequest, "AlterShareGroupOffsetsRequestPartition")
DeleteRequest = messages.DeleteShareGroupOffsetsRequest
DeleteTopic = nested(DeleteRequest, "DeleteShareGroupOffsetsRequestTopic")


def find_coordinator(client: RawClient, group: str) -> None:
    """FindCoordinator until it answers (the first one creates ``__consumer_offsets``)."""
    request = messages.FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
    wait_for(lambda: client.call(request, 4).coordinators[0].error_code == errors.NONE,
             timeout=30, what=f"a coordinator for {group}")  # fmt: skip


def describe(client: RawClient, group: str, topics: dict[str, list[int]] | None) -> list[Any]:
    asked = None if topics is None else [
        DescribeTopic(topic_name=n, partitions=p) for n, p in topics.items()]  # fmt: skip
    response = client.call(DescribeRequest(groups=[DescribeGroup(group_id=group, topics=asked)]), 1)
    (answer,) = response.groups
    assert answer.error_code == errors.NONE
    return [
        (t.topic_name, p.partition_index, p.start_offset, p.lag, p.error_code)
        for t in answer.topics
        for p in t.partitions
    ]


def test_describe_alter_and_delete(server: InProcessServer) -> None:
    tid = topic_id(server)
    client = RawClient(server.address(0))
    find_coordinator(client, GROUP)
    find_coordinator(client, "no-such-group")
    # No state yet: start offset and lag -1 (an unknown topic too); no topics named: none.
    assert describe(client, GROUP, {TOPIC: [0], "nosuch": [0]}) == [
        (TOPIC, 0, -1, -1, 0), ("nosuch", 0, -1, -1, 0)]  # fmt: skip
    assert describe(client, GROUP, None) == []
    member = Member(server, tid, "m-offsets")
    member.fetch(wait_ms=0)
    produce(server, 10, batch=5)
    assert acquired(member.fetch(max_records=1)) == [(0, 4, 1)]
    member.acknowledge([(0, 2, [ACCEPT]), (4, 4, [ACCEPT])])
    # Written with the start offset from before the acknowledgement (as Kafka 4.4 writes it):
    # start 0, four records after it settled: lag 10 - 0 - 4.
    assert describe(client, GROUP, None) == [(TOPIC, 0, 0, 6, 0)]
    member.acknowledge([(3, 3, [2])], final=True)  # released; the member's session closed

    alter = AlterRequest(group_id=GROUP, topics=[
        AlterTopic(topic_name=TOPIC, partitions=[AlterPartition(partition_index=0, start_offset=8),
                                                 AlterPartition(partition_index=3, start_offset=0)]),
        AlterTopic(topic_name="nosuch", partitions=[AlterPartition(partition_index=0,
                                                                   start_offset=1)]),
    ])  # fmt: skip
    answer = client.call(alter, 0)
    assert answer.error_code == errors.NONE
    assert [(t.topic_name, p.partition_index, p.error_code) for t in answer.responses
            for p in t.partitions] == [
        ("nosuch", 0, errors.UNKNOWN_TOPIC_OR_PARTITION), (TOPIC, 0, 0),
        (TOPIC, 3, errors.UNKNOWN_TOPIC_OR_PARTITION)]  # fmt: skip
    assert describe(client, GROUP, None) == [(TOPIC, 0, 8, 2, 0)]
    # The leader held the old state in memory: a new session reads the altered one.
    again = Member(server, tid, "m-after-reset")
    assert acquired(again.fetch()) == [(8, 9, 1)]

    gone = client.call(DeleteRequest(group_id="no-such-group",
                                     topics=[DeleteTopic(topic_name=TOPIC)]), 0)  # fmt: skip
    assert gone.error_code == errors.GROUP_ID_NOT_FOUND
