"""Scenarios of offsets committed inside a transaction (issue 38, family ``transactions``): what
the group's coordinator answers an OffsetFetch with ``require_stable`` while a transaction's
offsets are pending (Kafka's ``OffsetMetadataManager.fetchOffsets``: UNSTABLE_OFFSET_COMMIT for
each partition with a pending offset, the committed offsets without ``require_stable``), before
and after EndTxn commit and abort; and TxnOffsetCommit v3+'s checks of the committing member
(``validateTransactionalOffsetCommit``: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID).

The markers are written after EndTxn is answered: a scenario waits for the offsets to settle
(the pending ones stored or dropped) before it compares them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coordkit.protocol import messages
from coordkit.testing.waiting import wait_for
from differential import requests as rq
from differential.harness import WAIT_SECONDS, Side, scenario
from differential.scenarios.admin import DELETE_GROUPS, OFFSET_DELETE
from differential.scenarios.consumer_groups import Member as ConsumerMember
from differential.scenarios.groups import stable_member
from differential.scenarios.transactions import (
    ADD_OFFSETS,
    DESCRIBE_TRANSACTIONS,
    TXN,
    TXN_OFFSET_COMMIT,
    begun,
    completed,
    end_txn,
)

UNSTABLE_OFFSET_COMMIT = 88
OFFSETS = {
    **TXN,
    "AddOffsetsToTxn": ADD_OFFSETS,
    "TxnOffsetCommit": TXN_OFFSET_COMMIT,
    "OffsetCommit": rq.OFFSET_COMMIT,
    "OffsetFetch": rq.OFFSET_FETCH,
    "DescribeTransactions": DESCRIBE_TRANSACTIONS,
}


def add_offsets(side: Side, at: int, transactional_id: str, producer: tuple[int, int],
                group: str) -> int:  # fmt: skip
    Request: Any = messages.AddOffsetsToTxnRequest
    request = Request(transactional_id=transactional_id, producer_id=producer[0],
                      producer_epoch=producer[1], group_id=group)  # fmt: skip
    return int(side.call(at, request, ADD_OFFSETS).error_code)


def txn_offset_commit(
    side: Side,
    transactional_id: str,
    producer: tuple[int, int],
    group: str,
    offsets: Mapping[tuple[str, int], int],
    *,
    member: tuple[str, int] = ("", -1),
    instance_id: str | None = None,
) -> list[Any]:
    """TxnOffsetCommit at the group's coordinator: (topic, partition, code) of each offset."""
    Request: Any = messages.TxnOffsetCommitRequest
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(Request.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata="m"))  # fmt: skip
    request = Request(
        transactional_id=transactional_id, group_id=group, producer_id=producer[0],
        producer_epoch=producer[1], member_id=member[0], generation_id_or_member_epoch=member[1],
        group_instance_id=instance_id,
        topics=[Request.TxnOffsetCommitRequestTopic(name=t, partitions=p)
                for t, p in topics.items()],
    )  # fmt: skip
    answer = side.call(side.coordinator(group), request, TXN_OFFSET_COMMIT)
    return sorted((t.name, p.partition_index, p.error_code) for t in answer.topics
                  for p in t.partitions)  # fmt: skip


def fetched(side: Side, group: str, topic: str, partitions: list[int] | None,
            *, stable: bool) -> list[Any]:  # fmt: skip
    """OffsetFetch v10 at the group's coordinator of ``partitions`` of ``topic`` (``None``:
    every partition of the group's): the group's error and (topic, partition, committed
    offset, code) of each partition answered."""
    asked = None if partitions is None else {topic: partitions}
    request = rq.offset_fetch({group: asked}, require_stable=stable, ids=side.topic_id)
    answer = side.call(side.coordinator(group), request, rq.OFFSET_FETCH).groups[0]
    names = {side.topic_id(topic): topic}
    return [answer.error_code, sorted(
        (names.get(t.topic_id, "another topic"), p.partition_index, p.committed_offset,
         p.error_code)
        for t in answer.topics for p in t.partitions)]  # fmt: skip


@scenario("transactions.offset_fetch_require_stable", versions=OFFSETS)
def offset_fetch_require_stable(side: Side) -> list[Any]:
    """Partition 0 committed at 3, partition 1 at 2, then a transaction commits partition 0 at
    5: OffsetFetch with require_stable answers partition 0 UNSTABLE_OFFSET_COMMIT (no offset),
    partition 1 and 2 as committed (2, none), and so does a fetch of all the group's offsets
    (partition 0 UNSTABLE_OFFSET_COMMIT, partition 1); without require_stable partition 0 is
    3. EndTxn commit: require_stable reads 5 once the marker is written. A second transaction
    commits partition 0 at 9 and aborts: unstable, then 5 again."""
    _, transactional_id, at, producer = begun(side)
    topic = side.topic("in")
    side.create_topic(topic, partitions=3)
    group = side.group("stable")
    committed = side.call(side.coordinator(group),
                          rq.offset_commit(group, {(topic, 0): 3, (topic, 1): 2},
                                           ids=side.topic_id), rq.OFFSET_COMMIT)  # fmt: skip
    added = add_offsets(side, at, transactional_id, producer, group)
    first = txn_offset_commit(side, transactional_id, producer, group, {(topic, 0): 5})
    open_answers = [fetched(side, group, topic, [0, 1, 2], stable=True),
                    fetched(side, group, topic, None, stable=True),
                    fetched(side, group, topic, [0, 1, 2], stable=False)]  # fmt: skip
    ended = end_txn(side, at, transactional_id, producer, True)

    def settled(offset: int) -> Any:
        found = fetched(side, group, topic, [0, 1, 2], stable=True)
        return found if found[1][0][2:] == (offset, 0) else None

    after_commit = wait_for(lambda: settled(5), WAIT_SECONDS, f"{side.name}: offset 5 stable")
    done = completed(side, at, transactional_id, "CompleteCommit")
    again = add_offsets(side, at, transactional_id, producer, group)
    second = txn_offset_commit(side, transactional_id, producer, group, {(topic, 0): 9})
    pending = fetched(side, group, topic, [0, 1, 2], stable=True)
    aborted = end_txn(side, at, transactional_id, producer, False)
    settled_abort = completed(side, at, transactional_id, "CompleteAbort")
    after_abort = wait_for(lambda: settled(5), WAIT_SECONDS, f"{side.name}: offset 5 again")
    return [[t.error_code for t in committed.topics[0].partitions], added, first, open_answers,
            ended, after_commit, done, again, second, pending, aborted, settled_abort,
            after_abort, fetched(side, group, topic, [0, 1, 2], stable=False)]  # fmt: skip


@scenario("transactions.txn_offset_commit_members", versions={**OFFSETS, "JoinGroup": rq.JOIN_GROUP,
                                                               "SyncGroup": rq.SYNC_GROUP})  # fmt: skip
def txn_offset_commit_members(side: Side) -> list[Any]:
    """TxnOffsetCommit v4 to a classic group of one member (generation 1): the member at its
    generation, and a producer outside the group (no member, generation -1), are taken; the
    member at another generation or at -1 ILLEGAL_GENERATION; an unknown member
    UNKNOWN_MEMBER_ID. To a group of one static member: its instance id with another member id
    FENCED_INSTANCE_ID, an unknown instance id UNKNOWN_MEMBER_ID. To a group that does not
    exist: generation 1 ILLEGAL_GENERATION, -1 taken."""
    topic, transactional_id, at, producer = begun(side)
    dynamic, static, missing = side.group("dynamic"), side.group("static"), side.group("none")
    member = stable_member(side, dynamic)
    fixed = stable_member(side, static, instance_id="instance-1")
    added = [add_offsets(side, at, transactional_id, producer, g)
             for g in (dynamic, static, missing)]  # fmt: skip

    def commit(group: str, **options: Any) -> list[Any]:
        return txn_offset_commit(side, transactional_id, producer, group, {(topic, 0): 1},
                                 **options)  # fmt: skip

    answers = [
        commit(dynamic, member=(member.member_id, member.generation)),
        commit(dynamic),
        commit(dynamic, member=(member.member_id, member.generation + 1)),
        commit(dynamic, member=(member.member_id, -1)),
        commit(dynamic, member=("unknown-member", member.generation)),
        commit(static, member=(fixed.member_id, fixed.generation), instance_id="instance-1"),
        commit(static, member=("another-member", fixed.generation), instance_id="instance-1"),
        commit(static, member=(fixed.member_id, fixed.generation), instance_id="instance-2"),
        commit(missing, member=("", 1)),
        commit(missing),
    ]
    ended = end_txn(side, at, transactional_id, producer, False)
    return [added, answers, ended, completed(side, at, transactional_id, "CompleteAbort")]


@scenario("transactions.txn_offset_commit_verified", versions=OFFSETS)
def txn_offset_commit_verified(side: Side) -> list[Any]:
    """TxnOffsetCommit is verified with the transaction (KIP-890): a group whose offsets
    partition the transaction never added is TRANSACTION_ABORTABLE and nothing is held (a
    require_stable fetch finds the partition stable); once added, another epoch of the producer
    INVALID_PRODUCER_EPOCH, another producer id INVALID_PRODUCER_ID_MAPPING; the producer's own
    is taken."""
    topic, transactional_id, at, producer = begun(side)
    group = side.group("verified")

    def commit(producer: tuple[int, int]) -> list[Any]:
        return txn_offset_commit(side, transactional_id, producer, group, {(topic, 0): 1})

    not_added = commit(producer)
    held = fetched(side, group, topic, [0], stable=True)
    added = add_offsets(side, at, transactional_id, producer, group)
    answers = [commit((producer[0], producer[1] + 1)), commit((producer[0] + 1, producer[1])),
               commit(producer), fetched(side, group, topic, [0], stable=True)]  # fmt: skip
    ended = end_txn(side, at, transactional_id, producer, False)
    return [not_added, held, added, answers, ended,
            completed(side, at, transactional_id, "CompleteAbort")]  # fmt: skip


@scenario("transactions.plain_commit_after_txn_offset_commit", versions=OFFSETS)
def plain_commit_after_txn_offset_commit(side: Side) -> list[Any]:
    """A transaction commits partitions 0 and 1 (5, 6), then a plain OffsetCommit commits
    partition 0 (7): both stay unstable under require_stable until the marker; the
    transaction's commit keeps the plain commit of partition 0, the more recent, and makes 6
    partition 1's."""
    _, transactional_id, at, producer = begun(side)
    topic = side.topic("in")
    side.create_topic(topic, partitions=2)
    group = side.group("mixed")
    added = add_offsets(side, at, transactional_id, producer, group)
    held = txn_offset_commit(
        side, transactional_id, producer, group, {(topic, 0): 5, (topic, 1): 6}
    )
    plain = side.call(side.coordinator(group), rq.offset_commit(group, {(topic, 0): 7},
                                                                ids=side.topic_id),
                      rq.OFFSET_COMMIT)  # fmt: skip
    pending = fetched(side, group, topic, [0, 1], stable=True)
    ended = end_txn(side, at, transactional_id, producer, True)
    after = wait_for(lambda: (found := fetched(side, group, topic, [0, 1], stable=True))[1][1][3]
                     == 0 and found, WAIT_SECONDS, f"{side.name}: the offsets settled")  # fmt: skip
    return [added, held, [p.error_code for p in plain.topics[0].partitions], pending, ended,
            after, completed(side, at, transactional_id, "CompleteCommit")]  # fmt: skip


@scenario("transactions.deleted_offsets_take_pending_ones",
          versions={**OFFSETS, "OffsetDelete": OFFSET_DELETE, "DeleteGroups": DELETE_GROUPS})  # fmt: skip
def deleted_offsets_take_pending_ones(side: Side) -> list[Any]:
    """A group committed partitions 0 and 1 (3, 4); a transaction commits them at 5 and 6;
    OffsetDelete of partition 0 removes its pending offset too (require_stable finds it stable,
    without an offset) and the transaction's commit gives only partition 1 its offset. A second
    transaction commits partition 1 at 8 and DeleteGroups deletes the group: nothing is pending
    and its commit leaves the group without offsets."""
    _, transactional_id, at, producer = begun(side)
    topic = side.topic("in")
    side.create_topic(topic, partitions=2)
    group = side.group("deleted")
    coordinator = side.coordinator(group)
    side.call(coordinator, rq.offset_commit(group, {(topic, 0): 3, (topic, 1): 4},
                                            ids=side.topic_id), rq.OFFSET_COMMIT)  # fmt: skip
    first = [add_offsets(side, at, transactional_id, producer, group),
             txn_offset_commit(side, transactional_id, producer, group,
                               {(topic, 0): 5, (topic, 1): 6})]  # fmt: skip
    Delete: Any = messages.OffsetDeleteRequest
    deleted = side.call(coordinator, Delete(group_id=group, topics=[Delete.OffsetDeleteRequestTopic(
        name=topic, partitions=[Delete.OffsetDeleteRequestPartition(partition_index=0)])]),
        OFFSET_DELETE)  # fmt: skip
    after_delete = fetched(side, group, topic, [0, 1], stable=True)
    ended = end_txn(side, at, transactional_id, producer, True)

    def settled() -> Any:
        found = fetched(side, group, topic, [0, 1], stable=True)
        return found if all(p[3] == 0 for p in found[1]) else None

    committed = wait_for(settled, WAIT_SECONDS, f"{side.name}: the offsets settled")
    done = completed(side, at, transactional_id, "CompleteCommit")
    second = [
        add_offsets(side, at, transactional_id, producer, group),
        txn_offset_commit(side, transactional_id, producer, group, {(topic, 1): 8}),
    ]
    groups = side.call(coordinator, messages.DeleteGroupsRequest(groups_names=[group]),
                       DELETE_GROUPS)  # fmt: skip
    after_group = fetched(side, group, topic, [0, 1], stable=True)
    ended_again = end_txn(side, at, transactional_id, producer, True)
    done_again = completed(side, at, transactional_id, "CompleteCommit")
    return [first, deleted.error_code, [(t.name == topic, [(p.partition_index, p.error_code)
                                        for p in t.partitions]) for t in deleted.topics],
            after_delete, ended, committed, done, second,
            [(r.group_id == group, r.error_code) for r in groups.results], after_group,
            ended_again, done_again, fetched(side, group, topic, [0, 1], stable=False)]  # fmt: skip


@scenario("transactions.txn_offset_commit_consumer_group",
          versions={**OFFSETS, "ConsumerGroupHeartbeat": rq.CONSUMER_GROUP_HEARTBEAT})  # fmt: skip
def txn_offset_commit_consumer_group(side: Side) -> list[Any]:
    """TxnOffsetCommit v4 to a consumer group of the KIP-848 protocol with one member: the
    member at its epoch is taken; at an older or a newer epoch ILLEGAL_GENERATION; an unknown
    member UNKNOWN_MEMBER_ID; no member at epoch -1 (the group has a member) UNKNOWN_MEMBER_ID."""
    topic, transactional_id, at, producer = begun(side)
    group = side.group("modern")
    member = ConsumerMember(side, group, [topic])
    joined = member.join()["error_code"]
    added = add_offsets(side, at, transactional_id, producer, group)

    def commit(member_id: str, epoch: int) -> list[Any]:
        return txn_offset_commit(side, transactional_id, producer, group, {(topic, 0): 1},
                                 member=(member_id, epoch))  # fmt: skip

    answers = [commit(member.member_id, member.epoch),
               commit(member.member_id, member.epoch - 1),
               commit(member.member_id, member.epoch + 1),
               commit("unknown-member", member.epoch), commit("", -1)]  # fmt: skip
    ended = end_txn(side, at, transactional_id, producer, False)
    member.leave()
    return [joined, member.epoch, added, answers, ended,
            completed(side, at, transactional_id, "CompleteAbort")]  # fmt: skip
