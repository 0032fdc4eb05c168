"""The ``warm-standby`` controller election on every backend given with ``--backend``: the winner's
controller loads from its image (not from a bulk read), the image matches the store even when the
controller died with writes in flight or a standby lost its session, and the cluster converges
with every write fenced (the shared failover tests in test_controller.py run it too)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from coordkit.engine import Cluster, EngineConfig, EngineObserver, states
from coordkit.engine.controller.announce import states_to_announce
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.image import ROOT, MetadataImage
from coordkit.engine.controller.partition_map import (
    READABLE,
    STATE_DTYPE,
    UNKNOWN,
    PartitionInfo,
    PartitionMap,
    TopicColumns,
)
from coordkit.engine.events import Observers, StateChange
from coordkit.engine.instrument import InstrumentedStore
from coordkit.engine.states import LeaderIsr
from coordkit.errors import StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicAssignment
from coordkit.store import MetadataStore, Stat, TreeEvent, TreeEventKind
from coordkit_elections.controller_warm import WarmStandbyCandidate
from harness.backends import Backend
from harness.waiting import wait_for

WARM = EngineConfig(controller_election="warm-standby", auto_leader_rebalance=False)


class StateReads(InstrumentedStore):
    """Counts reads of partition state nodes by this session."""

    def __init__(self, inner: MetadataStore):
        super().__init__(inner, "state-reads")
        self.state_reads = 0

    def get(self, path: str) -> tuple[bytes, Stat]:
        self.state_reads += path.endswith("/state")
        return super().get(path)

    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        self.state_reads += sum(1 for p in paths_ if p.endswith("/state"))
        return super().get_many(paths_)


def warm_failover(cluster: Cluster, controller: int | None) -> Any:
    """Kill broker ``controller`` (the controller); the next controller, once ready, loaded
    from its image."""
    assert controller is not None
    cluster.kill(controller)

    def ready() -> Any:
        found = cluster.controller_broker()
        new = None if found is None else found.controller
        return new if new is not None and new.ready.is_set() else None

    wait_for(lambda: ready() is not None, what="a new controller")
    new = ready()
    assert new.context.loaded_from == "image"
    return new


def fresh_image(store: MetadataStore) -> MetadataImage:
    image = MetadataImage()
    image.apply(TreeEvent(TreeEventKind.RESYNC, ROOT, 0))
    assert image.sync(store)
    return image


def image_contents(image: MetadataImage) -> dict[str, Any]:
    def state(tp: tuple[str, int]) -> tuple[Any, ...] | None:
        s = image.partition_state(tp)
        return None if s is None else (s.leader, s.leader_epoch, s.isr, s.controller_epoch)

    topics = image.topics()
    return {
        "brokers": sorted(image.brokers()),
        "topics": topics,
        "states": {(t, p): state((t, p)) for t, a in topics.items() for p in a or {}},
    }


def context_contents(context: ControllerContext) -> dict[str, Any]:
    return {
        "live": sorted(context.live),
        "topics": context.topics,
        "parts": {
            tp: (
                part.replicas,
                None
                if part.state is None
                else (part.state.leader, part.state.leader_epoch, part.state.isr),
            )
            for tp, part in context.parts.items()
        },
    }


def candidate(cluster: Cluster, broker: int) -> WarmStandbyCandidate:
    found = cluster.broker(broker)._candidate
    assert isinstance(found, WarmStandbyCandidate)
    return found


def wait_image_matches(cluster: Cluster, broker: int, store: MetadataStore) -> None:
    """The candidate's image, once its feed is caught up, equals a fresh read of the store."""
    image = candidate(cluster, broker).image

    def matches() -> bool:
        feed = candidate(cluster, broker)._feed
        return (
            feed is not None
            and feed.flush()
            and image.current
            and image_contents(image) == image_contents(fresh_image(store))
        )

    wait_for(matches, what=f"broker {broker}'s image to equal a fresh read of the store")


def test_the_winner_loads_from_its_image_caught_up_past_writes_in_flight(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any], open_session: Any
) -> None:
    cluster = make_cluster(4, config=WARM)
    cluster.create_topic("base", 12, 3)
    before = until(cluster, lambda v: len(v.partitions) == 12, "base to get leaders")
    stop = threading.Event()
    created: list[str] = []

    def write() -> None:
        # Topics and partition additions land before, during and after the failover.
        n = 0
        while not stop.is_set() and n < 200:
            name = f"w{n}"
            cluster.create_topic(name, 2, 2)
            created.append(name)
            if n % 3 == 0:
                cluster.add_partitions(name, 4)
            n += 1

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    wait_for(lambda: len(created) >= 5, what="writes in flight")
    cluster.kill(before.controller)
    wait_for(
        lambda: (
            (b := cluster.controller_broker()) is not None
            and b.controller is not None
            and b.controller.ready.is_set()
        ),
        what="a new controller",
    )
    stop.set()
    writer.join(timeout=60)
    holder = cluster.controller_broker()
    assert holder is not None
    assert holder.controller is not None
    assert holder.broker_id != before.controller
    assert holder.controller.context.loaded_from == "image"
    assert candidate(cluster, holder.broker_id).catch_up_seconds is not None
    total = 12 + sum(4 if int(t[1:]) % 3 == 0 else 2 for t in created)
    after = until(
        cluster,
        lambda v: len(v.partitions) == total and not v.offline(),
        "every partition, old and new, led",
    )
    assert after.epoch == before.epoch + 1
    admin = open_session()
    # The controller's context, having followed its own marks since, matches a cold load ...
    cold = ControllerContext(admin, read_batch=100, owner="check")
    cold.load()
    warm = holder.controller.context
    assert holder.controller.leaders().result(timeout=30) is not None  # a pass boundary
    assert context_contents(warm) == context_contents(cold)
    # ... and every live candidate's image equals a fresh read.
    for broker in cluster.live_brokers():
        wait_image_matches(cluster, broker, admin)
    assert cluster.history is not None
    assert cluster.history.violations() == []


@pytest.mark.parametrize("strategy", ["latch", "warm-standby"])
def test_only_the_cold_controller_reads_every_partition_state(
    backend: Backend, store_url: str, strategy: str
) -> None:
    sessions: dict[int, StateReads] = {}
    order: list[StateReads] = []

    def opener() -> MetadataStore:
        store = StateReads(backend.open(store_url))
        order.append(store)
        return store

    config = EngineConfig(controller_election=strategy, auto_leader_rebalance=False)
    cluster = Cluster(opener, 3, seed=7, config=config).start()
    try:
        partitions = 600
        for t in range(6):
            cluster.create_topic(f"t{t}", partitions // 6, 2)
        view = cluster.wait_settled(timeout=60)
        wait_for(lambda: len(cluster.view().partitions) == partitions, what="leaders")
        for broker in cluster.broker_ids:
            store = cluster.broker(broker).store
            assert isinstance(store, InstrumentedStore)
            inner = store.inner
            assert isinstance(inner, StateReads)
            sessions[broker] = inner
        view = cluster.view()
        assert view.controller is not None
        before = {b: s.state_reads for b, s in sessions.items()}
        cluster.kill(view.controller)
        wait_for(
            lambda: (
                (b := cluster.controller_broker()) is not None
                and b.controller is not None
                and b.controller.ready.is_set()
            ),
            what="a new controller",
        )
        holder = cluster.controller_broker()
        assert holder is not None
        assert holder.controller is not None
        read = sessions[holder.broker_id].state_reads - before[holder.broker_id]
        if strategy == "warm-standby":
            assert holder.controller.context.loaded_from == "image"
            assert read < partitions // 10, f"the warm controller read {read} state nodes"
        else:
            assert holder.controller.context.loaded_from == "store"
            assert read >= partitions
    finally:
        cluster.close()


def test_a_standby_that_lost_its_session_re_reads_and_still_takes_over(
    make_cluster: Callable[..., Cluster],
    until: Callable[..., Any],
    backend: Backend,
    open_session: Any,
) -> None:
    cluster = make_cluster(3, config=WARM)
    cluster.create_topic("t", 8, 3)
    before = until(cluster, lambda v: len(v.partitions) == 8, "t to get leaders")
    standby = next(b for b in cluster.broker_ids if b != before.controller)
    reads = candidate(cluster, standby).image.reads
    raw = cluster.raw_store(standby)
    backend.expire(raw)
    cluster.create_topic("u", 4, 2)
    if not raw.characteristics.change_feed_history:
        # Changes during the gap are lost to the feed (ZooKeeper): it says RESYNC, and re-reads.
        wait_for(
            lambda: candidate(cluster, standby).image.reads > reads,
            what="the standby to re-read after its session was lost",
        )
    until(cluster, lambda v: len(v.partitions) == 12 and standby in v.brokers, "u led")
    wait_image_matches(cluster, standby, open_session())
    for victim in [b for b in cluster.broker_ids if b != standby]:
        cluster.kill(victim)
    holder = cluster.broker(standby)
    wait_for(
        lambda: holder.controller is not None and holder.controller.ready.is_set(),
        what="the standby to take over",
    )
    assert holder.controller is not None
    assert holder.controller.context.loaded_from == "image"
    after = cluster.view()
    # Every partition with a replica on the standby is led by it now.
    assert all(p.leader == standby for p in after.partitions if standby in p.isr)
    assert after.epoch > before.epoch
    assert cluster.history is not None
    assert cluster.history.violations() == []


def test_repeated_failovers_converge_with_every_write_fenced(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(3, config=WARM)
    cluster.create_topic("t", 20, 3)
    cluster.wait_converged(timeout=60)
    for round_ in range(3):
        controller = cluster.view().controller
        assert controller is not None
        cluster.kill(controller)
        cluster.create_topic(f"r{round_}", 5, 2)
        cluster.restart(controller)
        result = cluster.wait_converged(timeout=60)
        assert result.partitions == 20 + 5 * (round_ + 1)
        holder = cluster.controller_broker()
        assert holder is not None
        assert holder.controller is not None
        assert holder.controller.context.loaded_from == "image"
    assert cluster.history is not None
    assert cluster.history.violations() == []
    assert cluster.history.epochs() == sorted(set(cluster.history.epochs()))


class Announcements(EngineObserver):
    """Records what new controllers announce (``partition_states_known``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.known: list[list[StateChange]] = []

    def partition_states_known(self, states: Sequence[StateChange]) -> None:
        with self.lock:
            self.known.append(list(states))


def test_an_announcement_carries_only_what_the_observers_were_not_told() -> None:
    observers = Observers()
    parts = PartitionMap()
    for p in range(4):
        parts[("t", p)] = PartitionInfo((1, 2), LeaderIsr(1, 3, (1, 2), 5, 7))
    replicas = [(1, 2)] * 6
    rows = np.zeros(6, dtype=STATE_DTYPE)
    rows["leader"], rows["leader_epoch"], rows["controller_epoch"] = 2, 4, 5
    rows["zk_version"], rows["status"] = 9, READABLE
    rows["status"][5] = UNKNOWN  # no state to announce
    parts.add_columns("c", TopicColumns(replicas, rows, [(), (1, 2)]))
    # A fan-out told nothing yet gets every state, objects and column rows alike.
    first = states_to_announce(observers, parts, writer=1)
    assert sorted(c.tp for c in first) == [("c", p) for p in range(5)] + [
        ("t", p) for p in range(4)
    ]
    observers.partition_states_known(first)
    assert states_to_announce(observers, parts, writer=1) == []
    # A state written (and told) since, and one the observers never heard of.
    newer = LeaderIsr(2, 4, (2,), 5, 8)
    observers.partition_states_changed([StateChange(("t", 0), None, newer, None, 2, (1, 2))])
    parts[("t", 0)].state = newer
    parts[("t", 1)].state = LeaderIsr(2, 4, (2, 1), 6, 8)
    rows["zk_version"][3] = 10
    assert [c.tp for c in states_to_announce(observers, parts, writer=1)] == [("t", 1), ("c", 3)]
    observers.topic_deleted("c")
    assert len(states_to_announce(observers, parts, writer=1)) == 6


@pytest.mark.parametrize("strategy", ["kafka", "warm-standby"])
def test_a_new_controller_announces_the_states_written_behind_the_observers_back(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any], strategy: str
) -> None:
    heard = Announcements()
    config = EngineConfig(controller_election=strategy, auto_leader_rebalance=False)
    cluster = make_cluster(3, config=config, observers=[heard])
    cluster.create_topic("a", 30, 2)
    view = until(cluster, lambda v: len(v.partitions) == 30, "a to get leaders")
    assert view.controller is not None
    # A partition the controller does not replicate, rewritten without telling any observer
    # (as another process would): same leadership, a later leader epoch.
    away = [p for p in view.partitions if view.controller not in p.replicas]
    target = away[0].tp
    admin = cluster.admin_store
    data, stat = admin.get(states.state_path(target))
    held = states.decode_state(states.state_path(target), data, stat.version)
    bumped = states.encode_state(
        held.leader, held.leader_epoch + 1, held.isr, held.controller_epoch
    )
    admin.set(states.state_path(target), bumped, version=stat.version)
    with heard.lock:
        heard.known.clear()
    cluster.kill(view.controller)
    until(
        cluster,
        lambda v: v.controller not in (None, view.controller) and not v.offline(),
        "a new controller to lead every partition",
    )
    wait_for(lambda: bool(heard.known), what="the new controller's announcement")
    with heard.lock:
        announced = {c.tp for batch in heard.known for c in batch}
    # The rewritten state, and at most what the dead controller's own in-flight writes left
    # untold (partitions it replicated) — not the other partitions, which the observers hold.
    assert target in announced
    assert announced - {target} <= {p.tp for p in view.partitions if p not in away}
    log = cluster.replication.log(target)
    assert log is not None
    assert log.leader_epoch == held.leader_epoch + 1


def test_a_filled_context_keeps_its_rows_while_the_image_follows_the_feed(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any], open_session: Any
) -> None:
    cluster = make_cluster(3, config=WARM)
    cluster.create_topic("lent", 8, 2)
    until(cluster, lambda v: len(v.partitions) == 8, "lent to get leaders")
    admin = open_session()
    image = fresh_image(admin)
    context = ControllerContext(admin, read_batch=100, owner="check", image=image)
    context.load()
    assert context.loaded_from == "image"
    tp = ("lent", 3)
    # Read by a scan, which leaves the rows in the lent columns.
    given = {tp: state for tp, _r, state in context.parts.states()}[tp]
    assert given is not None
    assert context.parts.in_columns == 8
    # The image's next write to the topic copies the array the context was lent.
    later = states.encode_state(given.leader, given.leader_epoch + 5, given.isr, 99)
    position = admin.get(states.state_path(tp))[1].mzxid + 1_000_000
    stat = Stat(1, position, 0, 0, 0, given.zk_version + 1, 0, 0, 0, len(later), 0)
    image.apply(TreeEvent(TreeEventKind.CHANGED, states.state_path(tp), position, later, stat))
    moved = image.partition_state(tp)
    assert moved is not None
    assert moved.leader_epoch == given.leader_epoch + 5
    kept = {tp: state for tp, _r, state in context.parts.states()}
    assert kept[tp] == given
    assert kept[("lent", 4)] == image.partition_state(("lent", 4))


def test_a_warm_controller_follows_assignments_through_its_image_not_a_watch_per_topic(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any]
) -> None:
    """A controller handed an image places no watch per topic (thousands of round trips at
    millions of partitions); partitions added to a topic still get leaders, whether the feed
    tells the change by itself or after a re-read of the image (told as "any topic")."""
    cluster = make_cluster(3, config=WARM)
    cluster.create_topic("grow", 4, 2)
    cluster.create_topic("other", 2, 2)
    before = until(cluster, lambda v: len(v.partitions) == 6, "the topics to get leaders")
    controller = warm_failover(cluster, before.controller)
    wait_for(controller.idle, what="the new controller to be idle")
    assert controller.watches.topic_watches == {}

    cluster.add_partitions("grow", 6)
    until(cluster, lambda v: len(v.partitions) == 8, "the added partitions to get leaders")

    # During a re-read the feed's events are buffered, not told one by one.
    image = controller.term.image
    assert image is not None
    image.apply(TreeEvent(TreeEventKind.RESYNC, ROOT, image.position or 0))
    cluster.add_partitions("other", 3)
    wait_for(lambda: image.sync(cluster.open_session()), what="the image's re-read")
    until(cluster, lambda v: len(v.partitions) == 9, "the partition added during the re-read")
    assert controller.watches.topic_watches == {}
    assert cluster.history is not None
    assert cluster.history.violations() == []


def test_a_warm_controller_learns_created_and_deleted_topics_from_its_image(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any], open_session: Any
) -> None:
    """Nor does it watch the children of /brokers/topics (each delivery a read of every topic's
    name): a topic created after the failover gets leaders, one deleted behind its back is
    forgotten, both told by the image's feed."""
    cluster = make_cluster(3, config=WARM)
    cluster.create_topic("first", 2, 2)
    before = until(cluster, lambda v: len(v.partitions) == 2, "the topic to get leaders")
    controller = warm_failover(cluster, before.controller)
    assert layout.BROKER_TOPICS not in {watch.path for watch in controller.watches.watched}
    cluster.create_topic("later", 3, 2)
    until(cluster, lambda v: len(v.partitions) == 5, "the topic created later to get leaders")
    assert "later" in controller.known_topics
    admin = open_session()
    admin.delete(f"{layout.BROKER_TOPICS}/first", recursive=True)
    wait_for(lambda: "first" not in controller.known_topics, what="the deleted topic forgotten")
    assert "first" not in controller.context.topics


@pytest.mark.parametrize("how", ["topic created", "partitions added"])
def test_partitions_the_image_tells_before_the_brokers_watch_still_elect_from_every_broker(
    make_cluster: Callable[..., Cluster], until: Callable[..., Any], how: str
) -> None:
    """The image's feed may tell new partitions before the /brokers/ids watch tells a broker
    that registered earlier (two deliveries, no order between them). A full load reads topics,
    then brokers, so that such a broker is a candidate for the new partitions' first leaders;
    new partitions (a new topic's, or a topic's added ones) are followed by a re-read of the
    brokers for the same reason."""
    cluster = make_cluster(3, config=WARM)
    cluster.create_topic("first", 1, 1)
    before = until(cluster, lambda v: len(v.partitions) == 1, "the topic to get a leader")
    controller = warm_failover(cluster, before.controller)
    # The brokers watch's next delivery, delayed for good.
    for watch in controller.watches.watched:
        if watch.path == layout.BROKER_IDS:
            watch.cancel()
    other = next(b for b in cluster.live_brokers() if b != controller.broker_id)
    if how == "partitions added":  # the topic exists before broker 9 registers
        cluster.create_topic("later", 1, 1, assignment={0: [other]})
        until(cluster, lambda v: len(v.partitions) == 2, "the topic's first partition led")
    cluster.start_broker(9)
    if how == "topic created":
        cluster.create_topic(
            "later", 3, 2, assignment={0: [9, other], 1: [other, 9], 2: [9, other]}
        )
    else:
        grown = {0: (other,), 1: (other, 9), 2: (9, other)}
        cluster.admin_store.set(
            layout.topic_path("later"), layout.TOPIC.encode(TopicAssignment(grown))
        )
    view = until(cluster, lambda v: len(v.partitions) == 4, "the new partitions to get leaders")
    first = {(p.partition, p.leader, p.leader_epoch) for p in view.partitions if p.topic == "later"}
    # Each new partition's first leader is its first replica, the new broker where it is first.
    assert first == {(0, 9 if how == "topic created" else other, 0), (1, other, 0), (2, 9, 0)}
    assert 9 in controller.known_brokers


def test_an_image_tells_assignment_changes_outside_its_lock(open_session: Any) -> None:
    admin = open_session()
    image = fresh_image(admin)
    told: list[tuple[str | None, int | None, int]] = []

    def listener(topic: str | None, mzxid: int | None) -> None:
        # Reading the image here would deadlock if it told under its lock.
        told.append((topic, mzxid, len(image.topic_names())))

    stop = image.follow_assignments(listener)
    data = layout.TOPIC.encode(TopicAssignment(partitions={0: [1, 2]}))
    stat = Stat(10, 10, 0, 0, 0, 0, 0, 0, 0, len(data), 0)
    path = "/brokers/topics/new"
    image.apply(TreeEvent(TreeEventKind.CREATED, path, 10, data, stat))
    image.apply(TreeEvent(TreeEventKind.CHANGED, "/brokers/ids/7", 11, b"{}", stat))
    later = Stat(10, 12, 0, 0, 1, 0, 0, 0, 0, len(data), 0)
    image.apply(TreeEvent(TreeEventKind.CHANGED, path, 12, data, later))
    image.apply(TreeEvent(TreeEventKind.DELETED, path, 13))
    assert [(t, m) for t, m, _n in told] == [("new", 10), ("new", 12), ("new", None)]
    image.apply(TreeEvent(TreeEventKind.RESYNC, ROOT, 14))
    image.apply(TreeEvent(TreeEventKind.CREATED, path, 15, data, stat))  # buffered
    assert image.sync(admin)
    assert told[-1][:2] == (None, None)
    stop()
    image.apply(TreeEvent(TreeEventKind.CREATED, "/brokers/topics/quiet", 20, data, stat))
    assert told[-1][:2] == (None, None)
