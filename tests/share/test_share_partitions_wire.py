"""ShareFetch and ShareAcknowledge answered by ``coordkit serve`` (in this process, on the
``--backend`` store), driven by raw requests: share sessions and their epochs, acquisition of
whole batches, acknowledgements stored before they are answered, locks that expire, the
delivery-count limit, a member's records released when its session closes, and a new leader
resuming from the store."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from coordkit.protocol import messages
from coordkit.serve import errors
from coordkit.serve.apis.share.partition_apis import share_partitions
from coordkit.serve.broker_config import parse_broker_configs
from coordkit.serve.classes import nested
from coordkit.serve.dataplane.share.persister import StorePersister
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401

TOPIC = "jobs"
GROUP = "workers"
FetchRequest = messages.ShareFetchRequest
FetchTopic = nested(FetchRequest, "FetchTopic")
FetchPartition = nested(FetchRequest, "FetchPartition")
FetchAck = nested(FetchRequest, "AcknowledgementBatch")
AckRequest = messages.ShareAcknowledgeRequest
AckTopic = nested(AckRequest, "AcknowledgeTopic")
AckPartition = nested(AckRequest, "AcknowledgePartition")
AckBatch = nested(AckRequest, "AcknowledgementBatch")
ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest.fixture(name="server")
def server_fixture(in_process: InProcessFactory) -> InProcessServer:
    settings = parse_broker_configs(
        ["group.share.record.lock.duration.ms=1000", "group.share.min.record.lock.duration.ms=1000",
         "group.share.delivery.count.limit=3"]
    ).serve_settings()  # fmt: skip
    served = in_process(brokers=1, settings=settings)
    admin = KafkaAdminClient(bootstrap_servers=served.bootstrap, request_timeout_ms=30_000)
    admin.create_topics([NewTopic(TOPIC, 1, 1)])
    admin.close()
    return served


def produce(server: InProcessServer, count: int, batch: int) -> None:
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=50,
                             batch_size=1_000_000)  # fmt: skip
    for start in range(0, count, batch):
        for i in range(start, min(start + batch, count)):
            producer.send(TOPIC, value=b"r%d" % i, partition=0)
        producer.flush(timeout=30)
    producer.close(timeout=30)


def topic_id(server: InProcessServer) -> uuid.UUID:
    ctx = server.context(0)
    ctx.topic_ids.refresh(ctx.broker.store)
    return ctx.topic_ids.id_of(TOPIC)


class Member:
    """One share-group member's raw requests, keeping its session epoch."""

    def __init__(
        self, server: InProcessServer, tid: uuid.UUID, member_id: str, broker: int = 0
    ) -> None:
        self.client = RawClient(server.address(broker))
        self.tid = tid
        self.member_id = member_id
        self.epoch = 0

    def fetch(self, acks: list[tuple[int, int, list[int]]] = (), *, version: int = 1,  # type: ignore[assignment]
              max_records: int = 500, wait_ms: int = 2_000, epoch: int | None = None) -> Any:  # fmt: skip
        partition = FetchPartition(
            partition_index=0,
            acknowledgement_batches=[FetchAck(first_offset=f, last_offset=last,
                                              acknowledge_types=t) for f, last, t in acks],
        )  # fmt: skip
        body = FetchRequest(
            group_id=GROUP, member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch, max_wait_ms=wait_ms,
            min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=500,
            topics=[FetchTopic(topic_id=self.tid, partitions=[partition])],
            forgotten_topics_data=[],
        )  # fmt: skip
        response = self.client.call(body, version)
        if response.error_code == errors.NONE and epoch is None:
            self.epoch += 1
        return response

    def acknowledge(self, acks: list[tuple[int, int, list[int]]], *, final: bool = False) -> Any:
        body = AckRequest(
            group_id=GROUP, member_id=self.member_id,
            share_session_epoch=-1 if final else self.epoch,
            topics=[AckTopic(topic_id=self.tid, partitions=[AckPartition(
                partition_index=0,
                acknowledgement_batches=[AckBatch(first_offset=f, last_offset=last,
                                                  acknowledge_types=t) for f, last, t in acks],
            )])],
        )  # fmt: skip
        response = self.client.call(body, 1)
        if response.error_code == errors.NONE:
            self.epoch += 1
        return response


def acquired(response: Any) -> list[tuple[int, int, int]]:
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in response.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def partition_of(response: Any) -> Any:
    (topic,) = response.responses
    (partition,) = topic.partitions
    return partition


def test_share_sessions_refuse_wrong_epochs(server: InProcessServer) -> None:
    member = Member(server, topic_id(server), "m-sessions")
    assert member.fetch(epoch=3).error_code == errors.SHARE_SESSION_NOT_FOUND
    assert member.fetch(epoch=-1, acks=[(0, 0, [ACCEPT])]).error_code == (
        errors.SHARE_SESSION_NOT_FOUND
    )
    assert member.fetch(acks=[(0, 0, [ACCEPT])]).error_code == errors.INVALID_REQUEST
    opened = member.fetch(wait_ms=0)
    assert opened.error_code == errors.NONE
    # The session is open: the first answer lists the partition, empty.
    assert partition_of(opened).error_code == errors.NONE
    assert acquired(opened) == []
    # A later answer with nothing to say lists nothing.
    assert member.fetch(wait_ms=0).responses == []
    assert member.fetch(epoch=5, wait_ms=0).error_code == errors.INVALID_SHARE_SESSION_EPOCH
    assert member.acknowledge([], final=False).error_code == errors.NONE
    zero = AckRequest(group_id=GROUP, member_id=member.member_id, share_session_epoch=0, topics=[])
    assert member.client.call(zero, 1).error_code == errors.INVALID_SHARE_SESSION_EPOCH


def test_records_are_shared_acknowledged_once_and_the_start_offset_moves(
    server: InProcessServer, backend: Any
) -> None:
    tid = topic_id(server)
    one, two = Member(server, tid, "m-one"), Member(server, tid, "m-two")
    assert one.fetch(wait_ms=0).error_code == errors.NONE  # latest: the start is offset 0
    assert two.fetch(wait_ms=0).error_code == errors.NONE
    produce(server, 20, batch=10)
    first = one.fetch(max_records=5)
    assert acquired(first) == [(0, 9, 1)]  # a whole batch, although over 5
    assert first.acquisition_lock_timeout_ms == 1000
    assert partition_of(first).records  # the batch's bytes
    second = two.fetch(max_records=5)
    assert acquired(second) == [(10, 19, 1)]
    # The second member may not acknowledge the first's records: nothing changes.
    refused = two.acknowledge([(0, 0, [ACCEPT])])
    assert partition_of(refused).error_code == errors.INVALID_RECORD_STATE
    answer = one.fetch(acks=[(0, 9, [ACCEPT] * 8 + [RELEASE, REJECT])], wait_ms=0)
    assert partition_of(answer).acknowledge_error_code == errors.NONE
    # 8 was released: not to the fetch of the same request (as Kafka 4.4), to the next one,
    # delivered a second time.
    assert acquired(answer) == []
    assert acquired(two.fetch(acks=[(10, 19, [ACCEPT])], wait_ms=0)) == [(8, 8, 2)]
    found = server.on_loop(
        lambda: StorePersister(server.context(0).broker.store).read(GROUP, tid, 0)
    )
    assert found is not None
    assert found[0].start_offset == 8


def test_an_expired_lock_redelivers_and_the_limit_archives(server: InProcessServer) -> None:
    tid = topic_id(server)
    one, two = Member(server, tid, "m-gone"), Member(server, tid, "m-left")
    one.fetch(wait_ms=0)
    two.fetch(wait_ms=0)
    produce(server, 1, batch=1)
    assert acquired(one.fetch()) == [(0, 0, 1)]
    # The lock (1 s) expires: the other member's waiting fetch gets the record.
    started = time.monotonic()
    assert acquired(two.fetch(wait_ms=5_000)) == [(0, 0, 2)]
    assert time.monotonic() - started >= 0.5
    two.acknowledge([(0, 0, [RELEASE])])
    # Its third delivery; released again it is archived (group.share.delivery.count.limit=3).
    assert acquired(one.fetch(wait_ms=0)) == [(0, 0, 3)]
    one.acknowledge([(0, 0, [RELEASE])])
    assert acquired(two.fetch(wait_ms=300)) == []


def test_a_closed_session_releases_its_member_s_records(server: InProcessServer) -> None:
    tid = topic_id(server)
    one, two = Member(server, tid, "m-closing"), Member(server, tid, "m-staying")
    one.fetch(wait_ms=0)
    two.fetch(wait_ms=0)
    produce(server, 6, batch=3)
    assert acquired(one.fetch(max_records=1)) == [(0, 2, 1)]
    closed = one.acknowledge([(0, 0, [ACCEPT])], final=True)
    assert closed.error_code == errors.NONE
    # Released at once, not after the lock: 1..2 again, then the next batch.
    assert acquired(two.fetch(wait_ms=0)) == [(1, 2, 2), (3, 5, 1)]
    assert one.fetch(epoch=2, wait_ms=0).error_code == errors.SHARE_SESSION_NOT_FOUND


def test_a_new_leader_resumes_from_the_store(server: InProcessServer) -> None:
    tid = topic_id(server)
    one = Member(server, tid, "m-before")
    one.fetch(wait_ms=0)
    produce(server, 4, batch=4)
    assert acquired(one.fetch()) == [(0, 3, 1)]
    one.acknowledge([(0, 1, [ACCEPT])])
    # The broker's share state is dropped (as a new leader starts with none): what it persisted
    # is all a new one has; 2..3 were acquired and not acknowledged.
    manager = share_partitions(server.context(0))
    server.on_loop(lambda: [manager.drop(k) for k in manager.share_keys()])
    after = Member(server, tid, "m-after")
    # The fetch opening the session acquires already.
    assert acquired(after.fetch(wait_ms=0)) == [(2, 3, 1)]
