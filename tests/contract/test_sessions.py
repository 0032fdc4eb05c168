"""Contract: session identity, states, listeners and closing."""

from __future__ import annotations

import pytest

from coordkit.store import (
    ConnectionLossError,
    MetadataStore,
    SessionState,
    StoreCharacteristics,
    StoreClosedError,
    UnsupportedError,
)
from harness.backends import Backend, StoreFactory
from harness.waiting import wait_for


def test_new_session_is_connected_with_a_distinct_id(
    store: MetadataStore, other: MetadataStore
) -> None:
    assert store.state is SessionState.CONNECTED
    assert store.session_id != 0
    assert store.session_id != other.session_id


def test_listener_sees_suspended_then_connected(backend: Backend, store: MetadataStore) -> None:
    states: list[SessionState] = []
    store.add_listener(states.append)
    backend.disconnect(store)
    wait_for(lambda: SessionState.SUSPENDED in states, what="SUSPENDED")
    backend.reconnect(store)
    wait_for(lambda: states[-1:] == [SessionState.CONNECTED], what="CONNECTED")
    assert SessionState.LOST not in states


def test_operations_fail_fast_while_disconnected(backend: Backend, store: MetadataStore) -> None:
    store.create("/n", b"")
    backend.disconnect(store)
    wait_for(lambda: store.state is SessionState.SUSPENDED, what="SUSPENDED")
    with pytest.raises(ConnectionLossError):
        store.get("/n")
    backend.reconnect(store)
    wait_for(lambda: store.state is SessionState.CONNECTED, what="CONNECTED")
    assert store.get("/n")[0] == b""


def test_removed_listener_is_not_called(backend: Backend, store: MetadataStore) -> None:
    states: list[SessionState] = []
    witness: list[SessionState] = []
    store.add_listener(states.append)
    store.add_listener(witness.append)
    store.remove_listener(states.append)
    backend.disconnect(store)
    backend.reconnect(store)
    wait_for(lambda: witness[-1:] == [SessionState.CONNECTED], what="witness")
    assert states == []


def test_closed_store_refuses_operations(store: MetadataStore) -> None:
    store.close()
    assert store.state is SessionState.CLOSED
    with pytest.raises(StoreClosedError):
        store.get("/")
    store.close()  # closing twice is harmless


def test_context_manager_closes(open_session: StoreFactory) -> None:
    with open_session() as s:
        s.create("/ctx", b"", ephemeral=True)
    assert s.state is SessionState.CLOSED


def test_characteristics_are_declared_and_enforced(store: MetadataStore) -> None:
    traits = store.characteristics
    assert isinstance(traits, StoreCharacteristics)
    assert traits.ephemeral_nodes
    assert traits.sequential_nodes
    assert traits.max_data_size >= 1_000_000
    store.require("ephemeral_nodes", "sequential_nodes")
    lacking = [
        name
        for name in ("durable", "linearizable_writes", "shared_across_processes")
        if not getattr(traits, name)
    ]
    if lacking:
        with pytest.raises(UnsupportedError) as info:
            store.require(*lacking)
        assert lacking[0] in str(info.value)
    with pytest.raises(ValueError):
        store.require("teleportation")


def test_repr_names_backend_without_secrets(store: MetadataStore) -> None:
    text = repr(store)
    assert store.url.scheme in text
    if store.url.password:
        assert store.url.password not in text
