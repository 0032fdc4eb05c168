"""`bash run test` runs tox's default list as two lanes side by side, then a third alone (tox.ini's
labels): every default env in exactly one lane, and no lane naming an env outside the default
list. An env added to env_list but to no lane would silently leave CI."""

from __future__ import annotations

import configparser
import itertools
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _expand(item: str) -> list[str]:
    """tox's generative names: ``py311-lowest-{unit,contract}`` -> the two names."""
    parts = re.split(r"\{([^}]*)\}", item)
    choices = [[part] if index % 2 == 0 else part.split(",") for index, part in enumerate(parts)]
    return ["".join(pieces).strip() for pieces in itertools.product(*choices)]


def _names(value: str) -> list[str]:
    items = [
        item.strip() for line in value.splitlines() for item in re.split(r",(?![^{]*\})", line)
    ]
    return [name for item in items if item and not item.startswith("#") for name in _expand(item)]


def _tox() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "tox.ini")
    return parser


def _lanes() -> dict[str, list[str]]:
    lanes = {}
    for line in _tox()["tox"]["labels"].strip().splitlines():
        label, _, envs = line.partition("=")
        lanes[label.strip()] = _names(envs)
    return lanes


def test_the_lanes_are_exactly_the_default_list() -> None:
    default = _names(_tox()["tox"]["env_list"])
    lanes = _lanes()
    assert set(lanes) == {"compute", "services", "alone"}
    laned = [env for envs in lanes.values() for env in envs]
    assert sorted(laned) == sorted(set(laned)), "an env is in both lanes"
    assert set(laned) == set(default), (
        f"not in a lane: {sorted(set(default) - set(laned))}; "
        f"in a lane but not in env_list: {sorted(set(laned) - set(default))}"
    )


def test_run_test_runs_every_lane() -> None:
    run = (ROOT / "run").read_text()
    assert re.search(r"^\s*run_lanes compute services \|\| status=1$", run, re.M)
    assert re.search(r"^\s*\"\$VENV/bin/tox\" run -m alone ", run, re.M)
    assert re.search(r"^\s*\) \|\| alone_status=1$", run, re.M)
    assert re.search(r"^\s*recap compute services alone$", run, re.M)


def test_the_recap_names_each_failed_lane_and_what_failed_in_it(tmp_path: Path) -> None:
    # A CI log may keep only the tail of the interleaved lanes: the recap at the end must say which
    # lane failed and which tests and envs, and call a lane that passed passed.
    lanes = tmp_path / ".tox"
    lanes.mkdir()
    (lanes / "lane-compute.log").write_text("  lint: OK (1.0 seconds)\n  congratulations :)\n")
    (lanes / "lane-compute.status").write_text("0\n")
    (lanes / "lane-services.log").write_text(
        "tests/engine/test_x.py ..F\n"
        "FAILED tests/engine/test_x.py::test_y[redis] - AssertionError: late\n"
        "  py311-contract-redis: OK (9.0 seconds)\n"
        "  py311-engine: FAIL code 1 (337.0 seconds)\n"
        "  evaluation failed :( (1066.0 seconds)\n"
    )
    (lanes / "lane-services.status").write_text("1\n")
    script = "source <(sed '/^case /,$d' " + str(ROOT / "run") + ") && cd " + str(tmp_path)
    done = subprocess.run(
        ["bash", "-c", script + " && recap compute services alone"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stderr.splitlines()
    assert any(line.endswith("lane compute passed") for line in lines)
    assert any("lane services FAILED" in line for line in lines)
    assert (
        "  [services] FAILED tests/engine/test_x.py::test_y[redis] - AssertionError: late" in lines
    )
    assert "  [services]   py311-engine: FAIL code 1 (337.0 seconds)" in lines
    assert not any("py311-contract-redis" in line for line in lines)
    # No status file: the lane did not finish (or never ran), which is not a pass.
    assert any("lane alone FAILED" in line for line in lines)


def test_expand() -> None:
    assert _names("a\n    py311-lowest-{unit,contract,lab}\n    b") == [
        "a",
        "py311-lowest-unit",
        "py311-lowest-contract",
        "py311-lowest-lab",
        "b",
    ]
