"""The scenario differential's fixture: both clusters for the module (see ``clusters.py``), and
their logs in the report of a failing test."""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from coordkit.testing.servers import KafkaCluster
from differential.clusters import (
    KAFKA_BROKER_IDS,
    KAFKA_ONLY_CONFIGS,
    KAFKA_RACKS,
    SHARED_CONFIGS,
    Clusters,
    ClusterUnderTest,
    CoordkitServe,
    api_versions,
    warm_up,
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    found = getattr(item, "funcargs", {}).get("clusters")
    if report.failed and isinstance(found, Clusters):
        report.sections.append(("the clusters' logs", found.logs()))
    return report


@pytest.fixture(scope="module")
def clusters() -> Iterator[Clusters]:
    """Both clusters, warmed up; coordkit's starts first (seconds), Kafka's after (tens)."""
    serve = CoordkitServe()
    try:
        with KafkaCluster(
            broker_ids=KAFKA_BROKER_IDS,
            racks=KAFKA_RACKS,
            properties={**SHARED_CONFIGS, **KAFKA_ONLY_CONFIGS},
        ) as kafka_cluster:
            ids = tuple(sorted(serve.addresses))
            coordkit = ClusterUnderTest(
                "coordkit",
                tuple(serve.addresses[i] for i in ids),
                ids,
                api_versions(serve.addresses[ids[0]]),
            )
            nodes = [kafka_cluster.nodes[i] for i in KAFKA_BROKER_IDS]
            kafka = ClusterUnderTest(
                "kafka",
                tuple((n.host, n.port) for n in nodes),
                KAFKA_BROKER_IDS,
                api_versions((nodes[0].host, nodes[0].port)),
            )
            yield Clusters(warm_up(kafka), warm_up(coordkit), kafka_cluster, serve)
    finally:
        serve.stop()
