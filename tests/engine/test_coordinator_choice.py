"""Every broker of a cluster places group and transaction coordinators by the same strategy: the
first to start records its strategy in ``/coordkit/group_coordinator``, and a broker (an engine
cluster, ``coordkit serve``, ``cluster demo``) with another strategy is refused before it
writes anything, with one line naming both and the node; on every backend given with
``--backend``."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import CliRunner

from coordkit.cli import cli
from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.coordinator_choice import (
    GROUP_COORDINATOR_NODE,
    GroupCoordinatorMismatchError,
)
from coordkit.serve import KafkaServer
from coordkit.store import MetadataStore
from harness.backends import Backend
from harness.cli import one_error_line, snapshot


def _cluster(backend: Backend, store_url: str, strategy: str) -> Cluster:
    return Cluster(lambda: backend.open(store_url), 2, seed=7,
                   config=EngineConfig(group_coordinator=strategy))  # fmt: skip


def test_the_first_cluster_records_its_strategy(
    backend: Backend, store_url: str, open_session: Callable[[], MetadataStore]
) -> None:
    with _cluster(backend, store_url, "murmur2"):
        data, _ = open_session().get(GROUP_COORDINATOR_NODE)
    assert json.loads(data) == {"version": 1, "strategy": "murmur2"}
    # The same strategy again starts (a restart, another process of the cluster).
    with _cluster(backend, store_url, "murmur2") as again:
        assert again.live_brokers() == [0, 1]


def test_a_cluster_with_another_strategy_is_refused_before_it_writes(
    backend: Backend, store_url: str, open_session: Callable[[], MetadataStore]
) -> None:
    with _cluster(backend, store_url, "kafka"):
        pass
    store = open_session()
    before = snapshot(store)
    with pytest.raises(GroupCoordinatorMismatchError) as refused:
        _cluster(backend, store_url, "rendezvous").start()
    message = str(refused.value)
    assert message.startswith("group-coordinator strategy 'rendezvous': this cluster's brokers "
                              f"use 'kafka' ({GROUP_COORDINATOR_NODE})"), message  # fmt: skip
    assert snapshot(store) == before


@pytest.mark.parametrize(
    "value", [b"rendezvous", b'{"version":1}', b'{"version":2,"strategy":"x"}']
)
def test_an_unreadable_record_is_named(
    backend: Backend, store_url: str, open_session: Callable[[], MetadataStore], value: bytes
) -> None:
    store = open_session()
    store.create(GROUP_COORDINATOR_NODE, value, make_parents=True)
    before = snapshot(store)
    with pytest.raises(
        GroupCoordinatorMismatchError, match=f"^{GROUP_COORDINATOR_NODE}: unreadable"
    ):
        _cluster(backend, store_url, "kafka").start()
    assert snapshot(store) == before


@pytest.mark.parametrize("brokers", [["--broker-id", "3"], ["--brokers", "2"]])
def test_serve_with_another_strategy_says_so_in_one_line(
    backend: Backend,
    store_url: str,
    open_session: Callable[[], MetadataStore],
    brokers: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def serving(*_: object, **__: object) -> None:
        raise AssertionError("serving with another strategy than the cluster's")

    monkeypatch.setattr(KafkaServer, "serve", serving)
    with _cluster(backend, store_url, "kafka"):
        pass
    store = open_session()
    before = snapshot(store)
    argv = [
        "serve",
        "--store",
        store_url,
        *brokers,
        "--port",
        "0",
        "--group-coordinator",
        "murmur2",
    ]
    result = CliRunner().invoke(cli, argv, env={"COLUMNS": "200"})
    line = one_error_line(result)
    assert line.startswith("error: group-coordinator strategy 'murmur2': this cluster's brokers "
                           "use 'kafka'"), line  # fmt: skip
    assert snapshot(store) == before
