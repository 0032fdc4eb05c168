"""Broker registration: duplicates, session loss, stale nodes of the broker's own old sessions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from coordkit.engine import Broker, BrokerIdInUseError, EngineConfig, InstrumentedStore
from coordkit.errors import LayoutError
from coordkit.kafka import layout
from coordkit.store import MetadataStore, SessionListener, SessionState
from harness.backends import Backend
from harness.waiting import wait_for


def _owner(store: MetadataStore, broker_id: int) -> int | None:
    stat = store.exists(layout.broker_path(broker_id))
    return None if stat is None else stat.ephemeral_owner


def test_duplicate_live_broker_id_is_a_clear_error(
    make_cluster: Callable[..., Any], open_session: Callable[[], MetadataStore]
) -> None:
    cluster = make_cluster([1, 2])
    holder = cluster.raw_store(1).session_id
    intruder = Broker(1, open_session())
    with pytest.raises(BrokerIdInUseError, match=r"broker id 1 is already registered.*broker\.id"):
        intruder.start()
    # The live broker keeps its registration.
    assert _owner(cluster.admin_store, 1) == holder
    assert cluster.broker(1).registered


def test_broker_registers_again_after_its_session_expires(
    make_cluster: Callable[..., Any], backend: Backend
) -> None:
    cluster = make_cluster([1, 2])
    broker = cluster.broker(2)
    old_session = cluster.raw_store(2).session_id
    backend.expire(cluster.raw_store(2))
    wait_for(
        lambda: broker.store.session_id != old_session and broker.registered,
        what="broker 2 to register on its new session",
    )
    assert _owner(cluster.admin_store, 2) == broker.store.session_id != old_session
    assert broker.registrations == 2


class _SwitchableSession(InstrumentedStore):
    """One broker's connection that can give up on its session and move to a new one while the
    server still holds the old one (a client-side timeout), as ZooKeeper clients may."""

    def __init__(self, first: MetadataStore):
        super().__init__(first)
        self._listeners: list[SessionListener] = []

    def add_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def switch_to(self, new: MetadataStore) -> None:
        self.inner = new
        for state in (SessionState.LOST, SessionState.CONNECTED):
            for listener in list(self._listeners):
                listener(state)


def test_broker_replaces_its_own_stale_node_from_an_old_session(
    open_session: Callable[[], MetadataStore],
) -> None:
    first = open_session()
    connection = _SwitchableSession(first)
    broker = Broker(4, connection, config=EngineConfig(controller_election="kafka"))
    broker.start()
    observer = open_session()
    assert _owner(observer, 4) == first.session_id
    second = open_session()
    connection.switch_to(second)  # the old session is still alive and still owns the node
    # Wait on the broker, not on the store: the new node is visible to other sessions before the
    # broker's create call has returned and counted the registration.
    wait_for(
        lambda: broker.registrations >= 2,
        what="broker 4 to replace its node of the old session",
    )
    assert _owner(observer, 4) == second.session_id
    assert broker.registrations == 2
    broker.kill()


def test_a_stale_node_of_someone_else_is_not_taken_over(
    open_session: Callable[[], MetadataStore],
) -> None:
    other = open_session()
    other.ensure_path(layout.BROKER_IDS)
    other.create(layout.broker_path(6), b"{}", ephemeral=True)
    broker = Broker(6, open_session())
    with pytest.raises(BrokerIdInUseError, match=f"live session {other.session_id:#x}"):
        broker.start()
    assert _owner(other, 6) == other.session_id


def test_broker_loss_and_return(
    make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    cluster = make_cluster(3, config=EngineConfig(auto_leader_rebalance=False))
    cluster.create_topic("t", 6, 3)
    before = until(cluster, lambda v: len(v.partitions) == 6, "t to get leaders")
    victim = next(b for b in (0, 1, 2) if b != before.controller)
    led = {p.tp for p in before.partitions if p.leader == victim}
    assert led
    cluster.kill(victim)
    after = until(
        cluster,
        lambda v: victim not in v.brokers and all(victim not in p.isr for p in v.partitions),
        f"broker {victim} to leave every ISR",
    )
    for p in after.partitions:
        old = before.partition(p.topic, p.partition)
        assert p.leader in after.brokers
        assert p.leader_epoch == old.leader_epoch + 1  # every partition had it in its ISR
        if p.tp in led:
            # offline election: first live in-sync replica in assignment order
            assert p.leader == next(r for r in p.replicas if r != victim)
        else:
            assert p.leader == old.leader
    cluster.restart(victim)
    back = until(cluster, lambda v: victim in v.brokers, f"broker {victim} to return")
    # Returning replicas rejoin the ISR only when their leader adds them (after catching up).
    assert all(victim not in p.isr for p in back.partitions)
    cluster.produce(10)
    cluster.replicate()
    joined = until(
        cluster,
        lambda v: all(victim in p.isr for p in v.partitions),
        f"broker {victim} to rejoin every ISR",
    )
    assert all(p.leader != victim for p in joined.partitions)
    # The leaders told the controller (Kafka's ISR change notifications), which consumed them.
    wait_for(
        lambda: cluster.admin_store.children("/isr_change_notification") == [],
        what="the ISR change notifications to be consumed",
    )
    holder = cluster.controller_broker()
    assert holder is not None
    assert holder.controller is not None
    known = holder.controller.leaders().result(timeout=20)
    for p in joined.partitions:
        state = known[p.tp]
        assert state is not None
        assert victim in state.isr
    assert cluster.history is not None
    assert cluster.history.violations() == []


def test_the_first_broker_makes_the_cluster_id_and_every_broker_reads_it(
    make_cluster: Callable[..., Any], open_session: Callable[[], MetadataStore]
) -> None:
    cluster = make_cluster([1, 2, 3])
    data, stat = cluster.admin_store.get(layout.CLUSTER_ID)
    found = layout.CLUSTER_ID_VALUE.decode(data, layout.CLUSTER_ID)
    # Kafka's ClusterIdZNode: {"version":"1","id":"<22 characters of URL-safe base64>"}.
    assert data == b'{"version":"1","id":"%s"}' % found.id.encode()
    assert len(found.id) == 22
    assert not found.id.startswith("-")
    assert not stat.ephemeral
    assert {cluster.broker(b).cluster_id for b in (1, 2, 3)} == {found.id}
    late = Broker(4, open_session()).start()
    try:
        assert late.cluster_id == found.id
    finally:
        late.stop(controlled=False)


def test_a_cluster_id_node_holding_garbage_stops_a_broker_naming_it(
    open_session: Callable[[], MetadataStore],
) -> None:
    store = open_session()
    store.create(layout.CLUSTER_ID, b"not json", make_parents=True)
    broker = Broker(1, open_session())
    with pytest.raises(LayoutError, match="/cluster/id"):
        broker.start()
    assert store.get(layout.CLUSTER_ID)[0] == b"not json"  # left for the user to mend
