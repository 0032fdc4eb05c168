"""Pending transactional offsets in the store (coordkit.serve.transactions.txn_offsets): what a
group coordinator taking an offsets partition over reads back, the fence of the partition's
state, and the node's checks of what the store hands back."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from coordkit.engine.groups.protocol import ErrorCode
from coordkit.errors import BadVersionError, LayoutError
from coordkit.kafka.model import TopicPartition
from coordkit.plugins import open_store
from coordkit.serve.transactions.txn_offsets import (
    PendingTxnOffsets,
    ProducerOffsets,
    decode,
    encode,
    node_path,
)
from coordkit.store import Check, MetadataStore
from coordkit.strategies.offsets import OffsetAndMetadata
from coordkit_offsets.offsets_topic import OffsetsTopicStorage

STATE = "/state/{}"
TP0, TP1 = TopicPartition("in", 0), TopicPartition("in", 1)


class Broker:
    """A group coordinator's part the pending offsets need: every group on partition 0,
    hosted at the version of ``/state/0`` it took it over at (``None``: not hosted)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.offset_storage = OffsetsTopicStorage(store, num_partitions=1)
        self.hosted: int | None = None
        self.pending = PendingTxnOffsets(self, lambda _: self.hosted, self.fenced_write)

    def partition_for(self, group_id: str) -> int:
        return 0

    def take_over(self) -> None:
        self.hosted = self.store.set(STATE.format(0), b"leader").version

    def fenced_write(
        self, partition: int, what: str, attempt: Callable[[Check], bool]
    ) -> ErrorCode:
        if self.hosted is None:
            return ErrorCode.NOT_COORDINATOR
        try:
            while not attempt(Check(STATE.format(partition), self.hosted)):
                pass
        except BadVersionError:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE


@pytest.fixture
def store() -> Iterator[MetadataStore]:
    opened = open_store("memory://")
    opened.create(STATE.format(0), b"", make_parents=True)
    yield opened
    opened.close()


def offset(value: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(value, "m", 1_700_000_000_000, 4)


def test_the_next_coordinator_reads_pending_offsets_back_and_commits_them(
    store: MetadataStore,
) -> None:
    first, second = Broker(store), Broker(store)
    first.take_over()
    assert first.pending.add(7, 0, "g", {TP0: offset(5)}) is ErrorCode.NONE
    assert first.pending.add(7, 0, "g", {TP1: offset(6)}) is ErrorCode.NONE
    assert first.pending.add(8, 2, "other", {TP0: offset(1)}) is ErrorCode.NONE
    assert first.pending.unstable("g") == {TP0, TP1}
    second.take_over()  # the partition moved: the first broker's writes are fenced now
    assert first.pending.add(7, 0, "g", {TP0: offset(9)}) is ErrorCode.NOT_COORDINATOR
    assert second.pending.unstable("g") == {TP0, TP1}
    assert decode(node_path(0, 8), store.get(node_path(0, 8))[0]).producer_epoch == 2
    assert second.pending.end(0, 7, commit=True) is ErrorCode.NONE
    assert second.offset_storage.fetch("g") == {TP0: offset(5), TP1: offset(6)}
    assert second.pending.unstable("g") == set()
    assert second.pending.end(0, 8, commit=False) is ErrorCode.NONE
    assert second.offset_storage.fetch("other") == {}
    assert store.children("/coordkit/txn_offsets/0") == []
    # a marker again (the coordinator retries): nothing pending, nothing changes
    assert second.pending.end(0, 7, commit=True) is ErrorCode.NONE


def test_a_broker_that_does_not_host_the_partition_holds_nothing(store: MetadataStore) -> None:
    broker = Broker(store)
    assert broker.pending.add(7, 0, "g", {TP0: offset(5)}) is ErrorCode.NOT_COORDINATOR
    assert broker.pending.end(0, 7, commit=True) is ErrorCode.NOT_COORDINATOR
    assert store.exists("/coordkit/txn_offsets") is None


def test_an_unreadable_node_is_left_alone(
    store: MetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    broker = Broker(store)
    store.create(node_path(0, 7), b"{not json", make_parents=True)
    broker.take_over()
    assert broker.pending.unstable("g") == set()
    assert "unreadable pending transactional offsets" in caplog.text


def test_the_node_round_trips() -> None:
    value = ProducerOffsets(3, {"g": {TP0: offset(5), TP1: offset(0)}, "h": {TP0: offset(2)}})
    assert decode("/p", encode(value)) == value


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        (b"[]", "expected a JSON object"),
        (b'{"version":2,"producerEpoch":0,"groups":{}}', "unknown version 2"),
        (b'{"version":1,"groups":{}}', "producerEpoch"),
        (b'{"version":1,"producerEpoch":true,"groups":{}}', "expected int"),
        (b'{"version":1,"producerEpoch":0,"groups":{"g":{}}}', "expected a list"),
        (b'{"version":1,"producerEpoch":0,"groups":{"g":[{"topic":"t","partition":0,'
         b'"offset":-1,"leaderEpoch":-1,"metadata":"","commitTimestamp":0}]}}', "groups.g"),
        (b'{"version":1,"producerEpoch":0,"groups":{"g":[{"topic":"t","partition":0,'
         b'"offset":1,"leaderEpoch":-1,"commitTimestamp":0}]}}', "metadata"),
    ],
)  # fmt: skip
def test_what_the_store_hands_back_is_checked(value: bytes, complaint: str) -> None:
    with pytest.raises(LayoutError, match=complaint) as raised:
        decode("/coordkit/txn_offsets/0/7", value)
    assert "/coordkit/txn_offsets/0/7" in str(raised.value)


def test_the_layout_is_kafkas_offset_value_fields() -> None:
    found = json.loads(encode(ProducerOffsets(1, {"g": {TP0: offset(5)}})))
    assert found == {"version": 1, "producerEpoch": 1, "groups": {"g": [
        {"topic": "in", "partition": 0, "offset": 5, "leaderEpoch": 4, "metadata": "m",
         "commitTimestamp": 1_700_000_000_000}]}}  # fmt: skip


def test_a_plain_commit_more_recent_than_the_transactions_offset_is_kept(
    store: MetadataStore,
) -> None:
    broker = Broker(store)
    broker.take_over()
    broker.offset_storage.commit("g", {TP1: OffsetAndMetadata(1, "", 1_699_999_999_999)})
    assert broker.pending.add(7, 0, "g", {TP0: offset(5), TP1: offset(6)}) is ErrorCode.NONE
    later = OffsetAndMetadata(7, "plain", 1_700_000_000_001)
    broker.offset_storage.commit("g", {TP0: later})
    assert broker.pending.end(0, 7, commit=True) is ErrorCode.NONE
    assert broker.offset_storage.fetch("g") == {TP0: later, TP1: offset(6)}


def test_deleted_offsets_take_their_pending_ones(store: MetadataStore) -> None:
    broker = Broker(store)
    broker.take_over()
    assert broker.pending.add(7, 0, "g", {TP0: offset(5), TP1: offset(6)}) is ErrorCode.NONE
    assert broker.pending.add(7, 0, "h", {TP0: offset(1)}) is ErrorCode.NONE
    assert broker.pending.add(8, 0, "g", {TP0: offset(2)}) is ErrorCode.NONE
    assert broker.pending.drop("g", [TP0]) is ErrorCode.NONE  # OffsetDelete
    assert broker.pending.unstable("g") == {TP1}
    assert store.children("/coordkit/txn_offsets/0") == ["7"]  # producer 8 held nothing else
    assert broker.pending.drop("g", None) is ErrorCode.NONE  # DeleteGroups
    assert broker.pending.unstable("g") == set()
    assert broker.pending.unstable("h") == {TP0}
    assert broker.pending.end(0, 7, commit=True) is ErrorCode.NONE
    assert broker.offset_storage.fetch("g") == {}
    assert broker.offset_storage.fetch("h") == {TP0: offset(1)}
