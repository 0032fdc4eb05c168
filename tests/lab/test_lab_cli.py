"""``coordkit lab list | run | show | package``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest

from coordkit.cli import main

BLOCK_PYSPARK = textwrap.dedent(
    """
    import sys
    class _Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {"pyspark", "pandas", "matplotlib", "pyarrow"}:
                raise ImportError(f"No module named {name!r} (blocked for this test)")
            return None
    sys.meta_path.insert(0, _Blocker())
    from coordkit.cli import main
    """
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def python(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_list_shows_workloads_metrics_strategies_presets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "lab", "list")
    assert code == 0
    for name in (
        "kafka-grid",
        "churn",
        "zipf-load",
        "load_balance",
        "moved_min",
        "cooperative-sticky",
        "quick",
        "full",
    ):
        assert name in out, name


def test_list_works_without_spark_and_run_names_the_extra() -> None:
    listing = python(BLOCK_PYSPARK + "main(['lab', 'list'])")
    assert listing.returncode == 0, listing.stderr
    assert "kafka-grid" in listing.stdout
    running = python(BLOCK_PYSPARK + "main(['lab', 'run'])")
    assert running.returncode == 2
    assert "pip install coordkit[spark]" in running.stderr


def test_run_rejects_unknown_names_before_starting_spark(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "lab", "run", "--strategies", "range,nosuch")
    assert code == 2
    assert "unknown strategy 'nosuch'; available:" in err
    assert "roundrobin" in err
    code, _, err = run(capsys, "lab", "run", "-w", "nosuch")
    assert code == 2
    assert "unknown workload 'nosuch'" in err


def test_show_prints_a_past_run(capsys: pytest.CaptureFixture[str], lab_run: Any) -> None:
    code, out, _ = run(capsys, "lab", "show", str(lab_run.out))
    assert code == 0
    assert "zipf-load" in out
    assert "weighted-sticky" in out
    assert "Which balances load best?" in out
    assert str(lab_run.out / "index.html") in out.replace("\n", "")


def test_show_says_a_report_of_an_older_lab_is_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lab_run: Any
) -> None:
    """Format 1 (before intervals and trade-offs): one line naming the format, exit 2."""
    data = json.loads((lab_run.out / "summary.json").read_text())
    data["format"] = 1
    del data["analysis"]
    (tmp_path / "summary.json").write_text(json.dumps(data))
    code, out, err = run(capsys, "lab", "show", str(tmp_path))
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        f"error: {tmp_path / 'summary.json'}: format: 1 is a report of an older coordkit lab "
        "(no intervals or trade-offs); run `coordkit lab run` again to get one this version reads"
    ]


def test_show_names_a_wrong_field_of_the_analysis(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lab_run: Any
) -> None:
    data = json.loads((lab_run.out / "summary.json").read_text())
    data["analysis"]["verdicts"][1]["strategies"][0] = 7
    (tmp_path / "summary.json").write_text(json.dumps(data))
    code, _, err = run(capsys, "lab", "show", str(tmp_path))
    assert code == 2
    assert "analysis.verdicts[1].strategies[0]: expected a string, got a number" in err
    data["analysis"]["verdicts"][1]["strategies"][0] = "range"
    data["analysis"]["pareto"][0]["dimensions"].append("nosuch")
    (tmp_path / "summary.json").write_text(json.dumps(data))
    code, _, err = run(capsys, "lab", "show", str(tmp_path))
    assert code == 2
    assert "analysis.pareto[0].dimensions[" in err
    assert "'nosuch' is not described under metrics" in err


def test_show_prints_intervals_ties_and_tradeoffs(
    capsys: pytest.CaptureFixture[str], lab_run: Any
) -> None:
    code, out, _ = run(capsys, "lab", "show", str(lab_run.out))
    assert code == 0
    assert re.search(r"\d ±\d", out)  # a mean with half its interval
    assert "(tied; best or tied on" in out
    assert "Trade-offs on zipf-load" in out
    assert "only among strategies that balance" in out
    assert "Which scales best?" in out


def test_show_explains_a_directory_without_a_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "lab", "show", str(tmp_path))
    assert code == 2
    assert "no summary.json here" in err


def test_package_zips_importable_code(tmp_path: Path) -> None:
    archive = tmp_path / "coordkit.zip"
    done = python(
        "from coordkit.cli import main; main(['lab', 'package', sys.argv[1]])".replace(
            "main(", "import sys; main(", 1
        ),
        str(archive),
    )
    assert done.returncode == 0, done.stderr
    names = zipfile.ZipFile(archive).namelist()
    assert "coordkit/plugins.py" in names
    assert "coordkit_lab/spark/execution.py" in names
    assert "coordkit_assignors/lab/simulation.py" in names
    assert "coordkit_assignors/range.py" in names
    probe = python(
        "import sys; sys.path.insert(0, sys.argv[1]); import coordkit_lab.runner, coordkit_assignors;"
        "print(coordkit_lab.runner.__file__); print(coordkit_assignors.__file__)",
        str(archive),
    )
    assert probe.returncode == 0, probe.stderr
    assert all(line.startswith(str(archive)) for line in probe.stdout.split())


def test_run_end_to_end(tmp_path: Path) -> None:
    """The main command in its own process (its own Spark), on a tiny selection."""
    out = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordkit_lab",
            "run",
            "--workloads",
            "single-partition-topics",
            "--strategies",
            "range",
            "-s",
            "roundrobin",
            "--master",
            "local[1]",
            "--out",
            str(out),
            "--seed",
            "7",
        ],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"Report: {out / 'index.html'}" in done.stdout.replace("\n", "")
    assert "Which balances partition counts best? roundrobin" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["seed"] == 7
    assert summary["run"]["master"] == "local[1]"
    assert summary["run"]["strategies"] == ["range", "roundrobin"]
    assert "Setting default log level" not in done.stdout + done.stderr  # JVM chatter → spark.log


def test_a_spark_that_cannot_start_says_why(tmp_path: Path) -> None:
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java")}
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
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 2
    assert "Spark did not start on master local[*]" in done.stderr
    assert "Java 17" in done.stderr
    assert "no-java/bin/java" in done.stderr  # the end of spark.log, where the JVM's error went
