"""Engine fixtures: clusters of in-process brokers on the backend under test (``--backend``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordkit.engine import Cluster, ClusterView
from coordkit.store import MetadataStore, SessionState
from coordkit.testing.backends import NOT_APPLICABLE, Capability, capabilities_of
from harness.backends import Backend
from harness.waiting import wait_for

ClusterFactory = Callable[..., Cluster]


@pytest.fixture(autouse=True)
def _warm_standby_needs_a_change_feed(request: pytest.FixtureRequest) -> None:
    """``warm-standby`` refuses a store without ``ordered_change_feed`` (tested in
    tests/unit/test_metadata_image.py): its tests do not apply to one, as in the kit."""
    callspec = getattr(request.node, "callspec", None)
    strategy = callspec.params.get("strategy") if callspec is not None else None
    if strategy != "warm-standby" and not request.module.__name__.endswith("test_warm_standby"):
        return
    if "backend" not in request.fixturenames:
        return  # not on a store given with --backend (the lab's workload runs on memory)
    backend: Backend = request.getfixturevalue("backend")
    if Capability.ORDERED_CHANGE_FEED not in capabilities_of(backend):
        pytest.skip(f"{NOT_APPLICABLE}: {backend.name} declares no ordered_change_feed")


@pytest.fixture
def store_url(backend: Backend) -> str:
    return backend.new_url()


@pytest.fixture
def make_cluster(backend: Backend, store_url: str) -> Iterator[ClusterFactory]:
    """Start clusters on the test's namespace; all are closed after the test."""
    clusters: list[Cluster] = []

    def factory(brokers: Any = 3, **options: Any) -> Cluster:
        cluster = Cluster(lambda: backend.open(store_url), brokers, seed=7, **options)
        clusters.append(cluster)
        return cluster.start()

    yield factory
    for cluster in clusters:
        cluster.close()


@pytest.fixture
def open_session(backend: Backend, store_url: str) -> Iterator[Callable[[], MetadataStore]]:
    opened: list[MetadataStore] = []

    def factory() -> MetadataStore:
        store = backend.open(store_url)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        if store.state is not SessionState.CLOSED:
            store.close()


def settle(cluster: Cluster, what: str = "the cluster to settle") -> ClusterView:
    wait_for(cluster.settled, what=what)
    return cluster.view()


def wait_view(cluster: Cluster, predicate: Callable[[ClusterView], bool], what: str) -> ClusterView:
    """Wait until the store-read view satisfies ``predicate`` and the controller is idle."""

    def check() -> ClusterView | None:
        if not cluster.settled():
            return None
        view = cluster.view()
        return view if predicate(view) else None

    result: ClusterView = wait_for(check, what=what)
    return result


@pytest.fixture
def settled() -> Callable[..., ClusterView]:
    return settle


@pytest.fixture
def until() -> Callable[..., ClusterView]:
    return wait_view
