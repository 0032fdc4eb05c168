"""A separately packaged plugin, installed into this environment, is found through the entry point
group exactly as the built-ins are."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PLUGIN_DIR = Path(__file__).resolve().parents[2] / "contrib" / "example-plugin"
DIST = "coordkit-rendezvous"


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
        f"installing the example plugin failed:\n{result.stdout}\n{result.stderr}"
    )
    yield
    _pip("uninstall", "-y", DIST)


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_coordkit_plugins_lists_the_third_party_plugin(installed_plugin: None) -> None:
    out = _run("from coordkit.cli import main; main(['plugins', '--format', 'json'])")
    plugins = {p["name"]: p for p in json.loads(out)}
    assert plugins["rendezvous"]["distribution"] == DIST
    assert plugins["rendezvous"]["version"] == "0.1.0"
    assert plugins["rendezvous"]["builtin"] is False
    assert plugins["rendezvous"]["registered"] == {"assignor": ["rendezvous"]}
    assert plugins["memory"]["registered"]["store scheme"] == ["memory"]


def test_manager_finds_and_runs_the_plugin_assignor(installed_plugin: None) -> None:
    out = _run(
        "import json\n"
        "from coordkit.plugins import get_plugin_manager\n"
        "from coordkit.strategies.assignment import GroupSubscription, MemberSubscription\n"
        "a = get_plugin_manager().assignor('rendezvous')\n"
        "g = GroupSubscription({'t': 12}, {m: MemberSubscription(['t']) for m in ('c1','c2','c3')})\n"
        "first = a.assign(g)\n"
        "g2 = GroupSubscription({'t': 12}, {m: MemberSubscription(['t']) for m in ('c1','c2')})\n"
        "second = a.assign(g2)\n"
        "print(json.dumps([first.as_strings(), second.as_strings()]))\n"
    )
    first, second = json.loads(out)
    assert sorted(p for ps in first.values() for p in ps) == sorted(f"t-{i}" for i in range(12))
    # Rendezvous hashing: members that stay keep every partition they had.
    for member in ("c1", "c2"):
        assert set(first[member]) <= set(second[member])


def test_disabling_the_plugin_by_name_hides_it(installed_plugin: None) -> None:
    out = _run(
        "import os; os.environ['COORDKIT_DISABLE_PLUGINS'] = 'rendezvous'\n"
        "from coordkit.plugins import get_plugin_manager\n"
        "print(get_plugin_manager().assignors.names())\n"
    )
    assert "rendezvous" not in out
