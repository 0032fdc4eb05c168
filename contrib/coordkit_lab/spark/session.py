"""The lab's Spark session: pyspark found or the install command named, quiet logs, one-line
start-up failures, and coordkit's code shipped to a cluster's executors."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coordkit.errors import CoordkitError, MissingDependencyError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
INSTALL_HINT = "pip install coordkit[spark]"


_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
# Spark prints "Setting default log level" unless the shell logger is configured too.
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


class SparkStartError(CoordkitError):
    """The Spark session could not be created (no Java, a bad master URL, ...)."""


def require_pyspark() -> Any:
    """Import pyspark or fail with the install command."""
    try:
        import pyspark
        import pyspark.sql
    except ImportError as exc:
        raise MissingDependencyError(
            f"the lab runs on Apache Spark, and pyspark is not installed: {INSTALL_HINT}"
        ) from exc
    return pyspark


def prepare_environment() -> None:
    """Defaults Spark needs on a single machine, unless the caller set them."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def under_spark_submit() -> bool:
    """Whether this process was started by ``spark-submit`` (its JVM gateway is already up)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def is_local_master(master: str | None) -> bool:
    return master is None or master == "local" or master.startswith("local[")


@contextlib.contextmanager
def _jvm_output_to(log: Path | None) -> Iterator[None]:
    """Start the JVM with its stdout/stderr in ``log`` so its chatter never breaks the terminal."""
    if log is None:
        yield
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(log, "ab") as target:
            os.dup2(target.fileno(), 1)
            os.dup2(target.fileno(), 2)
            yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def code_packages() -> list[str]:
    """The import packages that make up coordkit: the core, the built-in plugins, the lab."""
    from coordkit.plugins import BUILTIN_PLUGINS

    return list(dict.fromkeys(["coordkit", *BUILTIN_PLUGINS.values(), "coordkit_lab"]))


def build_code_zip(target: Path) -> Path:
    """Zip coordkit's packages (as ``addPyFile`` / ``--py-files`` expect: packages at the root)."""
    import importlib

    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in code_packages():
            module = importlib.import_module(name)
            root = Path(module.__file__ or "").parent
            for path in sorted(root.rglob("*.py")):
                archive.write(path, Path(name) / path.relative_to(root))
    return target


def create_session(
    master: str | None = DEFAULT_MASTER,
    *,
    app_name: str = "coordkit-lab",
    log: Path | None = None,
    config: dict[str, str] | None = None,
) -> SparkSession:
    """A Spark session set up for the lab: quiet logs, no UI, few shuffle partitions.

    ``master=None`` keeps whatever master ``spark-submit`` configured. For a non-local master the
    coordkit packages are zipped and shipped to the executors.
    """
    require_pyspark()
    prepare_environment()
    from pyspark.sql import SparkSession

    log4j = Path(tempfile.gettempdir()) / "coordkit-lab-log4j2.properties"
    log4j.write_text(_QUIET_LOG4J)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        **(config or {}),
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    log_start = log.stat().st_size if log is not None and log.is_file() else 0
    try:
        with _jvm_output_to(log):
            spark = builder.getOrCreate()
    except Exception as exc:
        output = _jvm_output(log, log_start)
        raise SparkStartError(
            f"Spark did not start on master {master or '(spark-submit)'}: "
            + start_failure(exc, output)
            + (f" (the JVM's output: {log})" if log is not None else "")
        ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    actual = spark.sparkContext.master
    if not is_local_master(actual):
        archive = build_code_zip(Path(tempfile.mkdtemp(prefix="coordkit-lab-")) / "coordkit.zip")
        spark.sparkContext.addPyFile(str(archive))
    return spark


#: What Spark's launcher prints when it refuses a setting: its exception, or an ``Error:`` line.
_REFUSAL = re.compile(r'(?:Exception in thread "main" |^Error: )(.+)')
#: What the shell prints when there is no ``java`` to run, and what an old Java throws.
_NO_JAVA = re.compile(r"java: (?:No such file or directory|not found|Permission denied)")
_OLD_JAVA = "UnsupportedClassVersionError"
JAVA_HINT = "Spark needs Java 17 or later (apt-get install openjdk-17-jre-headless)"


def _jvm_output(log: Path | None, start: int) -> list[str]:
    """The lines the JVM wrote to ``log`` from byte ``start`` on (this attempt's, not earlier
    runs'), tabs as spaces."""
    if log is None or not log.is_file():
        return []
    with open(log, "rb") as source:
        source.seek(start)
        text = source.read().decode(errors="replace")
    return [line.replace("\t", "    ").strip() for line in text.splitlines() if line.strip()]


def start_failure(exc: BaseException, output: Sequence[str]) -> str:
    """Why a Spark session did not start, in one line: what Spark refused (a master URL, a
    setting), or that there is no usable Java (then the line that says so), else the error."""
    java_lines = [line for line in output if _NO_JAVA.search(line)]
    if java_lines:
        return f"{JAVA_HINT}; {java_lines[0]}"
    lines = [*output, *str(exc).splitlines()]
    for line in lines:
        refused = _REFUSAL.search(line)
        if refused is not None:
            if _OLD_JAVA in line:
                return f"{JAVA_HINT}; {refused.group(1)}"
            return f"Spark refused it: {refused.group(1)}"
    # A Java exception in the py4j error text: ": org.apache.spark.SparkException: ..."
    for line in str(exc).splitlines():
        if line.startswith(": ") and "Exception" in line:
            return f"Spark refused it: {line[2:]}"
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), repr(exc))
    if "Java gateway" in first or "JAVA_GATEWAY" in first:
        return f"{first.rstrip('.')}. {JAVA_HINT}"
    return first


def spark_version(spark: SparkSession) -> str:
    return str(spark.version)
