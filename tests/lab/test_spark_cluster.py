"""The lab ready for a real cluster (issue 13, item 5): the executors' Python checked and its
failures said in one paragraph, the driver's log in OUT/spark.log under spark-submit, lost
executors and retried tasks shown and counted, a standalone cluster with a worker killed mid-run.

Failures of the worker's Python run on the shared local session; what a user sees (exit status,
one stderr line, the progress bar, summary.json) runs the command in its own process, its own
Spark. Python workers are made to fail with Spark's own hook, ``spark.python.worker.module`` (the
daemon imports it only when its name starts with ``pyspark``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordkit.testing.servers.ports import free_port
from coordkit_lab.spark import (
    WorkerSetupError,
    probe_workers,
    worker_failure,
    worker_python,
    worker_requirements,
)
from harness.waiting import wait_for

MISSING = "/opt/missing-venv/bin/python"
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
#: Traces of a Java or Python stack: none may reach the user.
TRACES = ("Traceback", "py4j", "Py4J", "\tat org.apache", "at java.base")

#: The first scenario group any Python worker runs kills that worker's process (once: a marker file).
CRASH_ONCE = """
import os

import coordkit_lab.spark.execution as execution
from pyspark.worker import main  # noqa: F401  (what the daemon calls)

_run_group = execution.run_group


def _crash_once(*args, **kwargs):
    try:
        os.close(os.open(os.environ["COORDKIT_TEST_MARKER"], os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return _run_group(*args, **kwargs)
    os._exit(1)


execution.run_group = _crash_once
"""

#: The first scenario group any Python worker runs writes its pid to a marker file and waits (for the
#: test to kill its executor); every other group runs normally.
HOLD_ONCE = """
import os
import time

import coordkit_lab.spark.execution as execution
from pyspark.worker import main  # noqa: F401  (what the daemon calls)

_run_group = execution.run_group


def _hold_once(*args, **kwargs):
    try:
        fd = os.open(os.environ["COORDKIT_TEST_MARKER"], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return _run_group(*args, **kwargs)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    time.sleep(120)  # the test kills this worker's executor long before
    return _run_group(*args, **kwargs)


execution.run_group = _hold_once
"""


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def lab_run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coordkit_lab", "run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "COLUMNS": "200", **(env or {})},
        check=False,
    )


def worker_module(directory: Path, name: str, source: str) -> dict[str, str]:
    """``source`` as Spark's Python worker module ``name``; the environment that selects it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.py").write_text(textwrap.dedent(source))
    marker = directory / "marker"
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(directory), os.environ.get("PYTHONPATH")])),
        "COORDKIT_TEST_MARKER": str(marker),
        "PYSPARK_SUBMIT_ARGS": (
            f"--conf spark.python.worker.module={name} "
            f"--conf spark.executorEnv.PYTHONPATH={directory} "
            f"--conf spark.executorEnv.COORDKIT_TEST_MARKER={marker} pyspark-shell"
        ),
    }


def pin(distribution: str) -> str:
    return f"{distribution}=={importlib.metadata.version(distribution)}"


# -- which Python the executors run -----------------------------------------------------------


def test_the_worker_python_is_what_the_user_set_else_the_drivers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert worker_python({}) == sys.executable
    monkeypatch.setenv("PYSPARK_PYTHON", "/env/python")
    assert worker_python({}) == "/env/python"
    assert worker_python({}, {"spark.pyspark.python": "/submit/python"}) == "/submit/python"
    assert worker_python({"spark.pyspark.python": "/conf/python"}, {}) == "/conf/python"


def test_the_workers_need_coordkits_dependencies_at_this_drivers_versions() -> None:
    declared = {r.distribution for r in worker_requirements("rdd")}
    assert {"pluggy", "attrs", "numpy"} <= declared
    assert "pyspark" not in declared  # Spark brings its own Python code to the workers
    assert "pandas" not in declared  # only the engines that exchange columns need it
    assert {"pandas", "pyarrow"} <= {r.distribution for r in worker_requirements("pandas")}
    assert pin("pluggy") in {r.pin for r in worker_requirements("rdd")}


# -- the executors' Python, on the shared local session ---------------------------------------


def test_the_probe_reports_each_executors_python(spark: Any) -> None:
    found = probe_workers(spark)
    assert {(w.python, w.version, w.missing) for w in found} == {
        (spark.sparkContext.pythonExec, ".".join(map(str, sys.version_info[:3])), ())
    }
    assert {w.spark for w in found} == {spark.version}


def test_a_worker_python_that_is_not_there_is_one_paragraph(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spark.sparkContext, "pythonExec", MISSING)
    with pytest.raises(WorkerSetupError) as caught:
        probe_workers(spark)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("The Spark workers cannot start Python: on ")
    assert f"there is no usable {MISSING} (No such file or directory)" in message
    assert "(as spark.pyspark.python or PYSPARK_PYTHON set it)" in message
    assert f"Install Python {PYTHON} at exactly that path on every worker" in message
    assert f"{MISSING} -m pip install " in message
    assert pin("pluggy") in message
    assert "coordkit itself is shipped with the job" in message
    assert "--conf spark.pyspark.python=PATH" in message
    assert not any(trace in message for trace in TRACES)


def test_a_worker_python_of_another_minor_version_is_one_paragraph(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver tells each Python worker its own version; PySpark's worker refuses another."""
    monkeypatch.setattr(spark.sparkContext, "pythonVer", "3.99")
    with pytest.raises(WorkerSetupError) as caught:
        probe_workers(spark, engine="arrow")  # not probed yet on this session
    message = str(caught.value)
    assert message.startswith(f"The Spark workers run Python {PYTHON} (")
    assert "and this driver Python 3.99; PySpark needs the same minor version on both." in message
    assert not any(trace in message for trace in TRACES)


def test_a_real_job_failing_on_the_worker_python_is_translated_too(
    spark: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What the probe cannot see (an executor that joined later) fails the job itself: the
    failure of the DataFrame write becomes the same paragraph."""
    rows = spark.sparkContext.parallelize(range(2), 2).map(lambda x: (x,))
    monkeypatch.setattr(spark.sparkContext, "pythonExec", MISSING)
    with pytest.raises(Exception) as caught:
        spark.createDataFrame(rows, "x int").write.parquet(str(tmp_path / "a"))
    assert any(trace in str(caught.value) for trace in TRACES)  # what the user used to get
    message = worker_failure(caught.value, spark)
    assert message is not None
    assert message.startswith("The Spark workers cannot start Python: on ")
    assert f"{MISSING} -m pip install " in message


def test_a_missing_module_in_a_real_job_is_named_with_the_pip_command(
    spark: Any, tmp_path: Path
) -> None:
    def needs_pluggy(x: int) -> tuple[int]:
        __import__("pluggy_is_not_installed_here")
        return (x,)

    rows = spark.sparkContext.parallelize(range(2), 2).map(needs_pluggy)
    with pytest.raises(Exception) as caught:
        spark.createDataFrame(rows, "x int").write.parquet(str(tmp_path / "b"))
    message = worker_failure(caught.value, spark)
    assert message is not None
    assert message.startswith("The Spark workers' Python lacks coordkit's dependencies: ")
    assert "cannot import pluggy_is_not_installed_here." in message
    python = spark.sparkContext.pythonExec
    assert f"{python} -m pip install pluggy_is_not_installed_here" in message


def test_other_failures_are_left_alone(spark: Any, tmp_path: Path) -> None:
    def fails(x: int) -> tuple[int]:
        raise ValueError("not a setup problem")

    rows = spark.sparkContext.parallelize(range(2), 2).map(fails)
    with pytest.raises(Exception) as caught:
        spark.createDataFrame(rows, "x int").write.parquet(str(tmp_path / "c"))
    assert worker_failure(caught.value, spark) is None


# -- what the user sees ------------------------------------------------------------------------


@pytest.mark.spark_cluster
def test_a_worker_python_without_the_dependencies_stops_the_run_with_one_line(
    tmp_path: Path,
) -> None:
    """A venv without pluggy (nor anything else) as the workers' Python: the probe names what it
    lacks and the pip command for that very Python; exit status 2, nothing else on stderr."""
    venv = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    worker = venv / "bin" / "python"
    out = tmp_path / "out"
    done = lab_run(
        *("-w", "single-partition-topics", "-s", "range", "--master", "local[1]"),
        *("--out", str(out)),
        env={"PYSPARK_PYTHON": str(worker)},
    )
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    [line] = lines(done.stderr)
    assert line.startswith("error: The Spark workers' Python lacks coordkit's dependencies: on ")
    assert f"the executors run {worker} (Python {PYTHON}." in line
    assert "cannot import attrs, click, numpy, pluggy, rich." in line
    assert f"{worker} -m pip install " in line
    assert pin("pluggy") in line
    assert not any(trace in done.stdout + done.stderr for trace in TRACES)
    assert not (out / "summary.json").exists()


@pytest.mark.spark_cluster
def test_a_retried_task_is_shown_next_to_the_bar_and_counted(tmp_path: Path) -> None:
    """``local[2,2]`` lets a task fail twice; the first scenario kills its Python worker once."""
    env = worker_module(tmp_path / "worker", "pyspark_crash_once", CRASH_ONCE)
    out = tmp_path / "out"
    done = lab_run(
        *("-w", "single-partition-topics", "-s", "range", "-s", "roundrobin"),
        *("--master", "local[2,2]", "--out", str(out)),
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert Path(env["COORDKIT_TEST_MARKER"]).exists()  # the worker did die once
    run = json.loads((out / "summary.json").read_text())["run"]
    assert (run["tasks_retried"], run["executors_lost"]) == (1, 0)
    assert f"{run['tasks']}/{run['tasks']} tasks · 1 task retried" in done.stdout
    totals = json.loads((out / "summary.json").read_text())["tables"]["totals"][0]
    assert (totals["scenarios"], totals["failed"]) == (2, 0)  # nothing lost to the retry


@pytest.mark.spark_cluster
def test_under_spark_submit_the_drivers_log_goes_to_spark_log(tmp_path: Path) -> None:
    """spark-submit starts the driver JVM with Spark's own profile (INFO to stderr); the lab
    routes it to OUT/spark.log before the session starts."""
    import pyspark

    import coordkit_lab.__main__ as entry

    out = tmp_path / "out"
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    done = subprocess.run(
        [
            *(str(submit), "--master", "local[1]", str(entry.__file__), "run"),
            *("-w", "single-partition-topics", "-s", "range", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert not [line for line in lines(done.stderr) if " INFO " in line], done.stderr[:3000]
    log = (out / "spark.log").read_text()
    assert "INFO SparkContext: Running Spark version" in log
    assert "Successfully stopped SparkContext" in log  # to the end of the run
    assert "error" not in done.stderr.lower()


# -- a standalone cluster ----------------------------------------------------------------------


class Standalone:
    """A Spark standalone master and workers on 127.0.0.1, each in its own process group."""

    def __init__(self, directory: Path, env: dict[str, str]):
        import pyspark

        self.directory = directory
        self.env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **env}
        self.spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        with open(self.directory / f"{name}.log", "wb") as log:
            process = subprocess.Popen(
                [self.spark_class, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,  # killpg takes the worker's executor with it
            )
        self.processes.append(process)
        return process

    def log(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, workers: int) -> None:
        self._start(
            "master",
            *("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"),
            *("--port", str(self.port), "--webui-port", "0"),
        )
        wait_for(lambda: _listening(self.port), 60, "the Spark master to listen")
        for index in range(workers):
            work = self.directory / f"work-{index}"
            self._start(
                f"worker-{index}",
                *("org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1"),
                *("--webui-port", "0", "--cores", "1", "--memory", "1g", "--work-dir", str(work)),
            )
        for index in range(workers):
            wait_for(
                lambda i=index: "Successfully registered with master" in self.log(f"worker-{i}"),
                60,
                f"worker {index} to register",
            )

    def kill_worker_running(self, pid: int) -> int:
        """Kill the worker whose executor runs the Python worker ``pid``: the worker's process
        group (worker and executor JVMs), and the Python daemon's own group (it has one)."""
        ancestors = _ancestors(pid)
        index, worker = next((i, p) for i, p in enumerate(self.processes[1:]) if p.pid in ancestors)
        os.killpg(os.getpgid(pid), signal.SIGKILL)
        os.killpg(worker.pid, signal.SIGKILL)
        return index

    def stop(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def _ancestors(pid: int) -> set[int]:
    found = set()
    while pid > 1:
        found.add(pid)
        # /proc/PID/stat: "pid (name) state ppid ...", the name may hold spaces and parentheses.
        pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    return found


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[tuple[Standalone, dict[str, str]]]:
    env = worker_module(tmp_path / "worker", "pyspark_hold_once", HOLD_ONCE)
    cluster = Standalone(tmp_path, {"PYTHONPATH": env["PYTHONPATH"]})
    try:
        cluster.start(workers=2)
        yield cluster, env
    finally:
        cluster.stop()


@pytest.mark.spark_cluster
def test_an_executor_lost_mid_run_is_shown_counted_and_its_task_retried(
    standalone: tuple[Standalone, dict[str, str]], tmp_path: Path
) -> None:
    """Two one-core workers; the first scenario holds its task until the test kills that
    worker (and its executor). Spark retries the task on the other executor; the bar and
    summary.json say so, and every scenario's rows are there."""
    cluster, env = standalone
    out = tmp_path / "out"
    marker = Path(env["COORDKIT_TEST_MARKER"])
    with open(tmp_path / "lab.out", "w+") as stdout, open(tmp_path / "lab.err", "w+") as stderr:
        lab = subprocess.Popen(
            [
                *(sys.executable, "-m", "coordkit_lab", "run", "-w", "zipf-load"),
                *("-s", "range", "-s", "roundrobin", "--master", cluster.url, "--out", str(out)),
            ],
            stdout=stdout,
            stderr=stderr,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "COLUMNS": "200", **env},
        )
        try:
            wait_for(lambda: marker.exists() and marker.read_text(), 180, "a scenario to start")
            killed = cluster.kill_worker_running(int(marker.read_text()))
            code = lab.wait(timeout=180)
        finally:
            if lab.poll() is None:
                lab.kill()
        stdout.seek(0)
        stderr.seek(0)
        shown, errors = stdout.read(), stderr.read()
    assert code == 0, shown[-2000:] + errors[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    run = summary["run"]
    assert (run["executors_lost"], run["tasks_retried"]) == (1, 1)
    assert run["master"] == cluster.url
    assert "1 executor lost · 1 task retried" in shown
    totals = summary["tables"]["totals"][0]
    assert (totals["scenarios"], totals["failed"]) == (6, 0)
    log = (out / "spark.log").read_text()
    assert "Lost executor" in log or "lost executor" in log.lower()
    # The executors' JVMs are not pointed at a logging file that exists only on the driver.
    commands = [
        p.read_text(errors="replace").splitlines()[0]
        for p in (tmp_path / f"work-{1 - killed}").rglob("stderr")
    ]
    assert commands
    assert all("Spark Executor Command" in c for c in commands)
    assert not any("log4j2.configurationFile" in c for c in commands)
