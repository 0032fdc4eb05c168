"""The tools' clusters: three Kafka 4.4 KRaft nodes for the session (brokers 0, 1 and 2, the
differential's broker configs), and a ``coordkit serve`` of three brokers on the store under test
(``--backend``) per module; their logs in the report of a failing test."""

from __future__ import annotations

from collections.abc import Generator, Iterator

import attrs
import pytest

from coordkit.testing.servers import KafkaCluster
from differential.clusters import (
    KAFKA_ONLY_CONFIGS,
    SHARED_CONFIGS,
    ClusterUnderTest,
    CoordkitServe,
    api_versions,
    warm_up,
)
from harness.backends import Backend

BROKER_IDS = (0, 1, 2)


@attrs.frozen
class ServeUnderTest:
    """``coordkit serve`` on one store: its bootstrap and the api versions it advertises."""

    store: str
    bootstrap: str
    api_versions: dict[str, tuple[int, int]]
    serve: CoordkitServe = attrs.field(repr=False)


def _warmed_up(name: str, addresses: list[tuple[str, int]]) -> dict[str, tuple[int, int]]:
    """The offsets topic created and led, a producer id from every broker (the differential's
    warm-up: no command depends on being the first to ask); the api versions advertised."""
    versions = api_versions(addresses[0])
    warm_up(ClusterUnderTest(name, tuple(addresses), BROKER_IDS, versions))
    return versions


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaCluster]:
    with KafkaCluster(broker_ids=BROKER_IDS,
                      properties={**SHARED_CONFIGS, **KAFKA_ONLY_CONFIGS}) as cluster:  # fmt: skip
        _warmed_up("kafka", [(cluster.nodes[i].host, cluster.nodes[i].port) for i in BROKER_IDS])
        yield cluster


@pytest.fixture(scope="module")
def coordkit(
    backend: Backend, backend_name: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeUnderTest]:
    """Record logs on disk as Kafka's (log directories the tools name, sizes of files)."""
    logs = tmp_path_factory.mktemp("coordkit-logs")
    serve = CoordkitServe(backend.new_url(), ("--data-dir", str(logs)))
    try:
        addresses = [serve.addresses[i] for i in sorted(serve.addresses)]
        assert sorted(serve.addresses) == list(BROKER_IDS)
        yield ServeUnderTest(
            backend_name,
            ",".join(f"{host}:{port}" for host, port in addresses),
            _warmed_up("coordkit", addresses),
            serve,
        )
    finally:
        serve.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A command or AdminClient call known to show a defect of coordkit's handlers on a store
    (``defect``, ``defect_stores``) is a strict xfail there, naming it."""
    from tools import admin_client, commands

    scripts = {"test_command": commands.BY_NAME, "test_admin_call": admin_client.BY_NAME}
    for item in items:
        if not isinstance(item, pytest.Function) or item.originalname not in scripts:
            continue
        params = item.callspec.params
        run = scripts[item.originalname][params["name"]]
        if run.defect and params.get("backend_name") in run.defect_stores:
            item.add_marker(pytest.mark.xfail(strict=True, reason=run.defect))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    funcargs = getattr(item, "funcargs", {})
    found = funcargs.get("coordkit")
    if report.failed and isinstance(found, ServeUnderTest):
        report.sections.append(("coordkit serve's log", found.serve.log_tail()))
        cluster = funcargs.get("kafka")
        if isinstance(cluster, KafkaCluster):
            report.sections.append(("Kafka's log", cluster.log_tail(lines=20)))
    return report
