"""The lab's throughput on Spark: ``python tests/benchmarks/run.py lab [--quick]``.

Cases (each prints a table row and a JSON line):

* ``preset``: scenarios per second for the quick and kafka-grid presets (``--quick``: kafka-grid
  up to 1,000 members), Spark start-up, running and aggregation separately;
* ``cores``: the same scenarios on ``local[1]`` and ``local[2]`` (warm sessions), the speed-up;
* ``overhead``: Spark (warm ``local[*]`` session) against the same scenarios run one after the
  other in this Python process, at growing scenario counts, and the crossover point;
* ``engines``: ``rdd`` / ``pandas`` (mapInPandas) / ``arrow`` (mapInArrow) on the same scenarios.

``--only=cores,engines`` runs some of them. The machine may be shared: every figure is the best of
several runs, and the load average is printed at start and end.

Scenario run times come from :func:`coordkit_lab.spark.execute` (the job that runs the scenarios
and writes raw Parquet); aggregation is reported apart. Spark start-up is paid once per process.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from coordkit.plugins import get_plugin_manager
from coordkit_lab.local import run_local
from coordkit_lab.scenarios import Preset, PresetCase, ScenarioSpec, expand, get_preset
from coordkit_lab.spark import ENGINES, create_session, execute

SEED = 1


def emit(case: str, **figures: Any) -> None:
    shown = "  ".join(
        f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items()
    )
    print(f"{case:<10} {shown}", flush=True)
    print(json.dumps({"bench": "lab", "case": case, **figures}), flush=True)


def session(master: str, scratch: Path) -> tuple[Any, float]:
    started = time.perf_counter()
    spark = create_session(master, log=scratch / "spark.log")
    # One tiny job so JIT and Python worker start-up are not billed to the first measurement.
    spark.sparkContext.parallelize(range(8), 4).map(lambda x: x).count()
    return spark, time.perf_counter() - started


def timed_run(
    spark: Any, specs: Sequence[ScenarioSpec], scratch: Path, **options: Any
) -> tuple[float, float]:
    target = Path(tempfile.mkdtemp(dir=scratch))
    run = execute(spark, specs, target.as_uri(), **options)
    return run.run_seconds, run.aggregate_seconds


def churn_specs(count: int, steps: int = 10, **grid: Any) -> list[ScenarioSpec]:
    """``count`` churn scenarios (different seeds, one strategy) of similar cost; by default
    small ones (about 15 ms each in plain Python)."""
    params = {"members": 20, "steps": steps, **grid}
    preset = Preset("bench", "bench", [PresetCase("churn", params)], replicates=count)
    return expand(preset, get_plugin_manager(), seed=SEED, strategies=["sticky"])


def bench_presets(quick: bool, scratch: Path) -> None:
    manager = get_plugin_manager()
    spark, startup = session("local[*]", scratch)
    emit("startup", master="local[*]", seconds=startup)
    try:
        grid = get_preset("kafka-grid")
        if quick:
            grid = Preset(
                "kafka-grid (<=1000 members)",
                grid.description,
                [
                    PresetCase(
                        "kafka-grid",
                        {**dict(grid.cases[0].grid), "members": (100, 1000)},
                        replicates=1,
                    )
                ],
                replicates=1,
            )
        for preset in (get_preset("quick"), grid):
            specs = expand(preset, manager, seed=SEED)
            run_s, aggregate_s = timed_run(spark, specs, scratch)
            emit(
                "preset",
                preset=preset.name,
                scenarios=len(specs),
                run_seconds=run_s,
                aggregate_seconds=aggregate_s,
                scenarios_per_second=len(specs) / run_s,
            )
    finally:
        spark.stop()


def bench_cores(quick: bool, scratch: Path) -> None:
    """Sessions alternate (1, 2, 1, 2, ...) and each keeps its best run, so load from other
    processes on the machine hits both alike."""
    # About 65 ms each in plain Python: enough work per task that cores, not overhead, decide.
    specs = churn_specs(
        32 if quick else 96, steps=10, members=200, topics=20, partitions_per_topic=50
    )
    times: dict[str, list[float]] = {"local[1]": [], "local[2]": []}
    for _ in range(2 if quick else 3):
        for master, best in times.items():
            spark, _ = session(master, scratch)
            try:
                best.append(min(timed_run(spark, specs, scratch)[0] for _ in range(2)))
            finally:
                spark.stop()
    one, two = min(times["local[1]"]), min(times["local[2]"])
    emit("cores", scenarios=len(specs), local1_seconds=one, local2_seconds=two, speedup=one / two)


def bench_overhead(quick: bool, scratch: Path) -> None:
    counts = (2, 8, 32, 128) if quick else (2, 8, 32, 128, 512, 1024)
    spark, _ = session("local[*]", scratch)
    crossover = None
    try:
        for count in counts:
            specs = churn_specs(count)
            python_s = min(run_local(specs).seconds for _ in range(2))
            spark_s = min(timed_run(spark, specs, scratch)[0] for _ in range(2))
            if crossover is None and spark_s < python_s:
                crossover = count
            emit(
                "overhead",
                scenarios=count,
                python_seconds=python_s,
                spark_seconds=spark_s,
                spark_over_python=spark_s / python_s,
            )
    finally:
        spark.stop()
    emit(
        "crossover",
        scenarios=crossover if crossover is not None else f">{counts[-1]}",
    )


def bench_engines(quick: bool, scratch: Path) -> None:
    """Two mixes: ``compute`` (long churn sequences: simulation dominates) and ``rows`` (tiny
    groups, hundreds of steps: moving result rows back to the JVM dominates)."""
    mixes = {
        "compute": churn_specs(32 if quick else 96, steps=100),
        "rows": churn_specs(
            32 if quick else 96, steps=300, members=3, topics=1, partitions_per_topic=3
        ),
    }
    spark, _ = session("local[*]", scratch)
    try:
        for mix, specs in mixes.items():
            results: dict[str, list[float]] = {e: [] for e in ENGINES}
            for _ in range(3 if quick else 5):  # alternate so drifting load hits every engine alike
                for engine in ENGINES:
                    results[engine].append(timed_run(spark, specs, scratch, engine=engine)[0])
            for engine, runs in results.items():
                emit(
                    "engine",
                    mix=mix,
                    engine=engine,
                    scenarios=len(specs),
                    best_seconds=min(runs),
                    median_seconds=sorted(runs)[len(runs) // 2],
                )
    finally:
        spark.stop()


CASES = {
    "presets": bench_presets,
    "cores": bench_cores,
    "overhead": bench_overhead,
    "engines": bench_engines,
}


def main(flags: list[str]) -> None:
    """``--quick`` for smaller cases; ``--only=cores,engines`` to run some cases."""
    quick = "--quick" in flags
    only = [f.split("=", 1)[1] for f in flags if f.startswith("--only=")]
    chosen = [c for c in (",".join(only).split(",") if only else CASES) if c]
    unknown = [c for c in chosen if c not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {', '.join(unknown)}; cases: {', '.join(CASES)}")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="coordkit-bench-lab-") as tmp:
        scratch = Path(tmp)
        print(
            f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True
        )
        for name in chosen:
            CASES[name](quick, scratch)
        print(f"load average at end: {os.getloadavg()[0]:.2f}", flush=True)
