"""The ``share-groups`` lab workload without processes: its registration, strategies, schedule and
parameter checks, and the analysis of recorded delivery logs (the lines the share consumers and the
producer write) into the metrics. The runs with real ShareConsumer processes are
tests/share/test_share_lab_workload.py (py311-share)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pytest

from coordkit.errors import MissingDependencyError
from coordkit.lab import LabError
from coordkit.plugins import get_plugin_manager
from coordkit_share_assignors.lab.analysis import (
    SHARE_KIND,
    LogFormatError,
    MemberLog,
    RunEvent,
    steps,
)
from coordkit_share_assignors.lab.consumer import first_action
from coordkit_share_assignors.lab.run import kafka_settings
from coordkit_share_assignors.lab.workload import KAFKA_STRATEGIES, parse_strategy

METRICS = {
    "share-delivery-balance-cv",
    "share-redeliveries",
    "share-records-held-past-lock",
    "share-duplicates-accepted",
    "share-records-lost",
    "share-records-unconfirmed",
    "share-delivery-latency-p50-ms",
    "share-delivery-latency-p99-ms",
    "share-accept-latency-p50-ms",
    "share-accept-latency-p99-ms",
}


def _workload() -> Any:
    return get_plugin_manager().workload("share-groups")


def test_registered_with_one_strategy_per_share_assignor_and_kafka_s_row() -> None:
    manager = get_plugin_manager()
    workload = _workload()
    assert workload.kind == SHARE_KIND
    names = [r.name for r in manager.share_assignors]
    assert {"simple", "load-balanced", "rack-aware"} <= set(names)
    assert workload.strategies(manager) == [*names, "simple@kafka"]
    assert KAFKA_STRATEGIES == ("simple@kafka",)
    assert {r.name for r in manager.metrics if SHARE_KIND in r.value.kinds} == METRICS
    assert parse_strategy("load-balanced") == ("load-balanced", "coordkit")
    assert parse_strategy("simple@kafka") == ("simple", "kafka")
    for wrong in ("range", "load-balanced@kafka"):
        with pytest.raises(
            LabError, match=f"has no strategy {wrong!r}; its strategies: .*, simple@kafka$"
        ):
            parse_strategy(wrong)


def test_schedule_and_released_records_repeat_with_the_seed() -> None:
    workload = _workload()
    params = {**workload.defaults, "events": 30, "consumers": 2}
    first = workload.generate(params, 7)
    assert first == workload.generate(params, 7)
    assert first != workload.generate(params, 8)
    assert {e.action for e in first.events} == {"join", "crash", "restart", "stall"}
    live = 2
    for event in first.events:  # never the last member killed
        assert event.action != "crash" or live > 1
        live += {"join": 1, "crash": -1}.get(event.action, 0)
    actions = [first_action(7, seq, 0.1, 0.05) for seq in range(4000)]
    assert actions == [first_action(7, seq, 0.1, 0.05) for seq in range(4000)]
    assert 0.08 < actions.count("release") / 4000 < 0.12
    assert 0.035 < actions.count("reject") / 4000 < 0.065
    assert actions != [first_action(8, seq, 0.1, 0.05) for seq in range(4000)]


def test_bad_parameters_are_refused_in_one_line_naming_them() -> None:
    workload = _workload()
    bad = {**workload.defaults, "brokers": 1, "lock_ms": 10, "release": 0.9}
    with pytest.raises(LabError) as refused:
        workload.generate(bad, 1)
    message = str(refused.value)
    assert "\n" not in message
    for part in ("brokers=1 (needs >= 2)", "lock_ms=10 (needs 1000..60000)",
                 "release=0.9 (needs 0..0.5)"):  # fmt: skip
        assert part in message


def test_missing_kafka_jars_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COORDKIT_KAFKA_HOME", str(tmp_path))
    with pytest.raises(
        MissingDependencyError, match=r"is missing\); run: bash kafka-dist/fetch.sh"
    ):
        next(_workload().simulate({}, 1, "simple@kafka"))


def test_kafka_gets_the_same_share_settings_its_lower_bounds_moved() -> None:
    configs = {
        "group.share.assignors": "load-balanced",
        "group.share.record.lock.duration.ms": "3000",
        "group.share.session.timeout.ms": "6000",
        "group.share.heartbeat.interval.ms": "1200",
    }
    assert kafka_settings(configs) == {
        "group.share.record.lock.duration.ms": "3000",
        "group.share.min.record.lock.duration.ms": "3000",
        "group.share.session.timeout.ms": "6000",
        "group.share.min.session.timeout.ms": "6000",
        "group.share.heartbeat.interval.ms": "1200",
        "group.share.min.heartbeat.interval.ms": "1200",
    }


# -- the analysis of recorded logs ----------------------------------------------------------------

PRODUCER = [f"a {seq} {seq % 2} {seq // 2} {100 + seq / 10:.6f}" for seq in range(10)]


def _delivery(t: float, seq: int, count: int, action: str) -> str:
    return f"d {t:.6f} {seq % 2} {seq // 2} {count} {seq} {100 + seq / 10:.6f} {action}"


def _ack(t: float, seq: int, action: str, ok: bool = True) -> str:
    return f"k {t:.6f} {seq} {seq % 2} {seq // 2} {action} {'ok' if ok else 'failed'}"


def test_a_recorded_run_gives_each_window_its_figures() -> None:
    # Window 0 (100..110): a takes the even records, b the odd; b releases 3, rejects 5.
    a = [
        *(line for seq in (0, 2, 4) for line in (_delivery(101 + seq / 10, seq, 1, "accept"),
                                                  _ack(101.05 + seq / 10, seq, "accept"))),
        # Window 1 (110..): a stalls with 6 and 8; its late acceptance is refused.
        "stall 110.5 4.5",
        _delivery(110.4, 6, 1, "hold"),
        _delivery(110.4, 8, 1, "hold"),
        "resume 115.0",
        _ack(115.0, 6, "hold", ok=False),
        _ack(115.0, 8, "hold", ok=False),
    ]  # fmt: skip
    b = [
        _delivery(101.1, 1, 1, "accept"), _ack(101.2, 1, "accept"),
        _delivery(101.3, 3, 1, "release"), _ack(101.4, 3, "release"),
        _delivery(101.5, 5, 1, "reject"), _ack(101.6, 5, "reject"),
        _delivery(102.0, 3, 2, "accept"), _ack(102.1, 3, "accept"),
        _delivery(102.2, 7, 1, "accept"), _ack(102.3, 7, "accept"),
        _delivery(102.4, 9, 1, "accept"), _ack(102.5, 9, "accept"),
        # Window 1: the stalled member's records, their lock lapsed, come to b.
        _delivery(113.6, 6, 2, "accept"), _ack(113.7, 6, "accept"),
        _delivery(113.6, 8, 2, "accept"), _ack(113.7, 8, "accept"),
    ]  # fmt: skip
    logs = [MemberLog("a", tuple(a), 100.0, None), MemberLog("b", tuple(b), 100.0, None)]
    events = [RunEvent(100.0, "2 consumers start", "initial"), RunEvent(110.0, "a stalls", "stall")]
    first, second = steps(strategy="simple", partitions=2, members=logs, producer=PRODUCER,
                          events=events, end=120.0)  # fmt: skip
    assert (first.deliveries, first.redeliveries, first.released, first.rejected) == (9, 1, 1, 1)
    assert (first.held_past_lock, first.duplicates_accepted) == (0, 0)
    assert first.sent == 10
    assert first.lost == 0  # all sent in window 0; 5 rejected, not lost
    assert first.rates == pytest.approx((0.3, 0.6))
    assert first.balance_cv == pytest.approx(1 / 3)
    # Send → first delivery of record 3 is 101.3 - 100.3 = 1.0 s; its acceptance 102.1 - 100.3.
    assert max(first.delivery_latencies) == pytest.approx(110.4 - 100.6)
    assert sorted(first.accept_latencies)[-1] == pytest.approx(113.7 - 100.6)
    assert len(first.accept_latencies) == 9  # the rejected one is never accepted
    assert first.delivery_latency_ms(0.0) == pytest.approx(1000.0)
    assert (second.deliveries, second.redeliveries, second.held_past_lock) == (4, 2, 2)
    assert (second.duplicates_accepted, second.sent, second.lost) == (0, 0, 0)
    assert second.accept_latency_ms(0.5) is None


def test_a_record_never_settled_is_lost_and_a_second_acceptance_a_duplicate() -> None:
    a = [_delivery(101.0, 0, 1, "accept"), _ack(101.1, 0, "accept"),
         _delivery(101.0, 1, 1, "hold"), _ack(105.0, 1, "hold")]  # fmt: skip
    b = [_delivery(104.5, 1, 2, "accept"), _ack(104.6, 1, "accept")]
    logs = [MemberLog("a", tuple(a), 100.0, None), MemberLog("b", tuple(b), 100.0, 104.0)]
    (step,) = steps(strategy="simple", partitions=2, members=logs, producer=PRODUCER[:3],
                    events=[RunEvent(100.0, "start", "initial")], end=106.0)  # fmt: skip
    assert step.lost == 1  # record 2 was acknowledged to the producer, never delivered
    assert (step.duplicates_accepted, step.held_past_lock) == (1, 1)
    assert step.members == 1  # b stopped before the window's end
    assert step.balance_cv is None
    assert not math.isnan(step.accept_latency_ms(0.99) or 0.0)


def test_a_garbled_log_line_is_named() -> None:
    logs = [MemberLog("a", ("d 1.0 0 0 1 0 1.0 maybe",), 0.0, None)]
    with pytest.raises(LogFormatError, match=r"a's log, line 1: 'd 1.0 0 0 1 0 1.0 maybe'"):
        steps(strategy="simple", partitions=1, members=logs, producer=[],
              events=[RunEvent(0.0, "start", "initial")], end=1.0)  # fmt: skip


def test_a_killed_member_s_unanswered_acceptance_is_unconfirmed_not_lost() -> None:
    """b accepted records 1 and 2 and was killed before it logged the answer: record 1 came back
    (its acceptance was not applied) and a accepted it; record 2 never came back."""
    a = [_delivery(101.0, 0, 1, "accept"), _ack(101.1, 0, "accept"),
         _delivery(104.0, 1, 2, "accept"), _ack(104.1, 1, "accept")]  # fmt: skip
    b = [_delivery(101.0, 1, 1, "accept"), _delivery(101.0, 2, 1, "accept")]
    logs = [MemberLog("a", tuple(a), 100.0, None), MemberLog("b", tuple(b), 100.0, 101.05)]
    (step,) = steps(strategy="simple", partitions=2, members=logs, producer=PRODUCER[:3],
                    events=[RunEvent(100.0, "start", "initial")], end=106.0)  # fmt: skip
    assert (step.lost, step.unconfirmed, step.held_past_lock) == (0, 1, 1)
    # The same b still running: its silence is no kill, record 2 is lost.
    running = [logs[0], MemberLog("b", tuple(b), 100.0, None)]
    (step,) = steps(strategy="simple", partitions=2, members=running, producer=PRODUCER[:3],
                    events=[RunEvent(100.0, "start", "initial")], end=106.0)  # fmt: skip
    assert (step.lost, step.unconfirmed) == (1, 0)


def test_a_missing_share_consumer_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def without_confluent(name: str, *args: Any) -> Any:
        return None if name == "confluent_kafka" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_confluent)
    with pytest.raises(MissingDependencyError, match=r"pip install 'confluent-kafka>=2.16'$"):
        next(_workload().simulate({}, 1, "simple"))
