"""The vs_kafka benchmark's command line for issue #34's process cases (the cases themselves are
benchmarks, run by ``python tests/benchmarks/run.py vs_kafka --case=processes-...``)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def vs_kafka() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import vs_kafka

        return vs_kafka
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_process_cases_are_offered(vs_kafka: ModuleType) -> None:
    assert {"processes-produce", "processes-failover", "processes-catch-up"} <= set(vs_kafka.CASES)
    args = vs_kafka.parse_args(["--case=processes-catch-up"])
    assert args.case == ["processes-catch-up"]
    assert (args.catch_up_records, args.producers, args.record_size) == (1_000_000, 2, 1024)


def test_quick_and_given_sizes(vs_kafka: ModuleType) -> None:
    assert vs_kafka.parse_args(["--quick"]).catch_up_records == 20_000
    args = vs_kafka.parse_args(["--catch-up-records=5000", "--producers=4", "--record-size=100"])
    assert (args.catch_up_records, args.producers, args.record_size) == (5000, 4, 100)


def test_failover_runs_and_seed(vs_kafka: ModuleType) -> None:
    assert (vs_kafka.parse_args([]).failover_runs, vs_kafka.parse_args([]).seed) == (5, 0)
    args = vs_kafka.parse_args(["--failover-runs=9", "--seed=7"])
    assert (args.failover_runs, args.seed) == (9, 7)


@pytest.mark.parametrize(
    "flag",
    [
        "--catch-up-records=0",
        "--producers=two",
        "--record-size=-1",
        "--failover-runs=0",
        "--seed=x",
    ],
)
def test_bad_size_is_one_line_and_status_2(
    vs_kafka: ModuleType, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        vs_kafka.parse_args([flag])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert flag.split("=", maxsplit=1)[0] in err


def test_transactions_run_each_shared_store_beside_one_kafka_run(
    vs_kafka: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """coordkit's loops run once per shared store, Kafka's once, its figures beside each row."""
    transactions = vs_kafka.transactions
    opened: list[tuple[str, str]] = []

    @contextlib.contextmanager
    def cluster(side: str, _heap: str, _timeout: float, _logs: Path, store: str) -> Iterator[str]:
        opened.append((side, store))
        yield f"{side}-{store}"

    monkeypatch.setattr(transactions, "process_cluster", cluster)
    monkeypatch.setattr(transactions, "bootstrap_of", lambda found: found)
    monkeypatch.setattr(transactions, "measure_all",
                        lambda bootstrap, count: {"txn produce 1/txn": {bootstrap: float(count)}})  # fmt: skip
    args = vs_kafka.parse_args(["--case=transactions", "--quick"])
    for side in ("coordkit", "kafka"):
        rows: dict[str, dict[str, float]] = {}
        transactions.run(args, side, tmp_path, lambda name, run: rows.__setitem__(name, run()))  # noqa: B023
        if side == "coordkit":
            assert rows == {"txn produce 1/txn (zookeeper)": {"coordkit-zookeeper": 50.0},
                            "txn produce 1/txn (redis)": {"coordkit-redis": 50.0}}  # fmt: skip
        else:
            assert rows == {"txn produce 1/txn (zookeeper)": {"kafka-zookeeper": 50.0},
                            "txn produce 1/txn (redis)": {"kafka-zookeeper": 50.0}}  # fmt: skip
    assert opened == [("coordkit", "zookeeper"), ("coordkit", "redis"), ("kafka", "zookeeper")]
    assert vs_kafka.parse_args(["--case=transactions"]).case == ["transactions"]


def test_serve_processes_refuse_an_unknown_store(vs_kafka: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no shared store 'etcd'; stores: zookeeper, redis"):
        vs_kafka.clusters.ServeProcesses(6.0, tmp_path, store="etcd")
