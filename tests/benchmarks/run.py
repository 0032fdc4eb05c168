"""Run coordkit's benchmarks: ``python tests/benchmarks/run.py [AREA ...] [--quick]``.

Each ``bench_AREA.py`` beside this file, or package ``AREA/`` whose ``__init__.py`` says it is one
(:data:`PACKAGES`), defines ``main(argv: list[str]) -> None`` that prints its figures (a table and a
JSON line per case). Benchmarks are never timed assertions: they report.
Areas that need something built first run only when named (``kafka_java``: Kafka's Java
assignors, built by ``tests/benchmarks/kafka_java/build.sh KAFKA_SOURCE``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


#: Areas whose file name is longer than the area name (``bench_FILE.py`` → area).
AREA_NAMES = {"legacy_consumer": "legacy"}
#: Areas that need a separate build; run only when named.
NAMED_ONLY = {"kafka_java"}
#: Areas grown into a package of their own modules (imported by name, HERE on the path).
PACKAGES = ("vs_kafka",)


def discover() -> dict[str, Path]:
    found = {p.stem.removeprefix("bench_"): p for p in sorted(HERE.glob("bench_*.py"))}
    areas = {AREA_NAMES.get(stem, stem): path for stem, path in found.items()}
    areas.update({name: HERE / name / "__init__.py" for name in PACKAGES})
    return areas


def main(argv: list[str]) -> int:
    available = discover()
    areas = [a for a in argv if not a.startswith("-")]
    flags = [a for a in argv if a.startswith("-")]
    unknown = [a for a in areas if a not in available]
    if unknown:
        print(
            f"unknown benchmark area(s) {', '.join(unknown)}; available: {', '.join(available)}",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(HERE.parent))  # the test harness (servers) is importable as `harness`
    sys.path.insert(0, str(HERE))  # the packages, and modules one benchmark takes from another
    for area in areas or [a for a in available if a not in NAMED_ONLY]:
        if area in PACKAGES:
            module = importlib.import_module(area)
        else:
            spec = importlib.util.spec_from_file_location(f"bench_{area}", available[area])
            assert spec is not None
            assert spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        print(f"== benchmark: {area}", flush=True)
        started = time.perf_counter()
        module.main(flags)
        print(f"== {area} done in {time.perf_counter() - started:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
