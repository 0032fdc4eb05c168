"""Session loss racing a rebalance, made deterministic by holding threads at chosen points.

The interleaving the flaky ``test_session_loss_reregisters_and_rebalances`` hit on Redis (whose
change feed can deliver the reaping of a consumer's own ephemerals before the LOST notice):

1. a rebalance of consumer L starts in session S1 (a watch fired) while L owns ``orders-0/1``;
2. S1 expires: the server deletes L's registration and owner nodes; the other consumer O rebalances
   alone and claims all four partitions;
3. L's rebalance goes on in the new session S2 and "releases" ``orders-0/1`` by path: it deletes
   O's nodes while O believes it owns them; L then claims them, and O's next release deletes L's
   nodes by path in turn, leaving L owning partitions it holds no node for.

The tests hold L's rebalance thread at the start of an attempt (its read of ``/brokers/ids``) across
the expiry, and optionally L's event thread too, so that the LOST notice arrives only after the
rebalance of the new session has claimed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from coordkit.engine.instrument import InstrumentedStore
from coordkit.engine.legacy import LegacyConsumer, LegacyConsumerConfig, OwnershipHistory
from coordkit.engine.legacy.ownership import OwnershipClaims
from coordkit.engine.legacy.registration import ConsumerThreadId
from coordkit.kafka import layout
from coordkit.kafka.model import TopicPartition
from coordkit.store import DataEvent, MetadataStore, SessionState
from coordkit.support.clock import SystemClock
from engine.legacy.world import FAST, LegacyWorld, kafka_range
from harness.backends import Backend
from harness.waiting import wait_for

PATIENT = LegacyConsumerConfig(rebalance_backoff_ms=50, rebalance_max_retries=600, host="h")
GATE = "/test-gate"


class PausingStore(InstrumentedStore):
    """Holds the next reader of ``/brokers/ids`` (a rebalance attempt's first read) once armed,
    until :attr:`resume` is set."""

    def __init__(self, inner: MetadataStore):
        super().__init__(inner)
        self.armed = threading.Event()
        self.paused = threading.Event()
        self.resume = threading.Event()

    def children(self, path: str) -> list[str]:
        if path == layout.BROKER_IDS and self.armed.is_set():
            self.armed.clear()
            self.paused.set()
            self.resume.wait(60)
        return super().children(path)


class EventThreadBlocker:
    """Blocks a store client's event thread (watch callbacks and session listeners run there one
    at a time) from when ``GATE`` is created until :meth:`release`."""

    def __init__(self, client: MetadataStore, admin: MetadataStore):
        self.admin = admin
        self.blocked = threading.Event()
        self._release = threading.Event()
        self._watch = client.watch_data(GATE, self._deliver)

    def _deliver(self, event: DataEvent) -> None:
        if event.exists and not self._release.is_set():
            self.blocked.set()
            self._release.wait(60)

    def block(self) -> None:
        self.admin.create(GATE, b"")
        wait_for(self.blocked.is_set, what="the event thread held")

    def release(self) -> None:
        self._release.set()
        self._watch.cancel()


@pytest.fixture
def pausing(world: LegacyWorld) -> Iterator[list[PausingStore]]:
    stores: list[PausingStore] = []
    yield stores
    for store in stores:  # never leave a thread held into the teardown
        store.resume.set()


def owner_sessions(world: LegacyWorld, partitions: int) -> dict[int, int | None]:
    """Partition → the session holding its owner node (None: no node)."""
    out: dict[int, int | None] = {}
    for p in range(partitions):
        stat = world.admin.exists(layout.consumer_owner_path("billing", "orders", p))
        out[p] = None if stat is None else stat.ephemeral_owner
    return out


@pytest.mark.parametrize("notice", ["before-resuming", "after-claiming-anew"])
def test_rebalance_across_session_expiry_never_deletes_another_owners_node(
    world: LegacyWorld, backend: Backend, pausing: list[PausingStore], notice: str
) -> None:
    world.add_broker()
    world.create_topic("orders", 4)
    store = PausingStore(world.open_session())
    pausing.append(store)
    lost = LegacyConsumer(store, "billing", {"orders": 1}, config=PATIENT, history=world.history)
    world.consumers.append(lost)
    lost.start()
    other = world.consumer({"orders": 1}, config=PATIENT)
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions))
    mine = set(lost.owned())
    first_session = store.session_id
    noticed = threading.Event()  # set after the consumer's own listener ran (same thread, in order)

    def on_session(state: SessionState) -> None:
        if state is SessionState.LOST:
            noticed.set()

    store.inner.add_listener(on_session)

    # 1. A rebalance of `lost` starts in its first session and is held at its first read.
    store.armed.set()
    world.add_broker(2)
    wait_for(store.paused.is_set, what="lost's rebalance held")
    blocker = EventThreadBlocker(store.inner, world.admin)
    try:
        if notice == "after-claiming-anew":
            blocker.block()

        # 2. The session expires; the other consumer takes every partition.
        cut = len(world.history.events)
        backend.expire(store.inner)
        wait_for(
            lambda: store.session_id != first_session and store.state is SessionState.CONNECTED,
            what="lost's new session",
        )
        everything = {TopicPartition("orders", p): f"{other.consumer_id}-0" for p in range(4)}
        wait_for(
            lambda: (
                other.idle
                and other.owned() == everything
                and dict(world.view().owners) == everything
            ),
            what="the other consumer owning every partition",
        )
        assert set(owner_sessions(world, 4).values()) == {other.store.session_id}
        if notice == "before-resuming":
            wait_for(noticed.is_set, what="lost told of the expiry")

        # 3. The held rebalance resumes in the new session.
        store.resume.set()
        if notice == "after-claiming-anew":
            # It re-registers and claims in the new session before hearing of the loss.
            world.wait_stable(
                kafka_range(world.subscriptions(), world.partitions), "the new session's claims"
            )
            assert not noticed.is_set()
            assert {owner_sessions(world, 4)[tp.partition] for tp in mine} == {store.session_id}
    finally:
        blocker.release()
        store.resume.set()
    wait_for(noticed.is_set, what="lost told of the expiry")
    wait_for(
        lambda: any("session lost" in r.reasons for r in lost.rebalances.records),
        what="the rebalance for the session loss",
    )
    assert world.history.violations() == []
    expected = kafka_range(world.subscriptions(), world.partitions)
    view = world.wait_stable(expected, "after expiry")
    assert set(view.registrations) == {lost.consumer_id, other.consumer_id}
    sessions = {
        f"{lost.consumer_id}-0": store.session_id,
        f"{other.consumer_id}-0": other.store.session_id,
    }
    assert owner_sessions(world, 4) == {tp.partition: sessions[t] for tp, t in expected.items()}
    assert world.history.violations() == []
    # The claims open when the first session expired ended with it, not as a later release.
    spanning = [
        i
        for i in world.history.intervals()
        if i.thread_id == f"{lost.consumer_id}-0" and i.start < cut and (i.end or cut) >= cut
    ]
    assert {i.tp for i in spanning} == mine
    assert {i.ended_by for i in spanning} == {"session-lost"}


class StaleSessionView(InstrumentedStore):
    """Reports a pinned session id (the client's view just before it moved to a new session)
    while operations go out in the store's current one."""

    pinned: int | None = None

    @property
    def session_id(self) -> int:
        return self.inner.session_id if self.pinned is None else self.pinned


def test_release_sent_in_a_new_session_deletes_nothing(
    world: LegacyWorld, backend: Backend
) -> None:
    """The client moves to a new session between the claims' session check and the delete: the
    delete reaches the store in the new session, where the node is another consumer's."""
    session = world.open_session()
    consumer_id = "billing_stale"
    session.create(
        layout.consumer_registration_path("billing", consumer_id),
        b"{}",
        ephemeral=True,
        make_parents=True,
    )
    view = StaleSessionView(session)
    claims = OwnershipClaims(view, "billing", consumer_id, OwnershipHistory(), SystemClock())
    assert claims.claim({TopicPartition("orders", 0): ConsumerThreadId(consumer_id, 0)}).succeeded
    first = session.session_id

    backend.expire(session)
    wait_for(
        lambda: session.session_id != first and session.state is SessionState.CONNECTED,
        what="a new session",
    )
    other = world.open_session()
    path = layout.consumer_owner_path("billing", "orders", 0)
    other.create(path, b"billing_other-0", ephemeral=True)

    view.pinned = first
    claims.release_all()

    stat = world.admin.exists(path)
    assert stat is not None
    assert stat.ephemeral_owner == other.session_id


def test_an_own_node_of_this_session_counts_as_claimed_but_not_one_of_another(
    world: LegacyWorld,
) -> None:
    session = world.open_session()
    stranger = world.open_session()
    mine, theirs = TopicPartition("orders", 0), TopicPartition("orders", 1)
    thread = ConsumerThreadId("billing_me", 0)
    for store, tp in ((session, mine), (stranger, theirs)):
        store.create(
            layout.consumer_owner_path("billing", tp.topic, tp.partition),
            str(thread).encode(),
            ephemeral=True,
            make_parents=True,
        )
    claims = OwnershipClaims(session, "billing", "billing_me", OwnershipHistory(), SystemClock())

    # A create of this session whose reply was lost: the node is this thread's already.
    assert claims.claim({mine: thread}).claimed == (mine,)
    assert claims.owned() == {mine: thread}
    # The same data in another session (say, this consumer's expired one, not reaped yet).
    assert claims.claim({theirs: thread}).conflicts == (theirs,)
    assert claims.owned() == {mine: thread}


class StaleGroupRead(InstrumentedStore):
    """Once armed, the next read of the group's members returns what it read, but only after
    ``meanwhile`` ran and this client's event thread delivered the change it made: the read the
    rebalance goes on with is older than a watch delivery it has already had."""

    def __init__(self, inner: MetadataStore, group: str):
        super().__init__(inner)
        self.ids_path = layout.consumer_ids_path(group)
        self.armed = threading.Event()
        self.meanwhile: Callable[[], None] = lambda: None

    def children(self, path: str) -> list[str]:
        read = super().children(path)
        if path == self.ids_path and self.armed.is_set():
            self.armed.clear()
            heard = threading.Event()
            # Registered after the consumer's own watch, on the same event thread: delivered
            # after it, so once this one is told the consumer's callback has run.
            witness = self.inner.watch_children(
                path, lambda e: heard.set() if len(e.children or ()) > len(read) else None
            )
            try:
                self.meanwhile()
                wait_for(heard.is_set, what="the newcomer's registration delivered")
            finally:
                witness.cancel()
        return read


def test_a_member_heard_of_between_a_rebalances_read_and_its_note_rebalances_again(
    world: LegacyWorld,
) -> None:
    """The first rebalance reads the group, a second consumer registers, and the watch tells the
    first consumer before its rebalance has noted what it read: that rebalance deals every
    partition to the one member it read, so the first consumer must rebalance again or the
    newcomer's claims conflict for ever (the flake of
    ``test_roundrobin_deals_partitions_over_all_threads`` on Redis, made deterministic)."""
    world.add_broker()
    world.create_topic("orders", 6)
    store = StaleGroupRead(world.open_session(), "billing")
    first = LegacyConsumer(store, "billing", {"orders": 1}, config=FAST, history=world.history)
    world.consumers.append(first)
    newcomer = world.consumer({"orders": 1}, start=False)
    store.meanwhile = newcomer.register
    store.armed.set()
    first.start()
    assert not store.armed.is_set(), "the stale read did not happen: this proves nothing"
    newcomer.start(wait=False)
    world.wait_stable(kafka_range(world.subscriptions(), world.partitions), "both members")
    assert world.history.violations() == []
