"""The store contract across machines: sessions reaching the servers through another network path
(:meth:`~coordkit.testing.backends.StoreBackend.another_path`, standing for a second host) share
the tree, its versions, sequence numbers, ephemeral nodes and watches; cutting that path suspends
only the sessions on it, and they resume their session when it heals."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordkit.store import (
    BadVersionError,
    ConnectionLossError,
    MetadataStore,
    NodeExistsError,
    SessionState,
    SetData,
)
from coordkit.testing.backends import Capability, StoreBackend, requires
from coordkit.testing.servers.paths import NetworkPath
from coordkit.testing.store.base import Recorder, StoreSuite
from coordkit.testing.waiting import wait_for


@requires(Capability.MULTI_HOST)
class StoreMultiHostTests(StoreSuite):
    """Two hosts, one store: ``store`` on the URL as given, ``remote`` through another path."""

    @pytest.fixture
    def network_path(self, store_backend: StoreBackend, store_url: str) -> Iterator[NetworkPath]:
        path = store_backend.another_path(store_url)
        try:
            yield path
        finally:
            path.close()

    @pytest.fixture
    def remote(
        self, store_backend: StoreBackend, network_path: NetworkPath
    ) -> Iterator[MetadataStore]:
        session = store_backend.open(network_path.url)
        try:
            yield session
        finally:
            if session.state is not SessionState.CLOSED:
                session.close()

    def test_hosts_share_the_tree_and_its_versions(
        self, store: MetadataStore, remote: MetadataStore
    ) -> None:
        store.create("/shared", b"from a")
        data, stat = remote.get("/shared")
        assert (data, stat.version) == (b"from a", 0)
        remote.set("/shared", b"from b", version=0)
        assert store.get("/shared")[0] == b"from b"
        with pytest.raises(BadVersionError):
            store.set("/shared", b"stale", version=0)
        with pytest.raises(NodeExistsError):
            remote.create("/shared", b"")
        assert store.session_id != remote.session_id

    def test_a_multi_op_from_one_host_conflicts_with_the_other_as_a_whole(
        self, store: MetadataStore, remote: MetadataStore
    ) -> None:
        store.create("/a", b"0")
        store.create("/b", b"0")
        store.set("/b", b"1")  # remote's plan below expects version 0: it must all fail
        with pytest.raises(BadVersionError):
            remote.commit([SetData("/a", b"x", version=0), SetData("/b", b"x", version=0)])
        assert [store.get(p)[0] for p in ("/a", "/b")] == [b"0", b"1"]

    def test_sequence_numbers_are_shared_across_hosts(
        self, store: MetadataStore, remote: MetadataStore
    ) -> None:
        store.create("/q", b"")
        made = []
        for i in range(10):
            session = store if i % 2 == 0 else remote
            made.append(session.create("/q/n-", b"", sequential=True))
        numbers = [int(path[-10:]) for path in made]
        assert numbers == sorted(set(numbers)), f"sequence numbers reused or out of order: {made}"

    def test_a_watch_on_one_host_sees_the_other_hosts_writes(
        self, store: MetadataStore, remote: MetadataStore
    ) -> None:
        store.create("/w", b"0")
        seen = Recorder()
        remote.watch_data("/w", seen)
        wait_for(lambda: seen.values()[-1:] == [b"0"], what="the watch's first state")
        store.set("/w", b"1")
        wait_for(lambda: seen.values()[-1:] == [b"1"], what="the other host's write")

    @requires(Capability.EPHEMERAL_NODES)
    def test_an_ephemeral_node_of_one_host_goes_with_its_session(
        self, store: MetadataStore, remote: MetadataStore
    ) -> None:
        remote.create("/member", b"b", ephemeral=True)
        stat = store.exists("/member")
        assert stat is not None
        assert stat.ephemeral_owner == remote.session_id
        remote.close()
        wait_for(lambda: store.exists("/member") is None, what="the closed session's node gone")

    @requires(Capability.EPHEMERAL_NODES)
    def test_a_host_cut_off_resumes_its_session_and_the_other_host_never_noticed(
        self, store: MetadataStore, remote: MetadataStore, network_path: NetworkPath
    ) -> None:
        remote.create("/lease", b"b", ephemeral=True)
        session = remote.session_id
        network_path.cut()
        try:
            wait_for(lambda: remote.state is SessionState.SUSPENDED, what="the cut host suspended")
            with pytest.raises(ConnectionLossError):
                remote.set("/lease", b"unreachable")
            # The first host works on, and still sees the cut host's lease (its session lives).
            store.create("/written-meanwhile", b"a")
            assert store.exists("/lease") is not None
        finally:
            network_path.restore()
        wait_for(lambda: remote.state is SessionState.CONNECTED, what="the cut host reconnected")
        assert remote.session_id == session, "a brief cut must not end the session"
        assert remote.get("/written-meanwhile")[0] == b"a"
        assert store.get("/lease")[0] == b"b"
