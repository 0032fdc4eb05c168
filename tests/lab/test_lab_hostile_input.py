"""Issue 12 in the lab: ``coordkit lab run`` and ``lab show`` on hostile input, and their tables
on an 80- and a 120-column terminal.

Each test's docstring quotes the issue's example.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from coordkit.cli import cli
from coordkit_lab.analysis import fmt, key_metrics, means

WIDTHS = (80, 120)


def invoke(*args: str, columns: int = 120) -> Result:
    return CliRunner().invoke(cli, ["lab", *args], env={"COLUMNS": str(columns)})


def refusal(result: Result, *names: str) -> str:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    for name in names:
        assert name in result.output, (name, result.output)
    return result.output


def tree(directory: Path) -> list[tuple[str, int]]:
    return sorted(
        (str(path.relative_to(directory)), path.stat().st_size) for path in directory.rglob("*")
    )


def test_run_refuses_an_out_directory_under_a_file(tmp_path: Path) -> None:
    """Issue 12: `coordkit lab run --out afile/sub` (`NotADirectoryError`): refused before
    Spark starts, naming --out, and nothing written."""
    (tmp_path / "afile").write_text("keep me")
    before = tree(tmp_path)
    output = refusal(
        invoke("run", "-w", "zipf-load", "-s", "range", "--out", str(tmp_path / "afile" / "sub")),
        "--out",
        f"{tmp_path / 'afile'} is a file, not a directory",
    )
    assert "Spark" not in output
    assert tree(tmp_path) == before


def test_run_refuses_an_out_directory_that_cannot_be_made(tmp_path: Path) -> None:
    """Issue 12: `coordkit lab run --out /proc/x` (`FileNotFoundError`)."""
    refusal(
        invoke("run", "-w", "zipf-load", "-s", "range", "--out", "/proc/x"),
        "--out",
        "/proc/x: cannot create a directory in /proc",
    )
    assert not Path("/proc/x").exists()


def test_show_refuses_a_deeply_nested_summary(tmp_path: Path) -> None:
    """Issue 12: `coordkit lab show` on a deeply nested `summary.json`."""
    (tmp_path / "summary.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    result = invoke("show", str(tmp_path))
    refusal(result)
    assert result.stderr.splitlines() == [
        f"error: {tmp_path / 'summary.json'}: not a lab summary (nested deeper than 64 levels)"
    ]


def test_show_names_the_field_of_a_malformed_summary(tmp_path: Path, lab_run: Any) -> None:
    """Issue 12 (`lab show`): a summary whose rows have the wrong shape names the field."""
    data = json.loads((lab_run.out / "summary.json").read_text())
    data["tables"]["summary"][3]["mean"] = "fast"
    (tmp_path / "summary.json").write_text(json.dumps(data))
    result = invoke("show", str(tmp_path))
    refusal(result, "tables.summary[3].mean: expected a number or null, got a string")


def test_show_prints_names_from_the_summary_as_they_are(tmp_path: Path, lab_run: Any) -> None:
    """Issue 12: names from a report reach the terminal with escape sequences made visible and
    never read as markup."""
    text = (lab_run.out / "summary.json").read_text()
    text = text.replace('"weighted-sticky"', json.dumps("[bold red]w\x1b]0;pwn\x07"))
    (tmp_path / "summary.json").write_text(text)
    result = invoke("show", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "[bold red]w\\x1b]0;pwn\\x07" in result.output
    assert "\x1b" not in result.output


@pytest.mark.parametrize("width", WIDTHS)
def test_show_keeps_every_number_and_strategy_name_whole(width: int, lab_run: Any) -> None:
    """Issue 12: every table (`lab run`, `lab show`, ...) is readable at 80 columns: today
    numbers are cut (`101.…`) and strategy names too (`coope…`), even at 120."""
    result = invoke("show", str(lab_run.out), columns=width)
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    data = json.loads((lab_run.out / "summary.json").read_text())
    by_workload = means(data)
    shown = 0
    for workload, per_metric in by_workload.items():
        assert workload in result.output
        for metric in key_metrics(data):
            for strategy, value in per_metric.get(metric, {}).items():
                assert strategy in result.output
                number = fmt(value, data["metrics"][metric]["unit"])
                assert re.search(rf"(?<![0-9.]){re.escape(number)}(?![0-9])", result.output), (
                    number,
                    result.output,
                )
                shown += 1
    assert shown > 20
    for line in result.output.splitlines():
        assert len(line) <= width, line


def test_a_master_spark_refuses_is_named_for_what_it_is(tmp_path: Path) -> None:
    """Issue 12: `coordkit lab run --master nonsense://x` says `Spark needs Java 17 or later`
    with Java 17 installed: say what Spark actually refused."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordkit_lab",
            "run",
            "-w",
            "zipf-load",
            "-s",
            "range",
            "--master",
            "nonsense://x",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(
        "error: Spark did not start on master nonsense://x: Spark refused it:"
    )
    assert "nonsense://x" in errors[0] or "Master" in errors[0]
    assert "Java 17" not in done.stderr
