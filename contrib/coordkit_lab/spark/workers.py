"""Can the executors' Python run the lab? A probe job right after start-up, and a real job's
failure translated, both into one paragraph saying what to install where.

Every executor runs its Python workers with the interpreter at ``spark.pyspark.python`` /
``PYSPARK_PYTHON`` (by default the driver's own, see :func:`~coordkit_lab.spark.session.worker_python`).
That Python must exist on every worker at that path, be the driver's minor version, and have
coordkit's dependencies; coordkit itself is shipped with the job (a zip through ``addPyFile``).
"""

from __future__ import annotations

import functools
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from attrs import frozen

from coordkit.errors import CoordkitError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: What the executors import to run a scenario (the engines' functions live there).
ENTRY_MODULE = "coordkit_lab.spark.execution"
#: Modules the engines that exchange columns need on the workers, beyond coordkit's own.
ENGINE_MODULES = {"rdd": (), "pandas": ("pandas", "pyarrow"), "arrow": ("pyarrow",)}


class WorkerSetupError(CoordkitError):
    """The executors cannot run the lab's Python code; the message says what to install where."""


@frozen
class Requirement:
    """A module the workers must import, the distribution that provides it and the version this
    driver runs (``None`` when the driver does not know it)."""

    module: str
    distribution: str
    version: str | None = None

    @property
    def pin(self) -> str:
        return f"{self.distribution}=={self.version}" if self.version else self.distribution


@frozen
class WorkerPython:
    """One executor's Python, as the probe found it."""

    host: str
    python: str
    version: str
    spark: str
    missing: tuple[str, ...] = ()
    broken: tuple[str, ...] = ()


@functools.cache
def _module_of() -> dict[str, str]:
    """Distribution name (normalised) → the import name it provides."""
    import importlib.metadata

    provided: dict[str, list[str]] = {}
    for module, distributions in importlib.metadata.packages_distributions().items():
        for distribution in distributions:
            provided.setdefault(_normalise(distribution), []).append(module)
    return {
        name: name.replace("-", "_") if name.replace("-", "_") in modules else sorted(modules)[0]
        for name, modules in provided.items()
    }


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(distribution: str) -> Requirement:
    import importlib.metadata

    try:
        version: str | None = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        version = None
    module = _module_of().get(_normalise(distribution), distribution.replace("-", "_"))
    return Requirement(module, distribution, version)


@functools.cache
def worker_requirements(engine: str = "rdd") -> tuple[Requirement, ...]:
    """What the workers need besides Spark's own Python code: coordkit's dependencies (those
    without an extra) and what ``engine`` exchanges columns with, at this driver's versions."""
    import importlib.metadata

    try:
        declared = importlib.metadata.requires("coordkit") or []
    except importlib.metadata.PackageNotFoundError:  # run from a source tree: the probe still
        declared = []  # finds what the shipped code cannot import
    names = [
        match.group(0)
        for line in declared
        if ";" not in line and (match := re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line))
    ]
    names += [m for m in ENGINE_MODULES.get(engine, ()) if m not in names]
    return tuple(_requirement(name) for name in names)


def _requirement_for_module(module: str, requirements: Sequence[Requirement]) -> Requirement:
    for requirement in requirements:
        if requirement.module == module:
            return requirement
    import importlib.metadata

    for distribution in importlib.metadata.packages_distributions().get(module, []):
        return _requirement(distribution)
    return Requirement(module, module)


def _probe_function(
    modules: tuple[str, ...], entry: str = ENTRY_MODULE
) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The probe task: import each of ``modules``, then ``entry`` and the plugins (what a
    scenario task loads). Made inside a function so cloudpickle ships it by value: a worker that
    cannot import coordkit still runs it and says what it lacks."""

    def probe(_rows: Iterable[Any]) -> Iterator[Any]:
        import importlib
        import platform
        import socket
        import sys

        missing, broken = [], []

        def load(name: str, then: Callable[[], Any] | None = None) -> None:
            try:
                importlib.import_module(name)
                if then is not None:
                    then()
            except ModuleNotFoundError as exc:
                missing.append(exc.name or name)
            except Exception as exc:  # a module that is there but fails to import
                broken.append(f"{name}: {type(exc).__name__}: {exc}"[:300])

        for name in modules:
            load(name)

        def plugins() -> None:
            from coordkit.plugins import get_plugin_manager

            get_plugin_manager()

        load(entry, plugins)
        try:
            import pyspark

            spark = str(pyspark.__version__)
        except Exception:
            spark = "?"
        yield (
            socket.gethostname(),
            sys.executable,
            platform.python_version(),
            spark,
            tuple(sorted(set(missing))),
            tuple(broken),
        )

    return probe


def probe_workers(spark: SparkSession, *, engine: str = "rdd") -> list[WorkerPython]:
    """Run a small job (a task per core, at least one per executor) that imports what the lab
    needs on the executors and reports each executor's host, Python and what it lacks.

    :raises WorkerSetupError: a Python that cannot start, lacks a dependency or is another minor
        version than the driver's; the message says what to install where.
    """
    sc = spark.sparkContext
    requirements = worker_requirements(engine)
    from coordkit_lab.spark.executors import executors

    try:
        registered = sum(1 for e in executors(spark) if e.active)
    except Exception:  # the status store is Spark's internal API: the probe works without it
        registered = 0
    tasks = max(1, sc.defaultParallelism, registered)
    probe = _probe_function(tuple(r.module for r in requirements))
    sc.setJobDescription("coordkit lab: checking the executors' Python")
    try:
        rows = sc.parallelize(range(tasks), tasks).mapPartitions(probe).collect()
    except Exception as exc:
        message = worker_failure(exc, spark, engine=engine)
        if message is None:
            raise
        raise WorkerSetupError(message) from exc
    finally:
        sc.setJobDescription(None)  # type: ignore[arg-type]
    found = sorted({WorkerPython(*row) for row in rows}, key=lambda w: (w.host, w.python))
    message = _lacking(found, spark, requirements)
    if message is not None:
        raise WorkerSetupError(message)
    return found


# -- the paragraphs ---------------------------------------------------------------------------

_CANNOT_RUN = re.compile(r'Cannot run program "(?P<path>[^"]*)": error=\d+, (?P<reason>[^\r\n]+)')
_LOST_TASK = re.compile(
    r"Lost task \S+ in stage \S+ \(TID \d+\) \((?P<host>\S+) executor (?P<id>[^)]+)\)"
)
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '(?P<module>[^']+)'")
# PySpark 4 names the worker's version "3.11", PySpark 3.5 "(3, 11)".
_VERSIONS = re.compile(
    r"Python in worker has different version:? (?P<worker>[\d.]+|\(\d+, \d+\)) than that in "
    r"driver:? (?P<driver>[\d.]+)"
)


def _driver_python() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def _how_chosen(python: str) -> str:
    if python == sys.executable:
        return (
            "this driver's own interpreter, the lab's default when neither spark.pyspark.python "
            "nor PYSPARK_PYTHON is set"
        )
    return "as spark.pyspark.python or PYSPARK_PYTHON set it"


def _pip(python: str, requirements: Iterable[Requirement]) -> str:
    pins = " ".join(shlex.quote(r.pin) for r in requirements)
    return f"{shlex.quote(python)} -m pip install {pins}"


def _where(host: str | None, executor: str | None = None) -> str:
    if host is None:
        return "on the workers"
    return f"on {host}" + (f" (executor {executor})" if executor else "")


def _or_redirect(version: str) -> str:
    return (
        "; or set spark.pyspark.python (--conf spark.pyspark.python=PATH, or PYSPARK_PYTHON) to "
        f"a Python {version} on the workers that has them."
    )


def worker_failure(exc: BaseException, spark: SparkSession, *, engine: str = "rdd") -> str | None:
    """The paragraph for a job that failed because the executors' Python could not run it (no
    program at the path, a missing module, another minor version), else ``None``."""
    text = "\n".join(_texts(exc))
    python = spark.sparkContext.pythonExec
    version = _driver_python()
    requirements = worker_requirements(engine)
    lost = _LOST_TASK.search(text)
    host, executor = (lost.group("host"), lost.group("id")) if lost else (None, None)
    cannot = _CANNOT_RUN.search(text)
    if cannot is not None:
        path = cannot.group("path")
        return (
            f"The Spark workers cannot start Python: {_where(host, executor)} there is no usable "
            f"{path} ({cannot.group('reason').strip()}), the Python the lab runs its workers with "
            f"({_how_chosen(path)}). Install Python {version} at exactly that path on every "
            f"worker, with coordkit's dependencies: {_pip(path, requirements)} (coordkit itself "
            "is shipped with the job)" + _or_redirect(version)
        )
    versions = _VERSIONS.search(text)
    if versions is not None:
        worker = versions.group("worker").strip("()").replace(", ", ".")
        return (
            f"The Spark workers run Python {worker} ({python}) and this driver "
            f"Python {versions.group('driver')}; PySpark needs the same minor version on both. "
            f"Install Python {versions.group('driver')} on every worker with coordkit's "
            f"dependencies and point spark.pyspark.python (or PYSPARK_PYTHON) at it, or run the "
            f"driver with Python {worker}."
        )
    missing = sorted(set(_NO_MODULE.findall(text)))
    if missing:
        return _missing_paragraph(
            _where(host, executor), python, None, missing, requirements, version
        )
    return None


def _texts(exc: BaseException) -> Iterator[str]:
    """The exception's text and its causes' (py4j's carries the Java trace)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield str(current)
        current = current.__cause__ or current.__context__


def _missing_paragraph(
    where: str,
    python: str,
    python_version: str | None,
    missing: Sequence[str],
    requirements: Sequence[Requirement],
    version: str,
) -> str:
    from coordkit_lab.spark.session import code_packages

    code = [m for m in missing if m.split(".")[0] in code_packages()]
    lacking = [m for m in missing if m not in code]
    code_sentence = (
        f"coordkit's code did not reach the Spark workers ({where}, {python} cannot import "
        f"{', '.join(code)}): the lab ships it as a zip with SparkContext.addPyFile; under "
        "spark-submit pass --py-files with the zip `coordkit lab package` builds."
    )
    if not lacking:
        return code_sentence
    needed = [_requirement_for_module(m, requirements) for m in lacking]
    shown = f"{python} (Python {python_version})" if python_version else python
    return (
        f"The Spark workers' Python lacks coordkit's dependencies: {where} the executors run "
        f"{shown}, which cannot import {', '.join(lacking)}. Install them into that Python on "
        f"every worker: {_pip(python, needed)} (this driver's versions; coordkit itself is "
        "shipped with the job)" + _or_redirect(version) + (f" {code_sentence}" if code else "")
    )


def _lacking(
    found: Sequence[WorkerPython], spark: SparkSession, requirements: Sequence[Requirement]
) -> str | None:
    """The paragraph for what the probe found missing (grouped by Python), else ``None``."""
    problems: list[str] = []
    groups: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for worker in found:
        if worker.missing:
            groups.setdefault((worker.python, worker.version, worker.missing), []).append(
                worker.host
            )
    for (python, version, missing), hosts in groups.items():
        where = "on " + ", ".join(sorted(set(hosts)))
        problems.append(
            _missing_paragraph(where, python, version, missing, requirements, _driver_python())
        )
    broken = sorted({b for w in found for b in w.broken})
    if broken and not problems:
        problems.append(
            "The Spark workers' Python cannot import what the lab needs: "
            + "; ".join(broken)
            + ". Install the same versions of coordkit's dependencies as this driver has ("
            + " ".join(r.pin for r in requirements)
            + ")."
        )
    driver_spark = ".".join(str(spark.version).split(".")[:2])
    other = sorted(
        (w.host, w.spark)
        for w in found
        if w.spark != "?" and ".".join(w.spark.split(".")[:2]) != driver_spark
    )
    if other and not problems:
        which = ", ".join(f"{host} has {version}" for host, version in other)
        problems.append(
            f"The Spark workers run another Spark than this driver ({spark.version}): {which}. "
            f"Install Spark {spark.version} (or pyspark=={spark.version}) on every worker."
        )
    return " ".join(problems) if problems else None
