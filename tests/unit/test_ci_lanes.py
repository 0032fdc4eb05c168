"""`bash run test` runs tox's default list as two lanes side by side, then a third alone (tox.ini's
labels): every default env in exactly one lane, and no lane naming an env outside the default
list. An env added to env_list but to no lane would silently leave CI."""

from __future__ import annotations

import configparser
import itertools
import re
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
    assert re.search(r"^\s*\"\$VENV/bin/tox\" run -m alone .*\|\| status=1$", run, re.M)


def test_expand() -> None:
    assert _names("a\n    py311-lowest-{unit,contract,lab}\n    b") == [
        "a",
        "py311-lowest-unit",
        "py311-lowest-contract",
        "py311-lowest-lab",
        "b",
    ]
