"""The vs_kafka benchmark's command line for issue #34's process cases (the cases themselves are
benchmarks, run by ``python tests/benchmarks/run.py vs_kafka --case=processes-...``)."""

from __future__ import annotations

import sys
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
