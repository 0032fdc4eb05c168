"""The Kafka jar cache that ``bash kafka-dist/fetch.sh`` fills: the poms and the fixture name the
same releases, every tool's main class is in the fetched jars, and a missing or damaged cache
fails in one line naming the fix (the script's own checks run with stand-ins for java and mvn: no
network)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from coordkit.testing.servers import (
    KAFKA_KRAFT_VERSION,
    KAFKA_ZOOKEEPER_MODE_VERSION,
    KafkaCluster,
    KafkaUnavailableError,
    kafka_home,
)
from coordkit.testing.servers.kafka_tools import HOME_VARIABLE, TOOL_CLASSES, major_version

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = (KAFKA_ZOOKEEPER_MODE_VERSION, KAFKA_KRAFT_VERSION)


def test_the_poms_fetch_the_releases_the_fixture_runs() -> None:
    declared = {
        pom.parent.name: re.search(r"<kafka.version>([^<]+)</kafka.version>", pom.read_text())
        for pom in (ROOT / "kafka-dist").glob("*/pom.xml")
    }
    assert {series: match.group(1) for series, match in declared.items() if match} == {
        "3.9": KAFKA_ZOOKEEPER_MODE_VERSION,
        "4": KAFKA_KRAFT_VERSION,
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_every_tools_main_class_is_in_the_fetched_jars(version: str) -> None:
    classes: set[str] = set()
    for jar in (kafka_home(version) / "lib").glob("*.jar"):
        with zipfile.ZipFile(jar) as archive:
            classes.update(name for name in archive.namelist() if name.endswith(".class"))
    tools = TOOL_CLASSES[major_version(version)]
    missing = {
        tool: main
        for tool, main in tools.items()
        if main.replace(".", "/") + ".class" not in classes
    }
    assert not missing
    assert "kafka/Kafka.class" in classes  # the broker's own main class


def test_a_cache_path_with_nothing_fetched_fails_in_one_line_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOME_VARIABLE, str(tmp_path / "nowhere"))
    with pytest.raises(KafkaUnavailableError) as raised:
        KafkaCluster()
    message = str(raised.value)
    assert "\n" not in message
    assert str(tmp_path / "nowhere" / KAFKA_KRAFT_VERSION) in message
    assert message.endswith("run: bash kafka-dist/fetch.sh")


def test_a_cache_missing_a_jar_fails_naming_the_jar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / KAFKA_KRAFT_VERSION
    (cache / "lib").mkdir(parents=True)
    (cache / "lib.manifest").write_text(
        "pom:0123 kafka-dist/4/pom.xml\n10 0123 kafka-clients.jar\n"
    )
    monkeypatch.setenv(HOME_VARIABLE, str(tmp_path))
    with pytest.raises(KafkaUnavailableError, match=r"kafka-clients\.jar") as raised:
        kafka_home(KAFKA_KRAFT_VERSION)
    assert "\n" not in str(raised.value)
    assert "bash kafka-dist/fetch.sh" in str(raised.value)


def _fetch(cache: Path, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, HOME_VARIABLE: str(cache), "PATH": path}
    return subprocess.run(
        ["bash", str(ROOT / "kafka-dist" / "fetch.sh"), *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _link_or_copy(source: str, target: str) -> None:
    """A hard link where the temporary folder is on the cache's file system, else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _stand_in(folder: Path, name: str, script: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("#!/bin/sh\n" + script)
    (folder / name).chmod(0o755)


def test_fetch_with_a_complete_cache_does_nothing(tmp_path: Path) -> None:
    # mvn is a stand-in that fails: a complete cache must not call it.
    _stand_in(tmp_path / "bin", "mvn", "echo mvn was called >&2; exit 1\n")
    cache = kafka_home(KAFKA_KRAFT_VERSION).parent
    done = _fetch(cache, f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    assert done.returncode == 0, done.stderr
    assert "mvn was called" not in done.stderr
    for version in VERSIONS:
        assert f"Apache Kafka {version}: cached in" in done.stderr


def test_fetch_reports_a_damaged_cache_and_fetches_it_again(tmp_path: Path) -> None:
    # A copy of the cache missing one jar; mvn is a stand-in that fails, so the refetch it
    # triggers ends in fetch.sh's one-line error.
    cache = tmp_path / "cache"
    for version in VERSIONS:
        shutil.copytree(kafka_home(version), cache / version, copy_function=_link_or_copy)
    (cache / KAFKA_KRAFT_VERSION / "lib" / f"kafka-clients-{KAFKA_KRAFT_VERSION}.jar").unlink()
    _stand_in(tmp_path / "bin", "mvn", "echo '[ERROR] no network in this test'; exit 1\n")
    done = _fetch(cache, f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    assert done.returncode == 2
    assert (
        f"the cache of Apache Kafka {KAFKA_KRAFT_VERSION} in {cache / KAFKA_KRAFT_VERSION} is "
        f"damaged (lib/kafka-clients-{KAFKA_KRAFT_VERSION}.jar is missing): fetching it again"
    ) in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"kafka-dist/fetch.sh: Maven could not fetch Apache Kafka {KAFKA_KRAFT_VERSION}"
    )
    assert "[ERROR] no network in this test" in last


def test_fetch_refuses_a_java_older_than_17_in_one_line(tmp_path: Path) -> None:
    _stand_in(tmp_path / "bin", "java", "echo 'openjdk version \"11.0.22\" 2024-01-16' >&2\n")
    done = _fetch(tmp_path / "cache", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "Java 11.0.22" in done.stderr
    assert "apt-get install openjdk-17-jdk-headless" in done.stderr
