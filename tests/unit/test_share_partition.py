"""SharePartition, the pure model of a share partition's in-flight records, held to Kafka's
``SharePartition`` rules (acquire, acknowledge, lock expiry, delivery-count limit, start offset)."""

from __future__ import annotations

import pytest

from coordkit.serve import errors
from coordkit.serve.dataplane.share.in_flight import (
    AcknowledgementBatch,
    AcquiredRange,
    RecordState,
    batches_error,
)
from coordkit.serve.dataplane.share.share_partition import SharePartition, SharePartitionConfig
from coordkit.serve.dataplane.share.share_state import ShareState, StateBatch

ACCEPT, RELEASE, REJECT, GAP, RENEW = 1, 2, 3, 0, 4
LOCK = 30_000


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, types)


def state_of(sp: SharePartition, offset: int) -> RecordState:
    record = sp.record(offset)
    assert record is not None
    return record.state


def partition(start: int = 0, **config: int) -> SharePartition:
    return SharePartition(start, SharePartitionConfig(**config))


def test_a_fetch_acquires_whole_batches_with_delivery_count_one() -> None:
    sp = partition()
    got = sp.acquire("m1", [(0, 4), (5, 9)], max_records=500, now_ms=0)
    assert got == [AcquiredRange(0, 9, 1)]
    assert sp.start_offset == 0
    assert sp.end_offset == 10
    record = sp.record(3)
    assert record is not None
    assert record.state == RecordState.ACQUIRED
    assert record.member_id == "m1"
    assert record.lock_deadline == LOCK
    # Nothing is available any more: another member's fetch acquires nothing.
    assert sp.next_fetch_offset() == 10
    assert sp.acquire("m2", [(0, 4), (5, 9)], max_records=500, now_ms=1) == []


def test_max_records_stops_at_a_batch_boundary_never_inside_a_batch() -> None:
    sp = partition()
    got = sp.acquire("m1", [(0, 4), (5, 9), (10, 14)], max_records=6, now_ms=0)
    assert got == [AcquiredRange(0, 9, 1)]  # the second batch is whole although over 6
    assert sp.end_offset == 10


def test_accept_moves_the_start_offset_over_the_acknowledged_prefix() -> None:
    sp = partition()
    sp.acquire("m1", [(0, 9)], 500, 0)
    assert sp.acknowledge("m1", [ack(0, 3, ACCEPT)], 1) == errors.NONE
    assert sp.start_offset == 4
    # Acknowledged out of order: the start waits for the gap before it.
    assert sp.acknowledge("m1", [ack(6, 9, ACCEPT)], 1) == errors.NONE
    assert sp.start_offset == 4
    assert sp.acknowledge("m1", [ack(4, 5, ACCEPT)], 1) == errors.NONE
    assert sp.start_offset == 10
    assert sp.in_flight() == 0


def test_release_redelivers_with_a_higher_delivery_count() -> None:
    sp = partition()
    sp.acquire("m1", [(0, 4)], 500, 0)
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT, RELEASE, ACCEPT, RELEASE, RELEASE)], 1) == 0
    assert sp.start_offset == 1
    assert sp.next_fetch_offset() == 1
    got = sp.acquire("m2", [(0, 4)], 500, 2)
    assert got == [AcquiredRange(1, 1, 2), AcquiredRange(3, 4, 2)]
    assert state_of(sp, 2) == RecordState.ACKNOWLEDGED


def test_reject_and_gap_archive_and_are_never_redelivered() -> None:
    sp = partition()
    sp.acquire("m1", [(0, 3)], 500, 0)
    assert sp.acknowledge("m1", [ack(0, 3, REJECT, GAP, RELEASE, ACCEPT)], 1) == 0
    assert sp.start_offset == 2
    assert sp.acquire("m1", [(0, 3)], 500, 2) == [AcquiredRange(2, 2, 2)]


def test_acknowledgements_are_answered_as_kafka_4_4_answers_them() -> None:
    """Kafka 4.4's answers, recorded from a running broker: another member's record and an
    offset acknowledged twice are INVALID_RECORD_STATE, an offset past the end INVALID_REQUEST,
    offsets before the start offset passed over; a refused acknowledgement changes nothing."""
    sp = partition()
    sp.acquire("m1", [(0, 4)], 500, 0)
    assert sp.acknowledge("m2", [ack(0, 0, ACCEPT)], 1) == errors.INVALID_RECORD_STATE
    # 5 is past the window: the whole acknowledgement is refused, 0..4 stay acquired.
    assert sp.acknowledge("m1", [ack(0, 1, ACCEPT), ack(4, 5, ACCEPT)], 1) == (
        errors.INVALID_REQUEST
    )
    assert sp.acknowledge("m1", [ack(0, 1, ACCEPT), ack(1, 2, ACCEPT)], 1) == (
        errors.INVALID_RECORD_STATE
    )
    assert sp.acquired_by("m1") == [0, 1, 2, 3, 4]
    assert sp.start_offset == 0
    assert sp.acknowledge("m1", [ack(0, 2, ACCEPT)], 1) == 0
    # Acknowledged again once settled and behind the start offset: passed over.
    assert sp.acknowledge("m1", [ack(0, 0, ACCEPT)], 1) == errors.NONE
    assert sp.acknowledge("m1", [ack(1, 3, REJECT)], 1) == errors.NONE
    assert sp.start_offset == 4
    assert sp.acquired_by("m1") == [4]


def test_an_expired_lock_makes_the_records_available_to_others() -> None:
    sp = partition(record_lock_duration_ms=1_000)
    sp.acquire("m1", [(0, 4)], 500, now_ms=0)
    assert sp.next_lock_deadline() == 1_000
    assert not sp.expire_locks(999)
    assert sp.expire_locks(1_000)
    assert sp.next_lock_deadline() is None
    assert sp.acquire("m2", [(0, 4)], 500, 1_001) == [AcquiredRange(0, 4, 2)]
    # The first member's acknowledgement comes too late.
    assert sp.acknowledge("m1", [ack(0, 4, ACCEPT)], 1_002) == errors.INVALID_RECORD_STATE


def test_renew_extends_the_lock_only() -> None:
    sp = partition(record_lock_duration_ms=1_000)
    sp.acquire("m1", [(0, 1)], 500, now_ms=0)
    assert sp.acknowledge("m1", [ack(0, 1, RENEW)], 900) == 0
    assert not sp.expire_locks(1_500)
    assert sp.acquired_by("m1") == [0, 1]
    assert sp.expire_locks(1_900)


def test_the_delivery_count_limit_archives_a_record_released_too_often() -> None:
    sp = partition(delivery_count_limit=3, record_lock_duration_ms=10)
    now = 0
    for delivery in range(1, 4):
        assert sp.acquire("m1", [(0, 0)], 500, now) == [AcquiredRange(0, 0, delivery)]
        if delivery < 3:
            assert sp.acknowledge("m1", [ack(0, 0, RELEASE)], now) == 0
        now += 1
    # The third delivery's lock expires: released a third time, archived.
    assert sp.expire_locks(now + 10)
    assert sp.start_offset == 1
    assert sp.acquire("m1", [(0, 0)], 500, now + 11) == []


def test_a_departed_member_s_records_are_released_at_once() -> None:
    sp = partition()
    sp.acquire("m1", [(0, 2)], 500, 0)
    sp.acquire("m2", [(3, 5)], 500, 0)
    assert sp.release_member("m1")
    assert not sp.release_member("m1")
    assert sp.acquired_by("m2") == [3, 4, 5]
    assert sp.next_fetch_offset() == 0


def test_max_record_locks_bounds_new_records_not_released_ones() -> None:
    sp = partition(max_record_locks=10)
    assert sp.acquire("m1", [(0, 7)], 500, 0) == [AcquiredRange(0, 7, 1)]
    # 8 in flight: one more batch may start (Kafka lets the last batch overshoot).
    assert sp.acquire("m1", [(8, 12), (13, 14)], 500, 0) == [AcquiredRange(8, 12, 1)]
    assert not sp.can_acquire()
    assert sp.acknowledge("m1", [ack(2, 2, RELEASE)], 1) == 0
    assert sp.can_acquire()
    assert sp.acquire("m2", [(0, 7), (8, 12), (13, 14)], 500, 2) == [AcquiredRange(2, 2, 2)]


def test_offsets_missing_between_batches_are_archived() -> None:
    sp = partition()
    assert sp.acquire("m1", [(0, 1), (5, 6)], 500, 0) == [AcquiredRange(0, 1, 1),
                                                         AcquiredRange(5, 6, 1)]  # fmt: skip
    assert state_of(sp, 3) == RecordState.ARCHIVED
    assert sp.acknowledge("m1", [ack(0, 1, ACCEPT)], 1) == 0
    assert sp.start_offset == 5


def test_the_log_start_moving_forward_drops_records_before_it() -> None:
    sp = partition()
    sp.acquire("m1", [(0, 9)], 500, 0)
    assert sp.move_start_to(4)
    assert sp.start_offset == 4
    assert sp.acquired_by("m1") == [4, 5, 6, 7, 8, 9]
    assert sp.move_start_to(20)
    assert sp.end_offset == 20
    assert sp.in_flight() == 0
    assert not sp.move_start_to(3)


def test_the_persisted_state_leaves_acquisitions_out_and_restores() -> None:
    sp = partition()
    sp.acquire("m1", [(0, 9)], 500, 0)
    sp.acknowledge("m1", [ack(0, 0, ACCEPT), ack(2, 3, RELEASE), ack(4, 4, REJECT)], 1)
    sp.acquire("m2", [(0, 9)], 500, 2)  # 2..3 again, delivery 2
    state = sp.persisted(leader_epoch=3, state_epoch=1)
    # Written with the start offset from before the acknowledgement, as Kafka writes it.
    assert state == ShareState(0, 3, 1, (
        StateBatch(0, 0, RecordState.ACKNOWLEDGED, 1),
        StateBatch(1, 1, RecordState.AVAILABLE, 0),
        StateBatch(2, 3, RecordState.AVAILABLE, 1),
        StateBatch(4, 4, RecordState.ARCHIVED, 1),
    ))  # fmt: skip
    again = SharePartition.restored(state)
    assert again.start_offset == 1
    assert again.end_offset == 5
    # A new leader delivers 1..3 again (1 never acknowledged: a first delivery), then 5 on.
    got = again.acquire("m3", [(0, 9)], 500, 0)
    assert got == [AcquiredRange(1, 1, 1), AcquiredRange(2, 3, 2), AcquiredRange(5, 9, 1)]


def test_persisted_states_refuse_what_cannot_be() -> None:
    with pytest.raises(ValueError, match="ACQUIRED"):
        StateBatch(0, 1, RecordState.ACQUIRED, 1)
    with pytest.raises(ValueError, match="overlaps"):
        ShareState(0, batches=(StateBatch(0, 3, 2, 1), StateBatch(3, 4, 2, 1)))
    with pytest.raises(ValueError, match="before the start"):
        ShareState(5, batches=(StateBatch(0, 3, 2, 1),))


@pytest.mark.parametrize(
    ("batches", "renew", "wanted"),
    [
        ([ack(0, 4, 1)], False, None),
        ([ack(0, 2, 1, 2, 3)], False, None),
        ([ack(3, 2, 1)], False, "first offset after last"),
        ([ack(0, 2, 1, 2)], False, "2 acknowledge types for 3 offsets"),
        ([ack(0, 0, 5)], False, "unknown acknowledge type"),
        ([ack(0, 0, RENEW)], False, "unknown acknowledge type"),
        ([ack(0, 0, RENEW)], True, None),
        ([ack(0, 4, 1), ack(4, 5, 1)], False, None),  # overlapping: the state refuses it
    ],
)
def test_acknowledgement_batches_are_checked_as_kafka_apis_does(
    batches: list[AcknowledgementBatch], renew: bool, wanted: str | None
) -> None:
    found = batches_error(batches, renew_allowed=renew)
    assert found is None if wanted is None else wanted in (found or "")


def test_records_held_back_are_left_for_a_later_fetch() -> None:
    """A ShareFetch does not acquire what its own acknowledgements released (Kafka 4.4's fetch
    does not wait for their state write)."""
    sp = partition()
    sp.acquire("m1", [(0, 3)], 500, 0)
    assert sp.acknowledge("m1", [ack(0, 3, RELEASE, ACCEPT, RELEASE, ACCEPT)], 1) == 0
    assert sp.acquire("m1", [(0, 3)], 500, 2, held={0, 2}) == []
    assert sp.acquire("m2", [(0, 3)], 500, 3) == [AcquiredRange(0, 0, 2), AcquiredRange(2, 2, 2)]


def test_a_change_is_written_with_the_start_offset_from_before_it() -> None:
    """Kafka 4.4 writes an acknowledgement's state with the start offset it had before, and the
    moved start offset with the next change (recorded: DescribeShareGroupOffsets right after an
    acknowledgement of 0-3 gives start offset 0, the four counted as delivered)."""
    sp = partition()
    sp.acquire("m1", [(0, 5)], 500, 0)
    sp.acknowledge("m1", [ack(0, 3, ACCEPT)], 1)
    assert sp.start_offset == 4
    assert sp.persisted(0, 0) == ShareState(0, 0, 0, (StateBatch(0, 3, 2, 1),))
    sp.acknowledge("m1", [ack(4, 4, REJECT)], 2)
    assert sp.persisted(0, 0) == ShareState(4, 0, 0, (StateBatch(4, 4, 4, 1),))
    assert SharePartition.restored(sp.persisted(0, 0)).start_offset == 5


def test_records_of_aborted_transactions_are_archived_as_they_are_acquired() -> None:
    """A read_committed fetch's aborted records: acquired, archived at once, never answered nor
    delivered again (Kafka's ``filterAbortedTransactionalAcquiredRecords``)."""
    sp = partition()
    got = sp.acquire("m1", [(0, 2), (3, 5), (6, 6), (7, 9)], 500, 0, aborted={3, 4, 5})
    assert got == [AcquiredRange(0, 2, 1), AcquiredRange(6, 9, 1)]
    assert [state_of(sp, o) for o in (3, 4, 5)] == [RecordState.ARCHIVED] * 3
    assert sp.acquired_by("m1") == [0, 1, 2, 6, 7, 8, 9]
    assert sp.acknowledge("m1", [ack(0, 2, ACCEPT)], 1) == 0
    assert sp.start_offset == 6  # over the accepted and the archived
    assert sp.release_member("m1")
    assert sp.acquire("m2", [(6, 6), (7, 9)], 500, 2) == [AcquiredRange(6, 9, 2)]
