"""Idempotent producers: InitProducerId hands out producer ids unique across the cluster (from
the store's ``/latest_producer_id_block``), and leaders check sequence numbers as Kafka does."""

from __future__ import annotations

from typing import Any

import pytest

from coordkit.engine.states import TP
from coordkit.errors import LayoutError
from coordkit.plugins import get_plugin_manager
from coordkit.protocol import messages
from coordkit.protocol.records import decode_batches, encode_batch, new_batch
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.producer_state import (
    BLOCK_SIZE,
    PRODUCER_ID_BLOCK,
    ProducerIdBlock,
    ProducerIds,
    claim_block,
)
from coordkit.support import jsontext
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401
from serve.test_replication import _fetch, _replica_bytes, _state, _topic

InitProducerId = messages.InitProducerIdRequest
Produce = messages.ProduceRequest
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
NOT_COORDINATOR = 16


def _batch(pid: int, epoch: int, seq: int, *values: bytes, transactional: bool = False) -> bytes:
    return encode_batch(
        new_batch(
            [(None, v) for v in values],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=transactional,
        )
    )


def _send(client: RawClient, tp: TP, records: bytes, acks: int = -1) -> Any:
    data = Produce.TopicProduceData(
        name=tp[0], partition_data=[Produce.PartitionProduceData(index=tp[1], records=records)]
    )
    response = client.call(Produce(acks=acks, timeout_ms=10_000, topic_data=[data]), 9)
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def _init(client: RawClient, version: int = 4, transactional_id: str | None = None) -> Any:
    request = InitProducerId(transactional_id=transactional_id, transaction_timeout_ms=60_000)
    return client.call(request, version)


# -- the leader's log, directly --------------------------------------------------------------------


def test_a_retried_batch_is_answered_with_its_offset_and_not_appended_again() -> None:
    log = PartitionLog()
    assert log.append(_batch(7, 0, 0, b"a", b"b"), leader_epoch=0).base_offset == 0
    assert log.append(_batch(7, 0, 2, b"c"), leader_epoch=0).base_offset == 2
    again = log.append(_batch(7, 0, 0, b"a", b"b"), leader_epoch=0)
    assert (again.error, again.base_offset, again.records, again.end_offset) == (0, 0, 0, 2)
    assert log.log_end == 3
    # Only the last five batches are remembered (Kafka's ProducerStateEntry).
    for seq in range(3, 8):
        log.append(_batch(7, 0, seq, b"x"), leader_epoch=0)
    assert log.append(_batch(7, 0, 0, b"a", b"b"), 0).error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append(_batch(7, 0, 3, b"x"), 0).base_offset == 3  # still remembered


def test_sequence_and_epoch_rules() -> None:
    log = PartitionLog()
    # A producer the partition does not know may start anywhere (Kafka since KIP-360).
    assert log.append(_batch(1, 0, 5, b"a"), 0).error == 0
    assert log.append(_batch(1, 0, 7, b"gap"), 0).error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append(_batch(1, 1, 3, b"new epoch"), 0).error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append(_batch(1, 1, 0, b"new epoch"), 0).error == 0
    assert log.append(_batch(1, 0, 6, b"fenced"), 0).error == INVALID_PRODUCER_EPOCH
    # A transactional batch opens its producer's transaction; a plain one may not follow it.
    assert log.append(_batch(2, 0, 0, b"t", transactional=True), 0).error == 0
    assert log.append(_batch(2, 0, 1, b"not t"), 0).error == INVALID_TXN_STATE
    # Sequences wrap from 2**31-1 to 0.
    assert log.append(_batch(3, 0, 2**31 - 1, b"last"), 0).error == 0
    assert log.append(_batch(3, 0, 0, b"wrapped"), 0).error == 0
    # A refused batch appends nothing; plain batches (no producer id) are not checked.
    assert log.append(_batch(-1, -1, -1, b"plain"), 0).error == 0
    values = [r.value for b in decode_batches(log.read(0, 1 << 20)) for r in b.records]
    assert values == [b"a", b"new epoch", b"t", b"last", b"wrapped", b"plain"]


def test_a_follower_keeps_the_producer_state_so_a_new_leader_deduplicates() -> None:
    leader, follower = PartitionLog(), PartitionLog()
    leader.append(_batch(9, 0, 0, b"a"), leader_epoch=3)
    follower.append_copied(leader.read(0, 1 << 20))
    retried = follower.append(_batch(9, 0, 0, b"a"), leader_epoch=4)
    assert (retried.base_offset, retried.records, follower.log_end) == (0, 0, 1)
    assert follower.append(_batch(9, 0, 1, b"b"), leader_epoch=4).base_offset == 1


def test_truncation_follows_the_new_leaders_epochs() -> None:
    old, new = PartitionLog(), PartitionLog()
    old.append(_batch(-1, -1, -1, b"a", b"b"), leader_epoch=0)
    new.append_copied(old.read(0, 1 << 20))
    # The old leader appends what nobody copied; the new leader (epoch 1) appends other records.
    old.append(_batch(5, 0, 0, b"lost"), leader_epoch=0)
    new.append(_batch(-1, -1, -1, b"c", b"d", b"e"), leader_epoch=1)
    assert old.divergence(new) == 2
    assert old.truncate_to(2) == 1
    assert old.producers.entry(5) is None  # the producer state of cut batches goes too
    old.append_copied(new.read(2, 1 << 20))
    assert old.read(0, 1 << 20) == new.read(0, 1 << 20)
    assert old.end_offset_for(0) == (0, 2)
    assert old.end_offset_for(1) == (1, 5)


# -- over the wire ---------------------------------------------------------------------------------


def test_init_producer_id_hands_out_unique_ids_from_the_store(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=3)
    ids = []
    for broker in range(3):
        client = raw_client(server.address(broker))
        for version in (0, 2, 4, 5):
            response = _init(client, version)
            assert (response.error_code, response.producer_epoch) == (0, 0)
            ids.append(response.producer_id)
    assert len(set(ids)) == len(ids)
    data, _ = server.server.cluster.admin_store.get(PRODUCER_ID_BLOCK)
    block = jsontext.loads(data)
    # Kafka's layout: the last block claimed, ends inclusive, as strings.
    assert block["version"] == 1
    assert int(block["block_end"]) - int(block["block_start"]) == BLOCK_SIZE - 1
    assert int(block["block_end"]) == 3 * BLOCK_SIZE - 1  # three brokers, one block each
    assert all(0 <= i < 3 * BLOCK_SIZE for i in ids)


def test_a_transactional_id_goes_to_its_coordinator(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    """A transactional id is its transaction coordinator's (tests/transactions): before
    ``__transaction_state`` has a leader here the broker is not its coordinator."""
    server = in_process(brokers=1)
    response = _init(raw_client(server.address(0)), 4, transactional_id="txn-1")
    assert (response.error_code, response.producer_id) == (NOT_COORDINATOR, -1)


def test_a_retried_produce_is_not_duplicated(in_process: InProcessFactory, raw_client: Any) -> None:
    server: InProcessServer = in_process(brokers=3)
    _topic(server, "once", 1, 3)
    tp = ("once", 0)
    client = raw_client(server.address(_state(server, tp).leader))
    pid = _init(client).producer_id
    first = _batch(pid, 0, 0, b"a", b"b")
    assert _send(client, tp, first) == (0, 0)
    assert _send(client, tp, _batch(pid, 0, 2, b"c")) == (0, 2)
    # The producer did not see the answer and sends the same batch again: same offset, once.
    assert _send(client, tp, first) == (0, 0)
    assert _send(client, tp, _batch(pid, 0, 5, b"gap")) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    values = [r.value for b in decode_batches(_fetch(client, tp).records) for r in b.records]
    assert values == [b"a", b"b", b"c"]
    # The followers copied the producer state with the batches.
    for broker in range(3):
        assert _replica_bytes(server, tp, broker)[0] == 3
        entry = server.on_loop(lambda b=broker: server.context(b).logs.get(tp).producers.entry(pid))
        assert entry is not None
        assert entry.last_seq == 2


def test_brokers_claim_distinct_blocks_and_a_foreign_node_is_refused() -> None:
    store = get_plugin_manager().store_for("memory://producer-id-blocks")
    try:
        first, second = ProducerIds(), ProducerIds()
        assert first.next_id(store, 0) == 0
        assert second.next_id(store, 1) == BLOCK_SIZE
        assert first.next_id(store, 0) == 1
        assert ProducerIdBlock.decode(PRODUCER_ID_BLOCK, store.get(PRODUCER_ID_BLOCK)[0]) == (
            ProducerIdBlock(broker=1, first=BLOCK_SIZE, last=2 * BLOCK_SIZE - 1)
        )
        store.set(PRODUCER_ID_BLOCK, b'{"version":1,"broker":0,"block_start":"x"}')
        with pytest.raises(LayoutError, match="latest_producer_id_block"):
            claim_block(store, 2)
        assert store.get(PRODUCER_ID_BLOCK)[0].endswith(b'"x"}')  # left as it was
    finally:
        store.close()


def test_the_empty_node_kafkas_brokers_create_at_start_yields_the_first_block() -> None:
    """Kafka's brokers (and coordkit's) create /latest_producer_id_block empty at start; the
    first claim writes block 0 into it, at the version read."""
    store = get_plugin_manager().store_for("memory://producer-id-empty-root")
    try:
        store.create(PRODUCER_ID_BLOCK, b"")
        assert claim_block(store, 3) == ProducerIdBlock(broker=3, first=0, last=BLOCK_SIZE - 1)
        data, stat = store.get(PRODUCER_ID_BLOCK)
        assert ProducerIdBlock.decode(PRODUCER_ID_BLOCK, data).broker == 3
        assert stat.version == 1
        assert claim_block(store, 4).first == BLOCK_SIZE
    finally:
        store.close()
