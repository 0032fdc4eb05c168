"""The lab's ``real-clients`` workload: a consumer group of real client processes (kafka-python,
aiokafka, confluent-kafka; the classic protocol and Kafka 4's consumer protocol) on coordkit's
Kafka server in a process of its own, or on a real Kafka 4.4 cluster (the ``@kafka`` reference
rows), a producer throughout, through seeded joins, SIGKILLs, restarts and broker crashes.

The schedule, the strategies, the parameter checks and the reading of the processes' logs run
without processes; in the default run, one short run of a classic strategy, one of a consumer
protocol strategy and one of a Kafka reference row (it starts Kafka's JVMs: the jars of ``bash
kafka-dist/fetch.sh``) start the processes; a killed consumer with two strategies, every server
assignor, the documented command and ``coordkit lab run --preset clients`` are ``lab_process``
tests (py311-lab-cluster)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest

from coordkit.errors import MissingDependencyError
from coordkit.lab import LabError
from coordkit.lab.kafka_host import KAFKA_VERSION
from coordkit.plugins import get_plugin_manager
from coordkit_assignors.lab.clients.analysis import (
    CLIENTS_KIND,
    ClientStep,
    ConsumerLog,
    RunEvent,
    steps,
)
from coordkit_assignors.lab.clients.run import KAFKA_SERVER_ASSIGNORS, RunSpec, run_clients
from coordkit_assignors.lab.clients.workload import (
    CLASSIC_STRATEGIES,
    KAFKA_STRATEGIES,
    Strategy,
    all_strategies,
    parse_strategy,
)
from coordkit_lab.runner import run_scenario
from coordkit_lab.scenarios import ScenarioSpec, expand, get_preset
from harness.docs import code_block, page

METRICS = {
    "clients-rebalance-seconds",
    "clients-disruption-seconds",
    "clients-unowned-partition-seconds",
    "revocations",
    "records-consumed-twice",
    "records-lost",
    "latency-p50-ms",
    "latency-p99-ms",
}
AFTER_EVENTS_ONLY = {
    "clients-rebalance-seconds",
    "clients-disruption-seconds",
    "clients-unowned-partition-seconds",
}
#: Small runs: two consumers, few records (the machine running the tests has two cores).
SMALL: dict[str, Any] = {"consumers": 2, "partitions": 4, "rate": 50.0, "gap": 0.5}


def _workload() -> Any:
    return get_plugin_manager().workload("real-clients")


def _seed_with(action: str, **params: Any) -> int:
    """A seed whose schedule starts with ``action``."""
    resolved = {**_workload().defaults, **SMALL, **params}
    return next(
        s for s in range(100) if _workload().generate(resolved, s).events[0].action == action
    )


# -- without processes -----------------------------------------------------------------------------


def test_registered_with_client_assignor_strategies_and_its_metrics() -> None:
    manager = get_plugin_manager()
    workload = _workload()
    assert workload.kind == CLIENTS_KIND
    strategies = workload.strategies(manager)
    assert {s.split("/")[0] for s in strategies} == {"kafka-python", "aiokafka", "confluent-kafka"}
    assert {"kafka-python/coordkit-sticky", "confluent-kafka/cooperative-sticky"} <= set(strategies)
    # The consumer protocol with every registered server assignor, coordkit's own included.
    consumer = {s for s in strategies if "/consumer-" in s and "@" not in s}
    assert consumer == {f"confluent-kafka/consumer-{n}" for n in manager.server_assignor_names()}
    assert {"uniform", "range", "rack-aware", "sticky"} <= set(manager.server_assignor_names())
    assert set(KAFKA_STRATEGIES) <= set(strategies)
    assert len(strategies) == len(set(strategies))
    assert {r.name for r in manager.metrics if CLIENTS_KIND in r.value.kinds} == METRICS
    assert manager.metric("records-lost").better == "lower"
    assert manager.metric("revocations").better == "lower"


def test_a_strategy_names_client_protocol_assignor_and_broker() -> None:
    assert parse_strategy("kafka-python/coordkit-sticky") == Strategy(
        "kafka-python", "coordkit-sticky", "classic", "coordkit"
    )
    assert parse_strategy("confluent-kafka/consumer-rack-aware") == Strategy(
        "confluent-kafka", "rack-aware", "consumer", "coordkit"
    )
    assert parse_strategy("confluent-kafka/consumer-uniform@kafka") == Strategy(
        "confluent-kafka", "uniform", "consumer", "kafka"
    )
    assert parse_strategy("confluent-kafka/cooperative-sticky@kafka") == Strategy(
        "confluent-kafka", "cooperative-sticky", "classic", "kafka"
    )
    # Kafka ships no rack-aware server assignor: no such reference row.
    assert KAFKA_SERVER_ASSIGNORS == ("uniform", "range")
    for wrong in ("confluent-kafka/consumer-rack-aware@kafka", "kafka-python/consumer-range"):
        with pytest.raises(LabError, match=f"has no strategy {wrong!r}; its strategies: "):
            parse_strategy(wrong)
    assert all(parse_strategy(s).protocol == "classic" for s in CLASSIC_STRATEGIES)


def test_the_kafka_rows_run_the_version_the_fixtures_fetch() -> None:
    from coordkit.testing.servers import KAFKA_KRAFT_VERSION

    assert KAFKA_VERSION == KAFKA_KRAFT_VERSION


def test_missing_kafka_jars_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COORDKIT_KAFKA_HOME", str(tmp_path))
    with pytest.raises(
        MissingDependencyError, match=r"is missing\); run: bash kafka-dist/fetch.sh"
    ):
        next(_workload().simulate(SMALL, 1, "confluent-kafka/consumer-range@kafka"))


def test_schedule_repeats_with_the_seed_and_respects_the_group() -> None:
    workload = _workload()
    params = {
        **workload.defaults, "events": 30, "consumers": 2, "partitions": 3,
        "broker_failures": False,
    }  # fmt: skip
    first = workload.generate(params, 7)
    assert first == workload.generate(params, 7)
    assert first != workload.generate(params, 8)
    live = 2
    for event in first.events:
        assert event.action in {"join", "crash", "restart"}  # no broker failure: turned off
        assert event.action != "crash" or live > 1
        assert event.action != "join" or live < 3
        live += {"join": 1, "crash": -1}.get(event.action, 0)
    assert workload.defaults["broker_failures"] is True
    with_failures = workload.generate({**params, "broker_failures": True, "brokers": 3}, 7)
    failures = [e for e in with_failures.events if e.action == "broker-failure"]
    assert len(failures) == 1  # at most brokers - 2: every partition keeps a replica


def test_bad_parameters_and_strategies_are_refused_in_one_line() -> None:
    workload = _workload()
    with pytest.raises(LabError, match=r"consumers=9 \(needs 1\.\.partitions\)"):
        workload.generate({**workload.defaults, "consumers": 9, "partitions": 4}, 1)
    with pytest.raises(LabError, match=r"brokers=1 \(needs >= 2\)"):
        workload.generate({**workload.defaults, "brokers": 1}, 1)
    with pytest.raises(LabError, match="has no strategy 'kafka-python/nope'; its strategies: "):
        next(workload.simulate(SMALL, 1, "kafka-python/nope"))


def test_a_missing_client_library_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def without_confluent(name: str, *args: Any) -> Any:
        return None if name == "confluent_kafka" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_confluent)
    with pytest.raises(MissingDependencyError, match="pip install 'confluent-kafka'"):
        next(_workload().simulate(SMALL, 1, "confluent-kafka/range"))


def test_the_logs_give_rebalance_time_unowned_time_duplicates_losses_and_latency() -> None:
    """Two consumers own partitions 0-1 and 2-3; at t=10 consumer b is killed; at t=14 a takes
    2-3 and reads record 5 again (b had not committed it); record 7 is acknowledged but never
    read."""
    a = ConsumerLog(
        "a",
        (
            "assigned 1.0 0,1",
            "r 2.0 0 0 1 1.5",
            "assigned 14.0 2,3",
            "r 14.2 2 0 5 8.0",
            "r 15.0 1 0 6 14.9",
        ),
        started=0.5,
        ended=None,
    )
    b = ConsumerLog(
        "b",
        ("assigned 1.2 2,3", "r 8.1 2 0 5 8.0"),
        started=0.5,
        ended=10.0,
    )
    producer = ["a 1 0 0 1.5", "a 5 2 0 8.0", "a 6 1 0 14.9", "a 7 3 0 15.5", "failed 8"]
    events = [RunEvent(0.5, "start", "initial"), RunEvent(10.0, "b killed", "crash")]
    initial, crash = steps(
        strategy="test/strategy",
        partitions=4,
        consumers=[a, b],
        producer=producer,
        events=events,
        start=0.5,
        end=20.0,
    )
    assert crash.rebalance_seconds == crash.disruption_seconds == pytest.approx(4.0)
    assert crash.unowned_seconds == pytest.approx(8.0)  # partitions 2 and 3, 4 s each
    assert (crash.consumed_twice, crash.sent, crash.lost, crash.members) == (1, 2, 1, 1)
    assert crash.revocations == 0  # a SIGKILL gives nothing up: its partitions are orphaned
    assert crash.owned_at_end == initial.owned_at_end == 4
    assert crash.latency_ms(0.5) == pytest.approx(100.0, abs=1e-3)  # record 6 only: 14.9 → 15.0
    assert initial.rebalance_seconds == pytest.approx(0.7)  # 2-3 owned from 1.2
    assert (initial.consumed_twice, initial.sent, initial.lost, initial.members) == (0, 2, 0, 2)
    manager = get_plugin_manager()
    assert manager.metric("clients-rebalance-seconds").compute(initial) is None  # start-up
    assert manager.metric("records-lost").compute(crash) == 1.0


def test_a_join_counts_rebalance_from_the_event_and_disruption_from_the_revocation() -> None:
    """Consumer b starts at t=10 and needs 3 s to come up; a revokes everything at 13 (eager),
    gets 0 back at 13.4, b gets 1 at 13.5."""
    a = ConsumerLog(
        "a",
        ("assigned 1.0 0,1", "revoked 13.0 0,1", "assigned 13.4 0"),
        started=0.5,
        ended=None,
    )
    b = ConsumerLog("b", ("assigned 13.5 1",), started=10.0, ended=None)
    events = [RunEvent(0.5, "start", "initial"), RunEvent(10.0, "b joins", "join")]
    _, join = steps(
        strategy="test/strategy",
        partitions=2,
        consumers=[a, b],
        producer=[],
        events=events,
        start=0.5,
        end=20.0,
    )
    assert join.rebalance_seconds == pytest.approx(3.5)
    assert join.disruption_seconds == pytest.approx(0.5)
    assert join.unowned_seconds == pytest.approx(0.4 + 0.5)
    assert join.members == 2
    assert join.revocations == 2  # eager: a revoked both, got one back
    assert join.owned_at_end == 2
    assert get_plugin_manager().metric("revocations").compute(join) == 2.0
    assert join.latency_ms(0.5) is None  # nothing sent: the latency metrics skip the step


# -- with processes ----------------------------------------------------------------------------------


def _metrics_by_step(rows: list[tuple[Any, ...]]) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for row in rows:
        out.setdefault(row[7], {})[row[12]] = row[13]
    return out


def _check_sane(by_step: dict[int, dict[str, float]], events: int) -> None:
    assert sorted(by_step) == list(range(events + 1))
    for index, values in by_step.items():
        expected = METRICS if index else METRICS - AFTER_EVENTS_ONLY
        assert set(values) == expected, values
        assert values["records-lost"] == 0
        assert values["records-consumed-twice"] >= 0
        assert 0 < values["latency-p50-ms"] <= values["latency-p99-ms"] < math.inf
        if index:
            assert values["clients-rebalance-seconds"] >= 0
            assert values["clients-unowned-partition-seconds"] >= 0
            assert 0 <= values["clients-disruption-seconds"] <= values["clients-rebalance-seconds"]


@pytest.mark.timeout(600)
def test_a_short_run_through_the_lab_runner_gives_every_metric_and_loses_nothing() -> None:
    """confluent-kafka with librdkafka's cooperative-sticky: a consumer joins."""
    seed = _seed_with("join", events=1)
    params = json.dumps({**SMALL, "events": 1})
    spec = ScenarioSpec(
        "c1", "real-clients", CLIENTS_KIND, "confluent-kafka/cooperative-sticky", params, seed, 0, 1
    )
    rows = run_scenario(spec)
    assert all(row[12] != "error" for row in rows), rows[0][8]
    by_step = _metrics_by_step(rows)
    _check_sane(by_step, events=1)
    assert {row[10] for row in rows if row[7] == 1} == {3}  # three consumers after the join


def _seed_covering(actions: set[str], **params: Any) -> int:
    """The first seed whose schedule has every one of ``actions``."""
    resolved = {**_workload().defaults, **SMALL, **params}
    return next(
        s
        for s in range(1000)
        if actions <= {e.action for e in _workload().generate(resolved, s).events}
    )


def _run_and_check(strategy: str, seed: int, **params: Any) -> list[ClientStep]:
    """Run ``strategy`` on a small group; every window's metrics are there and sane, nothing
    acknowledged is lost and every partition is owned when each window ends."""
    manager = get_plugin_manager()
    run = list(_workload().simulate({**SMALL, **params}, seed, strategy, manager))
    where = f"{strategy}, seed {seed}, {params}: "
    metrics = [r.value for r in manager.metrics if CLIENTS_KIND in r.value.kinds]
    by_step = {
        step.index: {m.name: value for m in metrics if (value := m.compute(step)) is not None}
        for step in run
    }
    try:
        _check_sane(by_step, events=int(params["events"]))
    except AssertionError as exc:
        raise AssertionError(where + str(exc)) from None
    for step in run:
        assert step.owned_at_end == step.partitions, where + f"window {step.index}: {step}"
        assert step.lost == 0, where + f"window {step.index}: {step}"
        assert step.sent > 0, where + f"window {step.index}: {step}"
    return run


@pytest.mark.timeout(600)
def test_the_consumer_protocol_with_a_server_assignor_rebalances_without_losing_records() -> None:
    """confluent-kafka with group.protocol=consumer, coordkit's rack-aware server assignor (one
    Kafka lacks) chosen by group.remote.assignor: a SIGKILL, a join and a restart."""
    seed = _seed_covering({"crash", "join", "restart"}, events=3, broker_failures=False)
    run = _run_and_check(
        "confluent-kafka/consumer-rack-aware", seed, events=3, broker_failures=False
    )
    where = f"seed {seed}: "
    crash = next(s for s in run if s.event_kind == "crash")
    assert crash.unowned_seconds > 0, where + str(crash)  # until the broker's session timeout
    assert crash.revocations == 0, where + str(crash)
    # Incremental: a join moves some partitions to the newcomer, not all of everyone's.
    join = next(s for s in run if s.event_kind == "join")
    assert 0 < join.revocations < join.partitions, where + str(join)
    assert run[-1].members == run[0].members


@pytest.mark.timeout(900)
def test_the_kafka_reference_row_runs_the_same_schedule_on_kafka_with_a_broker_crash() -> None:
    """confluent-kafka/consumer-range@kafka: the same run with Apache Kafka 4.4 (KRaft, small
    JVMs) as the brokers and Kafka's own range server assignor: a SIGKILLed consumer, a join, a
    broker's JVM SIGKILLed."""
    seed = _seed_covering({"crash", "join", "broker-failure"}, events=3, brokers=3)
    run = _run_and_check("confluent-kafka/consumer-range@kafka", seed, events=3, brokers=3)
    assert [s.event_kind for s in run[1:]] == [
        e.action
        for e in _workload().generate({**_workload().defaults, **SMALL, "events": 3}, seed).events
    ]
    failure = next(s for s in run if s.event_kind == "broker-failure")
    assert "crashes" in failure.event


def _processes_marked(mark: str) -> list[int]:
    """Processes whose environment carries ``COORDKIT_TEST_MARK=mark`` (Linux /proc)."""
    found = []
    needle = f"COORDKIT_TEST_MARK={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().split(") ", 1)[1][:1]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


def _wait_gone(mark: str, seconds: float = 120) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := _processes_marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def _spec(**changes: Any) -> RunSpec:
    base = RunSpec(
        client="kafka-python",
        assignor="range",
        brokers=2,
        partitions=2,
        replication_factor=2,
        consumers=1,
        rate=20.0,
        session_ms=4000,
        gap=0.5,
        events=(),
    )
    return attrs.evolve(base, **changes)


@pytest.mark.timeout(600)
def test_a_failing_consumer_fails_the_run_in_one_error_and_leaves_no_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mark = uuid.uuid4().hex
    monkeypatch.setenv("COORDKIT_TEST_MARK", mark)
    with pytest.raises(LabError, match=r"consumer-0 \(kafka-python/nope\) exited with status 1"):
        run_clients(_spec(assignor="nope"), "kafka-python/nope")
    assert _wait_gone(mark, 5) == []


@pytest.mark.timeout(600)
def test_no_process_outlives_a_killed_workload(tmp_path: Path) -> None:
    """The process running the workload dies (SIGKILL): brokers, producer and consumers end."""
    mark = uuid.uuid4().hex
    script = textwrap.dedent(
        """
        from coordkit_assignors.lab.clients.run import ClientEvent, RunSpec, run_clients
        spec = RunSpec(client="kafka-python", assignor="range", brokers=2, partitions=2,
                       replication_factor=2, consumers=2, rate=20.0, session_ms=4000, gap=60.0,
                       events=(ClientEvent("join", 0),))
        run_clients(spec, "kafka-python/range")
        """
    )
    runner = subprocess.Popen(
        [sys.executable, "-c", script], env=dict(os.environ, COORDKIT_TEST_MARK=mark)
    )
    try:
        deadline = time.monotonic() + 300
        # The workload, its brokers, producer and two consumers.
        while len(_processes_marked(mark)) < 5:
            assert runner.poll() is None, "the workload ended before its processes started"
            assert time.monotonic() < deadline, "the workload's processes did not start"
            time.sleep(0.5)
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(30)
    assert _wait_gone(mark) == []


@pytest.mark.lab_process
@pytest.mark.timeout(900)
@pytest.mark.parametrize("strategy", ["kafka-python/range", "kafka-python/coordkit-sticky"])
def test_a_killed_consumer_leaves_its_partitions_unowned_until_the_group_rebalances(
    strategy: str,
) -> None:
    seed = _seed_with("crash", events=1)
    steps_run: list[ClientStep] = list(
        _workload().simulate({**SMALL, "events": 1}, seed, strategy, get_plugin_manager())
    )
    initial, crash = steps_run
    assert crash.event_kind == "crash"
    assert "SIGKILL" in crash.event
    assert crash.members == initial.members - 1
    # Its partitions had no consuming owner until the coordinator noticed (session timeout).
    assert crash.rebalance_seconds > 0
    assert crash.unowned_seconds > 0
    assert crash.lost == initial.lost == 0
    assert crash.sent > 0
    assert len(crash.latencies) == crash.sent


@pytest.mark.lab_process
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "strategy", ["confluent-kafka/range", "aiokafka/coordkit-sticky", "kafka-python/range"]
)
def test_a_broker_crash_loses_no_acknowledged_record(strategy: str) -> None:
    """A broker crashes under the group (leaders and maybe the coordinator move): every
    acknowledged record is still read (kafka-python validates its positions with the new leader
    through OffsetForLeaderEpoch)."""
    params = {**SMALL, "events": 1, "brokers": 3, "broker_failures": True}
    seed = _seed_with("broker-failure", **params)
    initial, failure = _workload().simulate(params, seed, strategy, get_plugin_manager())
    assert failure.event_kind == "broker-failure"
    assert failure.sent > 0
    assert failure.lost == initial.lost == 0


@pytest.mark.lab_process
@pytest.mark.timeout(600)
@pytest.mark.parametrize("assignor", get_plugin_manager().server_assignor_names())
def test_every_server_assignor_keeps_the_group_consuming(assignor: str) -> None:
    seed = _seed_covering({"crash", "join"}, events=2, broker_failures=False)
    _run_and_check(f"confluent-kafka/consumer-{assignor}", seed, events=2, broker_failures=False)


@pytest.mark.lab_process
@pytest.mark.timeout(1800)
def test_the_documented_command_compares_coordkit_and_kafka(tmp_path: Path) -> None:
    """The command of docs/lab.md's real-clients section, as written, in a process of its own
    (the Kafka jars are found from coordkit's editable install)."""
    block = code_block(page("lab.md"), "Real clients: the consumer protocol and Kafka", "sh")
    [line] = [x for x in block.text.splitlines() if x.startswith("coordkit lab run")]
    words = shlex.split(line)
    done = subprocess.run(
        [sys.executable, "-m", "coordkit_lab", *words[2:]],
        capture_output=True,
        text=True,
        timeout=1700,
        check=False,
        cwd=tmp_path,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / words[words.index("--out") + 1]
    summary = json.loads((out / "summary.json").read_text())
    strategies = set(summary["run"]["strategies"])
    assert any(s.endswith("@kafka") for s in strategies), strategies
    assert any("/consumer-" in s and "@" not in s for s in strategies), strategies


@pytest.mark.lab_process
@pytest.mark.timeout(900)
def test_lab_run_clients_preset_on_spark(tmp_path: Path) -> None:
    """``coordkit lab run --preset clients`` for one strategy, end to end in its own process."""
    out = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordkit_lab",
            "run",
            "--preset",
            "clients",
            "-s",
            "confluent-kafka/range",
            "--replicates",
            "1",
            "--master",
            "local[1]",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=850,
        check=False,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["strategies"] == ["confluent-kafka/range"]


def test_clients_preset_lists_every_strategy() -> None:
    manager = get_plugin_manager()
    specs = expand(get_preset("clients"), manager)
    assert {s.workload for s in specs} == {"real-clients"}
    assert {s.strategy for s in specs} == set(all_strategies(manager))
    assert {s.strategy for s in specs} >= set(KAFKA_STRATEGIES)
