"""The store contract: ephemeral nodes live and die with their session."""

from __future__ import annotations

import pytest

from coordkit.store import MetadataStore, NoChildrenForEphemeralsError, SessionState
from coordkit.testing.backends import Capability, StoreBackend, requires
from coordkit.testing.store.base import StoreSuite
from coordkit.testing.waiting import wait_for


@requires(Capability.EPHEMERAL_NODES)
class StoreEphemeralTests(StoreSuite):
    """Ephemeral nodes belong to the session that made them and vanish when it ends."""

    def test_ephemeral_node_is_owned_by_the_session(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/eph", b"me", ephemeral=True)
        stat = other.exists("/eph")
        assert stat is not None
        assert stat.ephemeral
        assert stat.ephemeral_owner == store.session_id
        assert store.session_id != other.session_id

    def test_ephemeral_nodes_vanish_when_the_session_closes(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/live", b"")
        store.create("/live/a", b"", ephemeral=True)
        store.create("/persistent", b"")
        store.close()
        assert other.children("/live") == []
        assert other.exists("/persistent") is not None

    @requires(Capability.EXPIRE_SESSION)
    def test_ephemeral_nodes_vanish_when_the_session_expires(
        self, store_backend: StoreBackend, store: MetadataStore, other: MetadataStore
    ) -> None:
        states: list[SessionState] = []
        store.add_listener(states.append)
        old_session = store.session_id
        store.create("/lease", b"", ephemeral=True)
        store_backend.expire(store)
        wait_for(lambda: other.exists("/lease") is None, what="ephemeral gone after expiry")
        wait_for(lambda: SessionState.LOST in states, what="owner sees LOST")
        wait_for(lambda: store.state is SessionState.CONNECTED, what="a new session")
        assert store.session_id != old_session
        # The new session works and owns what it creates.
        store.create("/lease", b"again", ephemeral=True)
        assert other.exists("/lease").ephemeral_owner == store.session_id  # type: ignore[union-attr]

    def test_ephemeral_nodes_cannot_have_children(self, store: MetadataStore) -> None:
        store.create("/e", b"", ephemeral=True)
        with pytest.raises(NoChildrenForEphemeralsError) as info:
            store.create("/e/child", b"")
        assert info.value.path == "/e/child"

    @requires(Capability.CUT_CONNECTION)
    def test_ephemeral_survives_connection_loss_without_expiry(
        self, store_backend: StoreBackend, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/sticky", b"", ephemeral=True)
        session = store.session_id
        store_backend.disconnect(store)
        assert other.exists("/sticky") is not None
        store_backend.reconnect(store)
        wait_for(lambda: store.state is SessionState.CONNECTED, what="reconnect")
        assert store.session_id == session
        assert other.exists("/sticky").ephemeral_owner == session  # type: ignore[union-attr]

    @requires(Capability.SEQUENTIAL_NODES)
    def test_ephemeral_sequential_node_is_removed_with_its_session(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/q", b"")
        path = store.create("/q/job-", b"", ephemeral=True, sequential=True)
        assert other.exists(path) is not None
        store.close()
        assert other.exists(path) is None
