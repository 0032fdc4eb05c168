"""The lab's Spark session: pyspark found or the install command named, the JVM's log in
``OUT/spark.log`` (not the terminal), one-line start-up failures, the executors' Python chosen,
and coordkit's code shipped to a cluster's executors."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coordkit.errors import CoordkitError, MissingDependencyError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
INSTALL_HINT = "pip install coordkit[spark]"


#: The driver's log4j2 configuration: Spark's INFO log (where executors went, which tasks were
#: lost and why), nothing to the terminal. The appender is the JVM's stderr when the lab starts
#: the JVM (its stderr is then ``OUT/spark.log``), the file itself under ``spark-submit``.
_LOG4J = """\
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
{appender}
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n%ex
# Third-party chatter Spark's own defaults quiet too.
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.parquet.name = org.apache.parquet
logger.parquet.level = warn
# pyspark starts its JVM as an interpreter, whose logger's level (WARN unless configured) Spark
# imposes on every appender, announcing "Setting default log level", unless it equals the root's.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = info
"""
_STDERR_APPENDER = "appender.out.type = Console\nappender.out.target = SYSTEM_ERR"
_FILE_APPENDER = (
    "appender.out.type = File\nappender.out.fileName = {path}\nappender.out.append = true"
)


def log4j_properties(log: Path | None) -> str:
    """The driver's log4j2 properties: to ``log`` (a file appender), or to the JVM's stderr."""
    if log is None:
        return _LOG4J.format(appender=_STDERR_APPENDER)
    # A properties value: backslashes and line breaks escaped, log4j's ``${`` lookups disarmed.
    path = str(log.resolve()).replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    path = path.replace("${", "$${")
    return _LOG4J.format(appender=_FILE_APPENDER.format(path=path))


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


def prepare_environment(master: str | None = DEFAULT_MASTER) -> None:
    """Defaults Spark needs on a single machine, unless the caller set them. A cluster's driver
    must be reachable from the executors, so it keeps the address Spark chooses (as does a
    session spark-submit prepares, ``master=None``)."""
    if master is not None and is_local_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def worker_python(config: Mapping[str, str], submitted: Mapping[str, str] | None = None) -> str:
    """The Python the executors run: ``spark.pyspark.python`` (given to the lab, or to
    ``spark-submit``), else ``PYSPARK_PYTHON``, else this driver's own interpreter.

    The default is the driver's path, on a cluster too: PySpark needs the same minor Python
    version on the workers as on the driver, and nodes built from one image (Kubernetes, a
    provisioned fleet) have it at the same path. Anything the user set wins; when the path is
    wrong the probe (:mod:`coordkit_lab.spark.workers`) says so in one paragraph.
    """
    for value in (
        config.get("spark.pyspark.python"),
        (submitted or {}).get("spark.pyspark.python"),
        os.environ.get("PYSPARK_PYTHON"),
    ):
        if value:
            return value
    return sys.executable


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


def _route_driver_log(log: Path) -> None:
    """Under ``spark-submit``: send the running driver JVM's log4j2 output to ``log`` through
    py4j, unless the user configured logging (``-Dlog4j2.configurationFile``) or it is done."""
    import atexit

    from pyspark import SparkContext

    jvm = SparkContext._jvm
    assert jvm is not None
    if jvm.java.lang.System.getProperty("log4j2.configurationFile"):
        return
    properties = Path(tempfile.gettempdir()) / f"coordkit-lab-log4j2-{os.getpid()}.properties"
    location = jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfigLocation()
    if location is not None and str(location.toString()) == properties.as_uri():
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    properties.write_text(log4j_properties(log))
    atexit.register(properties.unlink, missing_ok=True)
    jvm.org.apache.logging.log4j.core.config.Configurator.reconfigure(
        jvm.java.net.URI(properties.as_uri())
    )
    with contextlib.suppress(Exception):
        # Spark re-applies its default profile when a SparkContext starts if it applied it once
        # (spark-submit did); clearing that flag keeps this configuration. An internal name: if
        # a Spark lacks it, create_session routes the log again once the session is up.
        logging = getattr(getattr(jvm.org.apache.spark.internal, "Logging$"), "MODULE$")
        getattr(logging, "org$apache$spark$internal$Logging$$defaultSparkLog4jConfig_$eq")(False)


def _submitted_conf(log: Path | None) -> dict[str, str]:
    """Under ``spark-submit``: route the driver's log into ``log`` and return the settings
    spark-submit was given (``--conf``, ``spark-defaults.conf``)."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM; starts nothing
    if log is not None:
        _route_driver_log(log)
    return dict(SparkConf().getAll())


def create_session(
    master: str | None = DEFAULT_MASTER,
    *,
    app_name: str = "coordkit-lab",
    log: Path | None = None,
    config: dict[str, str] | None = None,
) -> SparkSession:
    """A Spark session set up for the lab: the JVM's log in ``log``, no UI, few shuffle
    partitions, the executors' Python chosen by :func:`worker_python`.

    ``master=None`` keeps whatever master ``spark-submit`` configured; its settings then win over
    the lab's defaults. For a non-local master, or a worker Python other than this interpreter,
    coordkit's packages are zipped and shipped to the executors.

    Logs: a JVM the lab starts gets a log4j2 file on its command line (the driver only: on a
    cluster the executors keep Spark's default logging, into their own stderr on the worker, so
    nothing points them at a file that exists only here). Under ``spark-submit`` the driver JVM
    is already running: its log4j2 is reconfigured through py4j before the session starts, so
    Spark's start-up lines go to ``log``; what the JVM printed before Python ran stays on stderr.
    """
    require_pyspark()
    prepare_environment(master)
    from pyspark.sql import SparkSession

    config = dict(config or {})
    submitted = _submitted_conf(log) if under_spark_submit() else {}
    os.environ["PYSPARK_PYTHON"] = worker_python(config, submitted)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
    }
    if not under_spark_submit():
        log4j = Path(tempfile.gettempdir()) / "coordkit-lab-log4j2.properties"
        log4j.write_text(log4j_properties(None))
        defaults["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{log4j}"
    settings = {k: v for k, v in defaults.items() if k not in submitted} | config
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    log_start = log.stat().st_size if log is not None and log.is_file() else 0
    try:
        with _jvm_output_to(None if under_spark_submit() else log):
            spark = builder.getOrCreate()
    except Exception as exc:
        output = _jvm_output(log, log_start)
        raise SparkStartError(
            f"Spark did not start on master {master or '(spark-submit)'}: "
            + start_failure(exc, output)
            + (f" (the JVM's output: {log})" if log is not None else "")
        ) from exc
    if under_spark_submit() and log is not None:
        _route_driver_log(log)  # again, should Spark have put its own profile back
    sc = spark.sparkContext
    configured = sc.getConf().get("spark.pyspark.python")
    if configured and configured != sc.pythonExec:
        # Set where pyspark does not look when it starts its own JVM (spark-defaults.conf,
        # PYSPARK_SUBMIT_ARGS): the setting still wins, as its documentation says.
        sc.pythonExec = os.environ["PYSPARK_PYTHON"] = configured
    if not is_local_master(sc.master) or os.path.abspath(sc.pythonExec) != sys.executable:
        archive = build_code_zip(Path(tempfile.mkdtemp(prefix="coordkit-lab-")) / "coordkit.zip")
        sc.addPyFile(str(archive))
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
