"""The process-chaos checks catch what they claim to (no servers: the watcher's bookkeeping fed by
hand), and process schedules are a function of their seed."""

from __future__ import annotations

from pathlib import Path

from chaos.process_schedule import CUT_PEERS, FAULT_ACTIONS, FAULTS, generate_process_schedule
from chaos.workload import Watcher
from coordkit.protocol.records import assign_offsets, encode_batch, new_batch


def _watcher(log_dirs: dict[int, Path] | None = None) -> Watcher:
    return Watcher(dict, log_dirs or {})


def test_a_high_watermark_going_back_is_a_problem() -> None:
    watcher = _watcher()
    watcher._saw_high_watermark(0, 10, 1, 1)
    watcher._saw_high_watermark(0, 12, 2, 2)
    assert watcher.problems == []
    watcher._saw_high_watermark(0, 11, 3, 3)
    assert watcher.problems == [
        "chaos-0: the high watermark went back from 12 (leader 2, epoch 2) to 11 (leader 3, "
        "epoch 3)"
    ]


def test_a_batch_copied_by_a_follower_is_not_two_writers() -> None:
    watcher = _watcher()
    watcher._saw_batch(1, 0, 4, 10, 12, 0xABC)
    watcher._saw_batch(2, 0, 4, 10, 12, 0xABC)  # the follower's copy
    watcher._saw_batch(3, 0, 5, 10, 11, 0xDEF)  # a newer epoch rewrote the offsets: fine
    assert watcher.problems == []


def test_different_batches_at_overlapping_offsets_in_one_epoch_are_two_writers() -> None:
    watcher = _watcher()
    watcher._saw_batch(1, 0, 4, 10, 12, 0xABC)
    watcher._saw_batch(2, 0, 4, 12, 13, 0xDEF)
    assert len(watcher.problems) == 1
    assert "leader epoch 4: two different batches at overlapping offsets" in watcher.problems[0]


def test_the_watcher_reads_batches_and_their_epochs_from_segment_files(tmp_path: Path) -> None:
    first = assign_offsets(encode_batch(new_batch([(b"k", b"a"), (b"k", b"b")])), 0, 3)
    mine = assign_offsets(encode_batch(new_batch([(b"k", b"c")])), 2, 3)
    theirs = assign_offsets(encode_batch(new_batch([(b"k", b"d")])), 2, 3)
    for broker, tail in ((1, mine), (2, theirs)):
        directory = tmp_path / f"broker-{broker}" / "chaos-0"
        directory.mkdir(parents=True)
        # A batch being written when the sample is taken: its first half only.
        (directory / "00000000000000000000.log").write_bytes(first + tail + first[:20])
    watcher = _watcher({b: tmp_path / f"broker-{b}" for b in (1, 2)})
    watcher._sample_log(1, 0, tmp_path / "broker-1" / "chaos-0")
    assert sorted(watcher.batches[0][3]) == [0, 2]
    assert watcher.problems == []
    watcher._sample_log(2, 0, tmp_path / "broker-2" / "chaos-0")
    assert len(watcher.problems) == 1
    assert "offsets: 2-2" in watcher.problems[0]


def test_a_process_schedule_is_a_function_of_its_seed() -> None:
    one = generate_process_schedule(7, "redis", session_timeout=4.0)
    assert one == generate_process_schedule(7, "redis", session_timeout=4.0)
    kinds = set()
    for seed in range(1, 40):
        steps = generate_process_schedule(seed, "redis", session_timeout=4.0).steps
        # Each fault is undone by the next step, on the same broker.
        for fault, undo in zip(steps[::2], steps[1::2], strict=True):
            assert fault.action in FAULT_ACTIONS
            assert undo.action == FAULTS[fault.action]
            assert undo.broker == fault.broker
            assert undo.peer == fault.peer
            assert (fault.peer is not None) == (fault.action == CUT_PEERS)
            assert fault.peer != fault.broker
            kinds.add(fault.action)
    assert kinds == set(FAULT_ACTIONS)
