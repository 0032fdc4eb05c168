"""The store contract: session identity, states, listeners and closing."""

from __future__ import annotations

import attrs
import pytest

from coordkit.store import (
    ConnectionLossError,
    MetadataStore,
    SessionState,
    StoreCharacteristics,
    StoreClosedError,
    UnsupportedError,
)
from coordkit.testing.backends import Capability, StoreBackend, StoreFactory, requires
from coordkit.testing.store.base import StoreSuite
from coordkit.testing.waiting import wait_for


class StoreSessionTests(StoreSuite):
    """Session identity, states, listeners and closing."""

    def test_new_session_is_connected_with_a_distinct_id(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        assert store.state is SessionState.CONNECTED
        assert store.session_id != 0
        assert store.session_id != other.session_id

    @requires(Capability.CUT_CONNECTION)
    def test_listener_sees_suspended_then_connected(
        self, store_backend: StoreBackend, store: MetadataStore
    ) -> None:
        states: list[SessionState] = []
        store.add_listener(states.append)
        store_backend.disconnect(store)
        wait_for(lambda: SessionState.SUSPENDED in states, what="SUSPENDED")
        store_backend.reconnect(store)
        wait_for(lambda: states[-1:] == [SessionState.CONNECTED], what="CONNECTED")
        assert SessionState.LOST not in states

    @requires(Capability.CUT_CONNECTION)
    def test_operations_fail_fast_while_disconnected(
        self, store_backend: StoreBackend, store: MetadataStore
    ) -> None:
        store.create("/n", b"")
        store_backend.disconnect(store)
        wait_for(lambda: store.state is SessionState.SUSPENDED, what="SUSPENDED")
        with pytest.raises(ConnectionLossError):
            store.get("/n")
        store_backend.reconnect(store)
        wait_for(lambda: store.state is SessionState.CONNECTED, what="CONNECTED")
        assert store.get("/n")[0] == b""

    @requires(Capability.CUT_CONNECTION)
    def test_removed_listener_is_not_called(
        self, store_backend: StoreBackend, store: MetadataStore
    ) -> None:
        states: list[SessionState] = []
        witness: list[SessionState] = []
        store.add_listener(states.append)
        store.add_listener(witness.append)
        store.remove_listener(states.append)
        store_backend.disconnect(store)
        store_backend.reconnect(store)
        wait_for(lambda: witness[-1:] == [SessionState.CONNECTED], what="witness")
        assert states == []

    def test_closed_store_refuses_operations(self, store: MetadataStore) -> None:
        store.close()
        assert store.state is SessionState.CLOSED
        with pytest.raises(StoreClosedError):
            store.get("/")
        store.close()  # closing twice is harmless

    @requires(Capability.EPHEMERAL_NODES)
    def test_context_manager_closes(self, open_session: StoreFactory) -> None:
        with open_session() as s:
            s.create("/ctx", b"", ephemeral=True)
        assert s.state is SessionState.CLOSED

    def test_characteristics_are_declared_and_enforced(self, store: MetadataStore) -> None:
        traits = store.characteristics
        assert isinstance(traits, StoreCharacteristics)
        assert traits.max_data_size >= 1_000_000
        names = [f.name for f in attrs.fields(StoreCharacteristics) if f.type in ("bool", bool)]
        declared = [name for name in names if getattr(traits, name)]
        lacking = [name for name in names if not getattr(traits, name)]
        store.require(*declared)
        if lacking:
            with pytest.raises(UnsupportedError) as info:
                store.require(*lacking)
            assert lacking[0] in str(info.value)
        with pytest.raises(ValueError, match="teleportation"):
            store.require("teleportation")

    def test_repr_names_backend_without_secrets(self, store: MetadataStore) -> None:
        text = repr(store)
        assert store.url.scheme in text
        if store.url.password:
            assert store.url.password not in text
