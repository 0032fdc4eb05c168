"""Fixtures for the lab tests: a scripted assignor, one local Spark session and one small lab run
shared by every Spark test (Spark start-up costs seconds; the machine has two cores)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from coordkit.strategies.assignment import GroupAssignment, GroupSubscription, RebalanceProtocol
from coordkit_lab.scenarios import Preset, PresetCase, ScenarioSpec, expand

CHROMIUM_HINT = "apt-get install chromium"

#: A small selection covering every fact the lab must reproduce (about 40 scenarios).
TEST_PRESET = Preset(
    "test",
    "small workloads for the test suite",
    (
        PresetCase("single-partition-topics", replicates=1),
        PresetCase("kafka-grid", {"members": (10, 40, 200), "topics": 5}, replicates=1),
        PresetCase("zipf-load", {"members": 6, "topics": 4, "partitions_per_topic": 16}),
        PresetCase(
            "churn",
            {"members": 8, "topics": 3, "partitions_per_topic": 8, "steps": 6},
            replicates=1,
        ),
    ),
    replicates=2,
)
TEST_SEED = 4242


class ScriptedAssignor:
    """Returns prepared assignments in order (``{member: ["topic-p", ...]}``), optionally with
    withheld partitions; records every group it was given.

    Like every assignor it is a function of its input: the simulation repeats a call on the same
    group to time it, and a repeat returns the same assignment without advancing the script."""

    name: ClassVar[str] = "scripted"

    def __init__(
        self,
        script: Sequence[
            Mapping[str, Sequence[str]]
            | tuple[Mapping[str, Sequence[str]], Mapping[str, Sequence[str]]]
        ],
        protocol: RebalanceProtocol = RebalanceProtocol.EAGER,
    ):
        self.script = list(script)
        self.protocols = (protocol,)
        self.seen: list[GroupSubscription] = []

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        if self.seen and self.seen[-1] is group:
            return self._last
        self.seen.append(group)
        entry = self.script[min(len(self.seen), len(self.script)) - 1]
        assigned, withheld = entry if isinstance(entry, tuple) else (entry, {})
        full = {m: list(assigned.get(m, ())) for m in group.members}
        self._last = GroupAssignment.from_partitions(group.space(), full, withheld)
        return self._last


@pytest.fixture
def scripted() -> type[ScriptedAssignor]:
    return ScriptedAssignor


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from coordkit_lab.spark import create_session

    log = tmp_path_factory.mktemp("spark") / "spark.log"
    session = create_session("local[2]", app_name="coordkit-lab-tests", log=log)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def test_specs() -> list[ScenarioSpec]:
    from coordkit.plugins import get_plugin_manager

    return expand(TEST_PRESET, get_plugin_manager(), seed=TEST_SEED)


class LabRun:
    def __init__(self, result: Any, progress: list[tuple[int, int]], out: Path):
        self.result = result
        self.progress = progress
        self.out = out


@pytest.fixture(scope="session")
def lab_run(
    spark: Any, test_specs: list[ScenarioSpec], tmp_path_factory: pytest.TempPathFactory
) -> LabRun:
    from coordkit_lab.pipeline import run_lab

    out = tmp_path_factory.mktemp("lab-report")
    progress: list[tuple[int, int]] = []
    result = run_lab(
        test_specs,
        out,
        spark=spark,
        run_info={"preset": TEST_PRESET.name, "seed": TEST_SEED},
        on_progress=lambda done, total: progress.append((done, total)),
    )
    return LabRun(result, progress, out)


@pytest.fixture(scope="session")
def raw_rows(spark: Any, lab_run: LabRun) -> list[dict[str, Any]]:
    return [row.asDict() for row in spark.read.parquet(f"{lab_run.result.parquet}/raw").collect()]


@pytest.fixture(scope="session")
def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(f"chromium is not installed; run: {CHROMIUM_HINT}")


def values(rows: Sequence[Mapping[str, Any]], **where: Any) -> list[float]:
    """``value`` of the raw rows matching every ``column=value`` given."""
    return [r["value"] for r in rows if all(r[k] == v for k, v in where.items())]


@pytest.fixture
def select() -> Callable[..., list[float]]:
    return values
