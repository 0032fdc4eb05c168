"""Real Apache Kafka clusters for the tests that take Kafka as the oracle.

The jars come from ``bash kafka-dist/fetch.sh`` (``bash run test`` runs it before tox); nothing is
downloaded here, and a missing cache fails the test naming that command. Clusters are module-scoped
(reused by a module's tests; one cluster at a time, as modules run one after another), and a
failing test's report ends with the tail of every broker's log.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordkit.testing.servers import (
    KAFKA_KRAFT_VERSION,
    KAFKA_ZOOKEEPER_MODE_VERSION,
    KafkaCluster,
    KafkaUnavailableError,
    StandaloneZooKeeper,
    kafka_home,
)


def pytest_report_header() -> list[str]:
    lines = []
    for version in (KAFKA_ZOOKEEPER_MODE_VERSION, KAFKA_KRAFT_VERSION):
        try:
            lines.append(f"Apache Kafka {version}: {kafka_home(version)}")
        except KafkaUnavailableError as error:
            lines.append(f"Apache Kafka {version}: {error}")
    return lines


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: pytest.TestReport = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        for name, value in funcargs.items():
            if isinstance(value, KafkaCluster):
                report.sections.append((f"Kafka logs of {name} ({value!r})", value.log_tail()))
    return report


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[StandaloneZooKeeper]:
    """The private ZooKeeper server of the store tests (``ZooKeeperBackend`` starts the same);
    each Kafka cluster on it has a chroot of its own."""
    server = StandaloneZooKeeper().start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def zookeeper_mode_cluster(zookeeper: StandaloneZooKeeper) -> Iterator[KafkaCluster]:
    """Three Kafka 3.9 brokers (ids 1-3, racks a, b, a) on a chroot of the test ZooKeeper."""
    with KafkaCluster(
        zookeeper=zookeeper.hosts, broker_ids=(1, 2, 3), racks={1: "a", 2: "b", 3: "a"}
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kraft_cluster() -> Iterator[KafkaCluster]:
    """Three combined broker+controller nodes of Kafka 4 (ids 1-3)."""
    with KafkaCluster(broker_ids=(1, 2, 3)) as cluster:
        yield cluster
