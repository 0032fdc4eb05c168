"""The third-party sqlite store (``contrib/coordkit-sqlite``), installed into this environment, gives
the CLI a store that outlives a process: ``coordkit group run`` in one process, ``coordkit group
describe`` in another, no server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PLUGIN_DIR = Path(__file__).resolve().parents[2] / "contrib" / "coordkit-sqlite"
DIST = "coordkit-sqlite"


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def installed_plugin() -> Iterator[None]:
    result = _pip("install", "--no-deps", str(PLUGIN_DIR))
    assert result.returncode == 0, (
        f"installing coordkit-sqlite failed:\n{result.stdout}\n{result.stderr}"
    )
    yield
    _pip("uninstall", "-y", DIST)


def _coordkit(*args: str) -> subprocess.CompletedProcess[str]:
    """``coordkit ARGS`` in a process of its own."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from coordkit.cli import main; main(sys.argv[1:])",
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_plugin_registers_the_sqlite_scheme(installed_plugin: None) -> None:
    plugins = {p["name"]: p for p in _json(_coordkit("plugins", "--format", "json"))}
    assert plugins["sqlite"]["distribution"] == DIST
    assert plugins["sqlite"]["builtin"] is False
    assert plugins["sqlite"]["registered"] == {"store scheme": ["sqlite"]}


def test_a_group_run_in_one_process_is_described_by_another(
    installed_plugin: None, tmp_path: Path
) -> None:
    url = f"sqlite://{tmp_path}/demo.db"
    run = _json(
        _coordkit(
            "group", "run", "--store", url, "--group", "demo", "--consumers", "2",
            "--step", "produce:5", "--step", "commit", "--format", "json",
        )
    )  # fmt: skip
    final = run["steps"][-1]
    assert final["state"] == "Stable"

    described = _json(
        _coordkit("group", "describe", "--store", url, "--group", "demo", "--format", "json")
    )
    metadata = described["metadata"]
    assert metadata["generation"] == final["generation"]
    assert metadata["leader"] == final["leader"]
    assert {m["member_id"]: sorted(m["assignment"]) for m in metadata["members"]} == {
        m["member_id"]: sorted(m["partitions"]) for m in final["members"]
    }
    partitions = {p for m in final["members"] for p in m["partitions"]}
    assert described["offsets"] == dict.fromkeys(partitions, 5)


def test_describing_a_missing_file_is_one_error_line_and_creates_nothing(
    installed_plugin: None, tmp_path: Path
) -> None:
    missing = tmp_path / "never-written.db"
    result = _coordkit("group", "describe", "--store", f"sqlite://{missing}", "--group", "demo")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(missing) in lines[0]
    assert "nothing was created" in lines[0]
    assert list(tmp_path.iterdir()) == []
