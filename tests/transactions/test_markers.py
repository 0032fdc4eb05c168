"""The partition leader's side of transactions on ``coordkit serve`` (issue 38, step 1):
transactional records produced with a transactional id, markers written by WriteTxnMarkers
(replicated to the followers as any batch), a read_committed Fetch stopping at the last stable
offset and listing the aborted transactions it read over, ListOffsets for read_committed.

The leaders here are asked for records of producers no coordinator knows (the markers come from
the tests, not a coordinator), so they run with ``transaction.partition.verification.enable``
false, as a Kafka leader would append them; the verification is tests/transactions/
test_produce_verification.py's."""

from __future__ import annotations

from typing import Any

from coordkit.engine.states import TP
from coordkit.protocol import messages
from coordkit.protocol.records import decode_batches, encode_batch, new_batch
from coordkit.serve import errors
from coordkit.serve.context import ServeSettings
from coordkit.serve.dataplane.log_transactions import last_stable_offset
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer
from serve.test_replication import _replica_bytes, _state, _topic

Produce = messages.ProduceRequest
Fetch = messages.FetchRequest
ListOffsets = messages.ListOffsetsRequest
WriteTxnMarkers = messages.WriteTxnMarkersRequest
READ_COMMITTED = 1
FETCH_VERSION = 12
TOPIC = "ledger"
UNVERIFIED = ServeSettings(transaction_partition_verification_enable=False)


def _produce(client: RawClient, tp: TP, pid: int, seq: int, *values: bytes) -> tuple[int, int]:
    records = encode_batch(new_batch([(None, v) for v in values], producer_id=pid,
                                     producer_epoch=0, base_sequence=seq,
                                     is_transactional=True))  # fmt: skip
    data = Produce.TopicProduceData(
        name=tp[0], partition_data=[Produce.PartitionProduceData(index=tp[1], records=records)]
    )
    request = Produce(transactional_id=f"txn-{pid}", acks=-1, timeout_ms=10_000, topic_data=[data])
    answer = client.call(request, 9).responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def _marker(
    client: RawClient, tp: TP, pid: int, *, commit: bool, coordinator_epoch: int = 0
) -> int:
    marker = WriteTxnMarkers.WritableTxnMarker(
        producer_id=pid, producer_epoch=0, transaction_result=commit,
        topics=[WriteTxnMarkers.WritableTxnMarkerTopic(name=tp[0], partition_indexes=[tp[1]])],
        coordinator_epoch=coordinator_epoch,
    )  # fmt: skip
    response = client.call(WriteTxnMarkers(markers=[marker]), 1)
    return response.markers[0].topics[0].partitions[0].error_code


def _fetch(client: RawClient, tp: TP, offset: int = 0, isolation: int = READ_COMMITTED) -> Any:
    request = Fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                    isolation_level=isolation, topics=[Fetch.FetchTopic(topic=tp[0], partitions=[
                        Fetch.FetchPartition(partition=tp[1], fetch_offset=offset,
                                             partition_max_bytes=1 << 20)])])  # fmt: skip
    return client.call(request, FETCH_VERSION).responses[0].partitions[0]


def _latest(client: RawClient, tp: TP, isolation: int) -> int:
    request = ListOffsets(replica_id=-1, isolation_level=isolation, topics=[
        ListOffsets.ListOffsetsTopic(name=tp[0], partitions=[
            ListOffsets.ListOffsetsPartition(partition_index=tp[1], timestamp=-1)])])  # fmt: skip
    return client.call(request, 7).topics[0].partitions[0].offset


def _values(records: bytes) -> list[bytes | None]:
    return [r.value for b in decode_batches(records) if not b.is_control for r in b.records]


def _setup(in_process: InProcessFactory, raw_client: Any) -> tuple[InProcessServer, RawClient]:
    server = in_process(brokers=3, settings=UNVERIFIED)
    _topic(server, TOPIC, 1, 3)
    return server, raw_client(server.address(_state(server, (TOPIC, 0)).leader))


def test_read_committed_stops_at_the_oldest_open_transaction(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server, client = _setup(in_process, raw_client)
    tp = (TOPIC, 0)
    assert _produce(client, tp, 100, 0, b"committed-1") == (0, 0)
    assert _produce(client, tp, 200, 0, b"open") == (0, 1)
    assert _produce(client, tp, 100, 1, b"committed-2") == (0, 2)
    answer = _fetch(client, tp)
    assert (answer.high_watermark, answer.last_stable_offset) == (3, 0)
    assert answer.records == b""
    assert answer.aborted_transactions == []
    assert _latest(client, tp, READ_COMMITTED) == 0
    assert _latest(client, tp, 0) == 3
    assert _marker(client, tp, 100, commit=True) == errors.NONE  # offset 3
    # Producer 200's transaction (from offset 1) is still open.
    assert _fetch(client, tp).last_stable_offset == 1
    assert _values(_fetch(client, tp).records) == [b"committed-1"]
    uncommitted = _fetch(client, tp, isolation=0)
    assert uncommitted.aborted_transactions is None
    assert _values(uncommitted.records) == [b"committed-1", b"open", b"committed-2"]
    assert _marker(client, tp, 200, commit=False) == errors.NONE  # offset 4
    answer = _fetch(client, tp)
    assert (answer.high_watermark, answer.last_stable_offset) == (5, 5)
    assert [(a.producer_id, a.first_offset) for a in answer.aborted_transactions] == [(200, 1)]
    assert _latest(client, tp, READ_COMMITTED) == 5
    # The followers copied the markers and know the same transactions.
    for broker in range(3):
        assert _replica_bytes(server, tp, broker)[0] == 5
        state = server.on_loop(
            lambda b=broker: (
                server.context(b).logs.get(tp).active.txn_index.entries,
                last_stable_offset(server.context(b).logs.get(tp), 5),
            )
        )
        assert [(e.producer_id, e.first_offset, e.last_offset) for e in state[0]] == [(200, 1, 4)]
        assert state[1] == 5


def test_markers_are_refused_as_kafka_refuses_them(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server, client = _setup(in_process, raw_client)
    tp = (TOPIC, 0)
    assert _produce(client, tp, 100, 0, b"a") == (0, 0)
    assert _marker(client, tp, 100, commit=True, coordinator_epoch=3) == errors.NONE
    assert _marker(client, tp, 100, commit=True, coordinator_epoch=2) == (
        errors.TRANSACTION_COORDINATOR_FENCED
    )
    assert _marker(client, ("nowhere", 0), 100, commit=True) == errors.UNKNOWN_TOPIC_OR_PARTITION
    follower = next(b for b in range(3) if b != _state(server, tp).leader)
    assert _marker(raw_client(server.address(follower)), tp, 100, commit=True) == (
        errors.NOT_LEADER_OR_FOLLOWER
    )
    # A transactional batch without a transactional id refuses the whole request.
    records = encode_batch(new_batch([(None, b"x")], producer_id=5, producer_epoch=0,
                                     base_sequence=0, is_transactional=True))  # fmt: skip
    data = Produce.TopicProduceData(
        name=TOPIC, partition_data=[Produce.PartitionProduceData(index=0, records=records)]
    )
    response = client.call(Produce(acks=-1, timeout_ms=10_000, topic_data=[data]), 9)
    assert response.responses[0].partition_responses[0].error_code == (
        errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
