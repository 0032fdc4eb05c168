"""The store contract for durable stores: what was acknowledged survives a server crash."""

from __future__ import annotations

from coordkit.store import ConnectionLossError, Create, MetadataStore, SetData
from coordkit.testing.backends import Capability, StoreBackend, StoreFactory, requires
from coordkit.testing.store.base import StoreSuite, snapshot
from coordkit.testing.waiting import wait_for


@requires(Capability.DURABLE, Capability.RESTART_SERVER)
class StoreDurabilityTests(StoreSuite):
    """A durable store keeps every acknowledged write through a crash of its server."""

    def test_acknowledged_writes_survive_a_server_crash(
        self, store_backend: StoreBackend, store: MetadataStore, open_session: StoreFactory
    ) -> None:
        store.create("/d", b"one")
        store.set("/d", b"two")
        store.commit([Create("/d/child", b"c"), SetData("/d", b"three", 1)])
        store.create("/d/gone", b"")
        store.delete("/d/gone")
        before = snapshot(store)
        store_backend.restart()
        reader = open_session()
        after = wait_for(lambda: _readable(reader), what="a session on the restarted server")
        assert after == before, "acknowledged writes must survive a server crash (durable)"
        data, stat = reader.get("/d")
        assert (data, stat.version) == (b"three", 2)


def _readable(store: MetadataStore) -> dict[str, tuple[bytes, int]] | None:
    try:
        return snapshot(store)
    except ConnectionLossError:
        return None
