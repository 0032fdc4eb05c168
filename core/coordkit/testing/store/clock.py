"""The store contract on a controllable clock: sessions time out on the store's clock, and only
sessions whose client is away do."""

from __future__ import annotations

from coordkit.store import MetadataStore, SessionState
from coordkit.testing.backends import Capability, StoreBackend, requires
from coordkit.testing.store.base import StoreSuite
from coordkit.testing.waiting import wait_for


@requires(Capability.ADVANCE_CLOCK, Capability.EPHEMERAL_NODES)
class StoreClockTests(StoreSuite):
    """Session expiry follows the backend's clock."""

    #: Seconds past any session timeout a store uses by default.
    beyond_any_timeout = 3600.0

    @requires(Capability.CUT_CONNECTION)
    def test_a_disconnected_session_expires_once_the_clock_passes_its_timeout(
        self, store_backend: StoreBackend, store: MetadataStore, other: MetadataStore
    ) -> None:
        states: list[SessionState] = []
        store.add_listener(states.append)
        store.create("/lease", b"", ephemeral=True)
        old_session = store.session_id
        store_backend.disconnect(store)
        assert other.exists("/lease") is not None, "a session must outlive a short disconnection"
        store_backend.advance_clock(self.beyond_any_timeout)
        wait_for(
            lambda: other.exists("/lease") is None,
            what="the ephemeral node of the timed-out session to go",
        )
        store_backend.reconnect(store)
        wait_for(lambda: SessionState.LOST in states, what="the owner to see LOST")
        wait_for(
            lambda: store.state is SessionState.CONNECTED and store.session_id != old_session,
            what="a new session after the timeout",
        )

    def test_a_connected_session_outlives_any_clock_advance(
        self, store_backend: StoreBackend, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/lease", b"", ephemeral=True)
        session = store.session_id
        store_backend.advance_clock(self.beyond_any_timeout)
        stat = other.exists("/lease")
        assert stat is not None, "a connected session must not expire (its client is alive)"
        assert stat.ephemeral_owner == session
        assert store.state is SessionState.CONNECTED
        assert store.session_id == session
