"""Apache Kafka's jars for the kit's Kafka fixtures: where they are, the Java that runs them, and
Kafka's own command-line tools run from them.

The jars are fetched once, outside any test, by ``bash kafka-dist/fetch.sh`` (Maven, from the poms
in the project's ``kafka-dist/`` folder) into ``.cache/kafka/<version>/lib``. Nothing here
downloads: a missing Java or jar cache raises :class:`KafkaUnavailableError` naming the fix, and a
test fails with it (it never skips).

The cache is ``$COORDKIT_KAFKA_HOME/<version>`` when that variable is set, otherwise
``.cache/kafka/<version>`` of the first folder holding ``kafka-dist/fetch.sh`` up from the current
directory (tox runs the tests from the project root) or from this file (an editable install).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

#: The Kafka of ZooKeeper mode (3.9 is its last release series) and the KRaft-only Kafka 4; the
#: same versions as ``<kafka.version>`` in kafka-dist/3.9/pom.xml and kafka-dist/4/pom.xml (a test
#: checks).
KAFKA_ZOOKEEPER_MODE_VERSION = "3.9.2"
KAFKA_KRAFT_VERSION = "4.4.0"
HOME_VARIABLE = "COORDKIT_KAFKA_HOME"
FETCH_HINT = "bash kafka-dist/fetch.sh"
JAVA_HINT = "apt-get install openjdk-17-jdk-headless"
#: Written last by kafka-dist/fetch.sh: its presence means the version's jars are complete.
MANIFEST = "lib.manifest"
#: JVM options every Kafka process gets: a small serial heap, and only the quick C1 compiler
#: (tests run brokers for minutes, not days: start-up and CPU on two cores matter more than peak
#: throughput).
JVM_OPTIONS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)
#: What Kafka's own start scripts give a broker (kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS,
#: with -Xms equal to -Xmx as kafka-server-start.sh's KAFKA_HEAP_OPTS): for measuring Kafka's
#: speed, where the quick test options above would handicap it.
PRODUCTION_JVM_OPTIONS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
TOOL_HEAP = "256m"
TOOL_TIMEOUT = 120.0


class KafkaUnavailableError(RuntimeError):
    """Java or the Kafka jar cache is missing: the test fails (it never skips) naming the fix."""


def major_version(version: str) -> int:
    """3 for ``3.9.2``; a version that does not start with a number is refused in one line."""
    match = re.match(r"(\d+)\.", version)
    if match is None:
        raise ValueError(f"Kafka version {version!r}: give a release such as 3.9.2 or 4.4.0")
    return int(match.group(1))


@functools.cache
def require_java() -> str:
    """The ``java`` binary, when it is Java 17 or newer (Kafka 4's brokers need 17)."""
    java = shutil.which("java")
    if java is None:
        raise KafkaUnavailableError(f"java is not installed; Kafka needs Java 17+: {JAVA_HINT}")
    banner = subprocess.run(
        [java, "-version"], capture_output=True, text=True, timeout=60, check=False
    ).stderr
    match = re.search(r'version "(?:1\.)?(\d+)', banner)
    if match is None or int(match.group(1)) < 17:
        found = banner.splitlines()[0] if banner else "no version banner"
        raise KafkaUnavailableError(
            f"{java} is not Java 17 or newer ({found}); Kafka needs it: {JAVA_HINT}"
        )
    return java


def _project_roots() -> list[Path]:
    starts = [Path.cwd(), Path(__file__).resolve().parent]
    return [
        folder
        for start in starts
        for folder in (start, *start.parents)
        if (folder / "kafka-dist" / "fetch.sh").is_file()
    ]


def kafka_cache_root() -> Path:
    """The folder holding one ``<version>/lib`` per fetched Kafka release."""
    configured = os.environ.get(HOME_VARIABLE)
    if configured:
        return Path(configured)
    roots = _project_roots()
    if not roots:
        raise KafkaUnavailableError(
            f"no Kafka jar cache: no folder holding kafka-dist/fetch.sh up from {Path.cwd()}; "
            f"run the tests from coordkit's project folder, or set {HOME_VARIABLE} to the cache "
            f"that {FETCH_HINT} filled"
        )
    return roots[0] / ".cache" / "kafka"


def kafka_home(version: str) -> Path:
    """The cache of one Kafka release (``lib/*.jar``), checked complete against its manifest."""
    major_version(version)
    home = kafka_cache_root() / version
    manifest = home / MANIFEST
    where = f"{HOME_VARIABLE}={os.environ[HOME_VARIABLE]}" if HOME_VARIABLE in os.environ else ""
    if not manifest.is_file():
        raise KafkaUnavailableError(
            f"Apache Kafka {version} is not fetched ({manifest} is missing{', ' if where else ''}"
            f"{where}); run: {FETCH_HINT}"
        )
    for line in manifest.read_text().splitlines():
        if line.startswith("pom:"):  # the digest of the pom the jars were fetched from
            continue
        size, _digest, name = line.split(" ", 2)
        jar = home / "lib" / name
        if not jar.is_file() or jar.stat().st_size != int(size):
            raise KafkaUnavailableError(
                f"the jar cache of Apache Kafka {version} is damaged ({jar} is missing or not "
                f"{size} bytes); run: {FETCH_HINT}"
            )
    return home


def classpath(version: str) -> str:
    """Every jar of the release, as Java's ``lib/*`` wildcard."""
    return str(kafka_home(version) / "lib" / "*")


def compile_java(source: Path, main_class: str, version: str = KAFKA_KRAFT_VERSION) -> str:
    """The classpath that runs ``main_class`` of the Java program ``source`` (one file): its
    classes, compiled against Kafka ``version``'s jars once and cached beside the jar cache by the
    digests of the source and the jars, and the jars.

    :raises KafkaUnavailableError: no JDK (``javac``) or no jar cache, naming the install.
    """
    require_java()
    home = kafka_home(version)
    javac = shutil.which("javac")
    if javac is None:
        raise KafkaUnavailableError(
            f"javac is not installed; {source.name} needs a JDK: {JAVA_HINT}"
        )
    jars = str(home / "lib" / "*")
    digest = hashlib.sha256(source.read_bytes() + (home / MANIFEST).read_bytes()).hexdigest()
    classes = kafka_cache_root().parent / "java-programs" / f"{source.stem}-{digest[:16]}"
    if not (classes / f"{main_class}.class").is_file():
        staging = classes.with_name(f"{classes.name}.{os.getpid()}.tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        done = subprocess.run(
            [javac, "-nowarn", "-encoding", "UTF-8", "-d", str(staging), "-cp", jars, str(source)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"javac failed on {source}: {done.stderr}")
        shutil.rmtree(classes, ignore_errors=True)
        staging.rename(classes)
    return f"{classes}:{jars}"


def log4j_option(version: str, config: Path) -> str:
    """The system property that points Kafka's logging at ``config``: reload4j up to 3.9, log4j2
    from Kafka 4."""
    if major_version(version) >= 4:
        return f"-Dlog4j2.configurationFile={config}"
    return f"-Dlog4j.configuration=file:{config}"


def write_log_config(version: str, path: Path, *, log_file: Path | None, level: str) -> Path:
    """A logging configuration for ``version``'s backend: ``level`` and up into ``log_file``
    (standard error when ``None``); the per-request and state-change loggers only warn."""
    quiet = ("kafka.request.logger", "state.change.logger", "org.apache.zookeeper")
    if major_version(version) >= 4:
        appender = (
            f"appender.out.type = File\nappender.out.fileName = {log_file}\n"
            if log_file is not None
            else "appender.out.type = Console\nappender.out.target = SYSTEM_ERR\n"
        )
        lines = [
            "status = warn",
            appender.rstrip("\n"),
            "appender.out.name = out",
            "appender.out.layout.type = PatternLayout",
            "appender.out.layout.pattern = [%d] %p %m (%c)%n",
            f"rootLogger.level = {level}",
            "rootLogger.appenderRef.out.ref = out",
        ]
        for index, name in enumerate(quiet):
            lines += [f"logger.quiet{index}.name = {name}", f"logger.quiet{index}.level = warn"]
    else:
        lines = [
            f"log4j.rootLogger={level.upper()}, out",
            *(
                [
                    "log4j.appender.out=org.apache.log4j.FileAppender",
                    f"log4j.appender.out.File={log_file}",
                ]
                if log_file is not None
                else [
                    "log4j.appender.out=org.apache.log4j.ConsoleAppender",
                    "log4j.appender.out.Target=System.err",
                ]
            ),
            "log4j.appender.out.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n",
            *(f"log4j.logger.{name}=WARN" for name in quiet),
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


#: Each tool's main class, as Kafka's ``bin/<tool>.sh`` of the release series runs it. Every class
#: is checked against the fetched jars by tests/apache_kafka.
_COMMON_TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-storage": "kafka.tools.StorageTool",
}
TOOL_CLASSES: dict[int, Mapping[str, str]] = {
    3: {
        **_COMMON_TOOLS,
        "kafka-configs": "kafka.admin.ConfigCommand",
        "kafka-acls": "kafka.admin.AclCommand",
        "kafka-broker-api-versions": "kafka.admin.BrokerApiVersionsCommand",
        "kafka-console-producer": "kafka.tools.ConsoleProducer",
        "zookeeper-shell": "org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka",
    },
    4: {
        **_COMMON_TOOLS,
        "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
        "kafka-acls": "org.apache.kafka.tools.AclCommand",
        "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
        "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
        "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
        "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
        "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
        "kafka-share-perf-test": "org.apache.kafka.tools.ShareConsumerPerformance",
        "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    },
}


#: Arguments a tool's ``bin/<tool>.sh`` puts before the caller's.
_TOOL_LEADING_ARGS = {"zookeeper-shell": ("-server",)}


def tool_main_class(version: str, tool: str) -> str:
    """The main class of ``tool`` (``kafka-topics`` or ``kafka-topics.sh``) in ``version``."""
    tools = TOOL_CLASSES.get(major_version(version))
    if tools is None:
        raise ValueError(f"Kafka {version}: no tool table for it (known: 3.x, 4.x)")
    name = tool.removesuffix(".sh")
    if name not in tools:
        raise ValueError(f"Kafka {version} has no tool {tool!r}; known: {', '.join(sorted(tools))}")
    return tools[name]


def kafka_tool(
    version: str,
    tool: str,
    *args: str,
    timeout: float = TOOL_TIMEOUT,
    input: str | None = None,
    heap: str = TOOL_HEAP,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools from the fetched jars, as ``bin/<tool>.sh args``
    would, and return the finished process (text output; its log lines, WARN and up, on
    standard error). ``check`` raises :class:`subprocess.CalledProcessError` on a non-zero exit.
    """
    main_class = tool_main_class(version, tool)
    java = require_java()
    jars = classpath(version)
    with tempfile.TemporaryDirectory(prefix="coordkit-kafka-tool-") as scratch:
        log_config = write_log_config(
            version, Path(scratch) / "log4j.properties", log_file=None, level="warn"
        )
        command = [
            java,
            f"-Xmx{heap}",
            *JVM_OPTIONS,
            log4j_option(version, log_config),
            "-cp",
            jars,
            main_class,
            *_TOOL_LEADING_ARGS.get(tool.removesuffix(".sh"), ()),
            *args,
        ]
        return subprocess.run(
            command,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
