"""Scenarios of the share-partition leader (KIP-932): ShareFetch v2 and ShareAcknowledge v2 —
share sessions and their epochs, records acquired and acknowledged, the answers to bad
acknowledgements — and the share-group offset admin apis (DescribeShareGroupOffsets v1,
AlterShareGroupOffsets and DeleteShareGroupOffsets v0). Marker ``share``: they run in
py311-share, not in the default run.

A member joins with ShareGroupHeartbeat and settles first (``share_groups.settle``: Kafka
initializes a share partition's state once the group coordinator assigned it), then opens its
share session; the records are produced after that, so that both sides' share partitions start
at the same offset whatever ``share.auto.offset.reset`` makes of the log. Topic ids are
normalised; member ids are the clients' own (the same on both sides); records are decoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coordkit.protocol import messages
from coordkit.serve.classes import nested
from differential import requests as rq
from differential.harness import Connection, Side, scenario
from differential.scenarios import configs
from differential.scenarios import transactions as txn
from differential.scenarios.consumer_groups import client_member_id, create_topics
from differential.scenarios.share_groups import SHARE, ShareMember, settle

SHARE_FETCH = 2
SHARE_ACKNOWLEDGE = 2
FETCH = {**SHARE, "ShareFetch": SHARE_FETCH, "ShareAcknowledge": SHARE_ACKNOWLEDGE}
OFFSETS = {**FETCH, "DescribeShareGroupOffsets": 1, "AlterShareGroupOffsets": 0,
           "DeleteShareGroupOffsets": 0}  # fmt: skip
ACCEPT, RELEASE, REJECT = 1, 2, 3

FetchRequest = messages.ShareFetchRequest
FetchTopic = nested(FetchRequest, "FetchTopic")
FetchPartition = nested(FetchRequest, "FetchPartition")
FetchAck = nested(FetchRequest, "AcknowledgementBatch")
AckRequest = messages.ShareAcknowledgeRequest
AckTopic = nested(AckRequest, "AcknowledgeTopic")
AckPartition = nested(AckRequest, "AcknowledgePartition")
AckBatch = nested(AckRequest, "AcknowledgementBatch")
Acks = Sequence[tuple[int, int, Sequence[int]]]


class ShareSession:
    """One member's share session with the leader of partition 0 of ``topic``."""

    def __init__(self, side: Side, group: str, topic: str, name: str) -> None:
        self.side = side
        self.group = group
        self.member_id = client_member_id(side, group, name)
        self.topic_id = side.topic_id(topic)
        self.connection: Connection = side.connect(side.leader(topic, 0))
        self.epoch = 0

    def fetch(self, acks: Acks = (), *, wait_ms: int = 3_000, max_records: int = 500,
              epoch: int | None = None) -> dict[str, Any]:  # fmt: skip
        partition = FetchPartition(partition_index=0, acknowledgement_batches=[
            FetchAck(first_offset=f, last_offset=last, acknowledge_types=list(t))
            for f, last, t in acks])  # fmt: skip
        request = FetchRequest(
            group_id=self.group, member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch, max_wait_ms=wait_ms,
            min_bytes=1, max_bytes=1 << 20, max_records=max_records, batch_size=max_records,
            topics=[FetchTopic(topic_id=self.topic_id, partitions=[partition])],
            forgotten_topics_data=[],
        )  # fmt: skip
        answer = self.connection.call(request, SHARE_FETCH)
        if answer.error_code == 0 and epoch is None:
            self.epoch += 1
        return fetched(answer)

    def acknowledge(self, acks: Acks, *, epoch: int | None = None) -> Any:
        request = AckRequest(
            group_id=self.group, member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch,
            topics=[AckTopic(topic_id=self.topic_id, partitions=[AckPartition(
                partition_index=0, acknowledgement_batches=[
                    AckBatch(first_offset=f, last_offset=last, acknowledge_types=list(t))
                    for f, last, t in acks])])],
        )  # fmt: skip
        answer = self.connection.call(request, SHARE_ACKNOWLEDGE)
        if answer.error_code == 0 and epoch is None:
            self.epoch += 1
        return answer


def fetched(answer: Any) -> dict[str, Any]:
    """A ShareFetch answer as the comparison sees it: the records only as the offsets of the
    batches returned (their bytes hold each side's leader epoch and CRC)."""
    return {
        "error_code": answer.error_code,
        "acquisition_lock_timeout_ms": answer.acquisition_lock_timeout_ms,
        "partitions": [
            {
                "partition": p.partition_index,
                "error_code": p.error_code,
                "acknowledge_error_code": p.acknowledge_error_code,
                "acquired": [(a.first_offset, a.last_offset, a.delivery_count)
                             for a in p.acquired_records],
                "records": bool(p.records),
            }
            for t in answer.responses
            for p in t.partitions
        ],
    }  # fmt: skip


def joined(side: Side, topic: str, partitions: int = 1, name: str = "a") -> ShareMember:
    """A settled member of the scenario's group subscribed to ``topic``."""
    create_topics(side, side.group(), {topic: partitions})
    member = ShareMember(side, side.group(), [topic], name)
    member.join()
    settle([member], partitions)
    return member


def produce(side: Side, topic: str, *counts: int) -> None:
    for count in counts:
        side.produce(topic, 0, rq.batch(count))


@scenario("share_fetch.sessions", versions=FETCH)
def sessions(side: Side) -> list[Any]:
    """Share sessions: a request of epoch 3 without a session (SHARE_SESSION_NOT_FOUND); an
    opening fetch carrying acknowledgements (INVALID_REQUEST); the opening fetch (its error
    code only: whether Kafka lists the partition depends on whether its leader has read the
    share partition's state yet); a later fetch with nothing (no partition listed); a wrong
    epoch (INVALID_SHARE_SESSION_EPOCH); ShareAcknowledge of epoch 0
    (INVALID_SHARE_SESSION_EPOCH); a final ShareFetch, then the session is gone."""
    topic = side.topic()
    joined(side, topic)
    session = ShareSession(side, side.group(), topic, "a")
    return [
        session.fetch(epoch=3, wait_ms=0),
        session.fetch([(0, 0, [ACCEPT])], epoch=0, wait_ms=0),
        session.fetch(wait_ms=0)["error_code"],
        session.fetch(wait_ms=500),
        session.fetch(epoch=7, wait_ms=0),
        session.acknowledge([], epoch=0).error_code,
        session.fetch(epoch=-1, wait_ms=0),
        session.fetch(epoch=2, wait_ms=0),
    ]


@scenario("share_fetch.acquire_and_acknowledge", versions=FETCH)
def acquire_and_acknowledge(side: Side) -> list[Any]:
    """Two batches (offsets 0-4, 5-9) acquired by one member's fetch; another member's
    acknowledgement of its records (INVALID_RECORD_STATE), an offset past the end
    (INVALID_REQUEST), overlapping batches (INVALID_RECORD_STATE), an unknown type
    (INVALID_REQUEST); then accept 0-6, release 7, reject 8, accept 9 (the next fetch of the
    same request gets 7 again, delivered twice); acknowledging settled offsets again; the
    member's final ShareAcknowledge releases 7, which the other member gets a third time."""
    topic = side.topic()
    joined(side, topic)
    group = side.group()
    a, b = ShareSession(side, group, topic, "a"), ShareSession(side, group, topic, "b")
    # The opening answers' error codes only (see share_fetch.sessions).
    trace: list[Any] = [a.fetch(wait_ms=0)["error_code"], b.fetch(wait_ms=0)["error_code"]]
    produce(side, topic, 5, 5)
    trace.append(a.fetch(max_records=10))
    trace.append(b.fetch([(0, 0, [ACCEPT])], wait_ms=0))
    trace.append(a.fetch([(8, 12, [ACCEPT])], wait_ms=0))
    trace.append(a.fetch([(0, 1, [ACCEPT]), (1, 2, [ACCEPT])], wait_ms=0))
    trace.append(a.fetch([(0, 0, [7])], wait_ms=0))
    trace.append(a.fetch([(0, 9, [ACCEPT] * 7 + [RELEASE, REJECT, ACCEPT])], wait_ms=0))
    trace.append(a.fetch([(0, 3, [ACCEPT])], wait_ms=0))
    final = a.acknowledge([], epoch=-1)
    trace.append([(p.partition_index, p.error_code) for t in final.responses for p in t.partitions])
    trace.append(b.fetch(wait_ms=3_000))
    return trace


def describe_offsets(side: Side, group: str, topics: dict[str, list[int]] | None) -> Any:
    DescribeRequest = messages.DescribeShareGroupOffsetsRequest
    Group = nested(DescribeRequest, "DescribeShareGroupOffsetsRequestGroup")
    Topic = nested(DescribeRequest, "DescribeShareGroupOffsetsRequestTopic")
    asked = None if topics is None else [Topic(topic_name=n, partitions=p)
                                         for n, p in topics.items()]  # fmt: skip
    return side.call(side.coordinator(group),
                     DescribeRequest(groups=[Group(group_id=group, topics=asked)]), 1)  # fmt: skip


@scenario("share_fetch.offsets", versions=OFFSETS)
def offsets(side: Side) -> list[Any]:
    """The offset admin apis: Describe of a partition without state and of an unknown topic
    (start offset -1, lag -1); after 0-3 accepted of ten, the start offset and the lag; Alter
    and Delete of a group with a member (NON_EMPTY_GROUP); the member leaves; Alter to offset 8
    and an unknown topic; Describe (lag 2); Delete, with an unknown topic; Describe again; Delete
    of a group that does not exist (GROUP_ID_NOT_FOUND)."""
    topic = side.topic()
    member = joined(side, topic)
    group = side.group()
    trace: list[Any] = [describe_offsets(side, group, {topic: [0], side.topic("none"): [0]})]
    session = ShareSession(side, group, topic, "a")
    session.fetch(wait_ms=0)
    produce(side, topic, 10)
    trace.append(session.fetch(max_records=10))
    session.acknowledge([(0, 3, [ACCEPT])])
    trace.append(describe_offsets(side, group, None))
    AlterRequest = messages.AlterShareGroupOffsetsRequest
    AlterTopic = nested(AlterRequest, "AlterShareGroupOffsetsRequestTopic")
    AlterPartition = nested(AlterRequest, "AlterShareGroupOffsetsRequestPartition")
    DeleteRequest = messages.DeleteShareGroupOffsetsRequest
    DeleteTopic = nested(DeleteRequest, "DeleteShareGroupOffsetsRequestTopic")
    coordinator = side.coordinator(group)

    def alter(targets: dict[str, int]) -> Any:
        return side.call(coordinator, AlterRequest(group_id=group, topics=[
            AlterTopic(topic_name=n, partitions=[AlterPartition(partition_index=0, start_offset=o)])
            for n, o in targets.items()]), 0)  # fmt: skip

    def delete(names: list[str], who: str = group) -> Any:
        return side.call(side.coordinator(who), DeleteRequest(
            group_id=who, topics=[DeleteTopic(topic_name=n) for n in names]), 0)  # fmt: skip

    trace += [alter({topic: 8}), delete([topic])]
    session.acknowledge([], epoch=-1)
    member.leave()
    trace += [alter({topic: 8, side.topic("none"): 1}), describe_offsets(side, group, None)]
    trace += [delete([topic, side.topic("none")]), describe_offsets(side, group, None)]
    trace.append(describe_offsets(side, group, {topic: [0]}))
    unknown = side.group("never")
    trace.append(delete([topic], unknown))
    return trace


@scenario("share_fetch.read_committed",
          versions={**FETCH, **txn.RECORDS, "IncrementalAlterConfigs": configs.INCREMENTAL})  # fmt: skip
def read_committed(side: Side) -> list[Any]:
    """A group of ``share.isolation.level=read_committed`` (IncrementalAlterConfigs): an aborted
    transaction (0-1, its marker 2), a committed one (3-5, marker 6), a record without one (7)
    and an open transaction (8-9): a fetch acquires up to the last stable offset (8), the
    aborted records archived and left out (2-7 acquired, the markers among them); once the open
    transaction commits (marker 10), the next fetch (accepting 2-7) acquires 8-10."""
    topic = side.topic()
    group = side.group()
    configs.incremental(side, configs.GROUP, group,
                        [("share.isolation.level", 0, "read_committed")])  # fmt: skip
    joined(side, topic)
    session = ShareSession(side, group, topic, "a")
    trace: list[Any] = [session.fetch(wait_ms=0)["error_code"]]
    transactional_id = side.group("txn")
    at, answer = txn.ready(side, transactional_id)
    producer = (answer.producer_id, answer.producer_epoch)
    sequence = 0
    for count, commit in ((2, False), (3, True)):
        txn.add_partitions(side, at, transactional_id, producer, {topic: [0]})
        txn.produce_txn(side, topic, transactional_id, producer, sequence, count)
        sequence += count
        trace.append(txn.end_txn(side, at, transactional_id, producer, commit))
        trace.append(txn.completed(side, at, transactional_id,
                                   "CompleteCommit" if commit else "CompleteAbort"))  # fmt: skip
    produce(side, topic, 1)
    txn.add_partitions(side, at, transactional_id, producer, {topic: [0]})
    txn.produce_txn(side, topic, transactional_id, producer, sequence, 2)
    trace.append(txn.stable_at(side, topic, 8))
    trace.append(session.fetch(wait_ms=3_000))
    trace.append(txn.end_txn(side, at, transactional_id, producer, True))
    trace.append(txn.stable_at(side, topic, 11))
    trace.append(session.fetch([(2, 7, [ACCEPT])], wait_ms=3_000))
    return trace
