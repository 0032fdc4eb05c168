"""The warm standby's :class:`MetadataImage`: kept current by a real memory store's change feed,
merged with re-reads by position, and filling a controller context exactly as a cold load would;
and the ``warm-standby`` election's refusal of a store without a change feed."""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from coordkit.engine import states
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.image import ROOT, MetadataImage
from coordkit.kafka import layout
from coordkit.kafka.model import BrokerInfo, TopicAssignment
from coordkit.plugins import get_plugin_manager
from coordkit.store import Stat, TreeEvent, TreeEventKind, TreeWatch, UnsupportedError
from coordkit.store.urls import StoreURL
from coordkit.support.clock import SystemClock
from coordkit_memory import MemoryServer, MemoryStore, open_memory_store


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    name = f"image-unit-{uuid.uuid4().hex}"
    opened = open_memory_store(StoreURL.parse(f"memory://{name}"))
    for root in layout.PERSISTENT_ROOTS:
        opened.ensure_path(root)
    yield opened
    opened.close()
    MemoryServer.discard(name)


def follow(store: MemoryStore) -> tuple[MetadataImage, TreeWatch]:
    """An image following ``store``, re-read on every RESYNC (here on the test's thread)."""
    image = MetadataImage(read_batch=7)  # small batches: the bulk reads are exercised too
    resync: list[bool] = []

    def on_event(event: TreeEvent) -> None:
        if image.apply(event):
            resync.append(True)

    feed = store.watch_tree(ROOT, on_event)
    assert feed.flush()
    assert resync, "a feed opens with RESYNC"
    assert image.sync(store)
    return image, feed


def caught_up(image: MetadataImage, feed: TreeWatch, store: MemoryStore) -> MetadataImage:
    assert feed.flush()
    assert image.sync(store)
    return image


def fresh(store: MemoryStore) -> MetadataImage:
    image = MetadataImage()
    image.apply(TreeEvent(TreeEventKind.RESYNC, ROOT, 0))
    assert image.sync(store)
    return image


def contents(image: MetadataImage) -> dict[str, Any]:
    topics = image.topics()
    parts = {
        (t, p): _state(image.partition_state((t, p)))
        for t, assignment in topics.items()
        for p in assignment or {}
    }
    return {"brokers": image.brokers(), "topics": topics, "states": parts}


def _state(state: states.LeaderIsr | None) -> tuple[int, ...] | None:
    if state is None:
        return None
    return (
        state.leader,
        state.leader_epoch,
        *state.isr,
        -1,
        state.controller_epoch,
        state.zk_version,
    )


def summary(context: ControllerContext) -> dict[str, Any]:
    """Everything a load leaves in a context, comparable."""
    return {
        "live": {b: (info, czxid) for b, (info, czxid) in context.live.items()},
        "topics": context.topics,
        "assignment_mzxid": context.assignment_mzxid,
        "parts": {
            tp: (part.replicas, _state(part.state)) for tp, part in sorted(context.parts.items())
        },
        "unreadable_states": context.unreadable_states,
        "partitions_nodes": context.partitions_nodes,
        "known_topics": context.known_topics,
        "ignored_topics": context.ignored_topics,
        "ignored_brokers": context.ignored_brokers,
        "known_brokers": context.known_brokers,
        "unreadable": context.unreadable.snapshot(),
    }


def cold_and_warm(
    store: MemoryStore, image: MetadataImage
) -> tuple[dict[str, Any], dict[str, Any]]:
    cold = ControllerContext(store, read_batch=5, owner="cold")
    cold.load()
    warm = ControllerContext(store, read_batch=5, owner="warm", image=image)
    warm.load()
    assert warm.loaded_from == "image"
    return summary(cold), summary(warm)


def register(store: MemoryStore, broker: int) -> None:
    info = BrokerInfo(host="h", port=9092 + broker, timestamp="1")
    store.create(layout.broker_path(broker), layout.BROKER.encode(info), ephemeral=True)


def topic(store: MemoryStore, name: str, partitions: int, *, led: bool = True) -> None:
    data = layout.TOPIC.encode(
        TopicAssignment(partitions={p: (p % 3, (p + 1) % 3) for p in range(partitions)})
    )
    store.create(f"{layout.BROKER_TOPICS}/{name}", data)
    if led:
        for p in range(partitions):
            store.create(
                states.state_path((name, p)),
                states.encode_state(p % 3, 0, (p % 3, (p + 1) % 3), 1),
                make_parents=True,
            )


def test_the_image_follows_every_change_and_equals_a_fresh_read(store: MemoryStore) -> None:
    for broker in range(3):
        register(store, broker)
    topic(store, "before", 4)
    image, feed = follow(store)
    topic(store, "after", 5)
    store.set(states.state_path(("before", 1)), states.encode_state(2, 3, (2,), 4))
    store.delete(states.state_path(("before", 2)))
    store.delete(layout.broker_path(1))
    register(store, 7)
    store.delete(f"{layout.BROKER_TOPICS}/after", recursive=True)
    topic(store, "again", 2)
    caught_up(image, feed, store)
    assert contents(image) == contents(fresh(store))
    assert image.partition_state(("before", 1)) is not None
    assert image.partition_state(("before", 2)) is None
    assert "after" not in image.topics()
    assert sorted(image.brokers()) == ["0", "2", "7"]
    feed.cancel()


def test_a_fill_equals_a_cold_load_garbage_included(store: MemoryStore) -> None:
    for broker in range(3):
        register(store, broker)
    image, feed = follow(store)
    topic(store, "good", 6)
    topic(store, "unled", 3, led=False)
    store.create(f"{layout.BROKER_TOPICS}/junk", b"{not json")
    store.set(states.state_path(("good", 4)), b'{"leader":"x"}')
    store.create(layout.broker_path(0).replace("/0", "/not-a-number"), b"{}", ephemeral=True)
    store.create(layout.broker_path(9), b"[]", ephemeral=True)
    caught_up(image, feed, store)
    cold, warm = cold_and_warm(store, image)
    assert warm == cold
    assert ("good", 4) in warm["unreadable_states"]
    assert warm["ignored_topics"] == frozenset({"junk"})
    assert warm["partitions_nodes"] == {"good"}
    feed.cancel()


def test_a_hand_over_lends_topics_and_builds_only_those_a_failover_concerns(
    store: MemoryStore,
) -> None:
    """The hand-over does no work per topic: every regular topic is lent as the image holds it,
    and a liveness scan or a controlled-shutdown query builds only the topics whose census names
    the brokers in question (issue 16: failover flat in the number of topics)."""
    for broker in range(4):
        register(store, broker)
    image, feed = follow(store)
    for index in range(12):
        topic(store, f"quiet-{index}", 3)  # brokers 0-2 only
    data = layout.TOPIC.encode(TopicAssignment(partitions={0: (3, 0), 1: (0, 3)}))
    store.create(f"{layout.BROKER_TOPICS}/mixed", data)
    for partition, (leader, isr) in enumerate([(3, (3, 0)), (0, (0, 3))]):
        state = states.encode_state(leader, 0, isr, 1)
        store.create(states.state_path(("mixed", partition)), state, make_parents=True)
    caught_up(image, feed, store)
    cold = ControllerContext(store, read_batch=5, owner="cold")
    cold.load()
    warm = ControllerContext(store, read_batch=5, owner="warm", image=image)
    warm.load()
    assert warm.loaded_from == "image"
    assert warm.parts.lent_topics == 13
    assert len(warm.parts) == len(cold.parts) == 38
    assert warm.parts.in_columns == 38
    assert warm.needing_attention(frozenset({0, 1, 2, 3})) == []
    assert warm.parts.lent_topics == 13
    survivors = frozenset({0, 1, 2})
    assert sorted(warm.needing_attention(survivors)) == sorted(cold.needing_attention(survivors))
    assert sorted(warm.needing_attention(survivors)) == [("mixed", 0), ("mixed", 1)]
    assert warm.parts.lent_topics == 12  # "mixed" only
    assert sorted(warm.parts.naming(3)) == [("mixed", 0), ("mixed", 1)]
    assert warm.parts.lent_topics == 12
    # Reading a partition builds its topic alone.
    assert warm.parts[("quiet-5", 2)].state == cold.parts[("quiet-5", 2)].state
    assert ("quiet-5", 3) not in warm.parts
    assert warm.parts.lent_topics == 11
    assert sorted(warm.parts.naming(1)) == sorted(cold.parts.naming(1))
    assert warm.parts.lent_topics == 0  # broker 1 is in every topic
    del warm.parts[("quiet-7", 0)]
    assert ("quiet-7", 0) not in warm.parts
    assert len(warm.parts) == 37
    assert sorted(tp for tp, _r, _s in warm.parts.states()) == sorted(
        tp for tp in cold.parts if tp != ("quiet-7", 0)
    )
    assert warm.parts.lent_topics == 0
    feed.cancel()


def test_a_lent_topic_keeps_its_hand_over_states_while_the_image_changes_it(
    store: MemoryStore,
) -> None:
    """The image copies a lent topic before it changes it: a context filled earlier reads the
    states of its hand-over however late it first touches them, a second hand-over the new
    ones, and the image itself stays equal to a fresh read."""
    for broker in range(3):
        register(store, broker)
    image, feed = follow(store)
    topic(store, "kept", 4)
    topic(store, "gone", 2)
    topic(store, "idle", 2)  # partition 1: leader 1, ISR (1, 2)
    caught_up(image, feed, store)
    first = ControllerContext(store, read_batch=5, owner="first", image=image)
    first.load()
    # Broker 2 leaves "idle"'s census: the image's index changes after lending it.
    store.set(states.state_path(("idle", 1)), states.encode_state(1, 3, (1, 0), 3))
    handed = {tp: image.partition_state(tp) for tp in [("kept", p) for p in range(4)]}
    store.set(states.state_path(("kept", 1)), states.encode_state(2, 7, (2, 0), 3))
    grown = layout.TOPIC.encode(TopicAssignment(partitions={p: (p % 3,) for p in range(6)}))
    store.set(f"{layout.BROKER_TOPICS}/kept", grown)
    store.delete(f"{layout.BROKER_TOPICS}/gone", recursive=True)
    caught_up(image, feed, store)
    moved = image.partition_state(("kept", 1))
    assert moved is not None
    assert moved.leader_epoch == 7
    assert first.parts.lent_topics == 3  # untouched so far
    for tp, state in handed.items():
        assert first.parts[tp].state == state
    assert ("kept", 4) not in first.parts
    assert first.topics["kept"] == {p: (p % 3, (p + 1) % 3) for p in range(4)}
    assert ("gone", 1) in first.parts
    assert first.known_topics == {"kept", "gone", "idle"}
    second = ControllerContext(store, read_batch=5, owner="second", image=image)
    second.load()
    assert second.loaded_from == "image"
    assert second.parts[("kept", 1)].state == moved
    assert "gone" not in second.topics
    assert second.known_topics == {"kept", "idle"}
    assert contents(image) == contents(fresh(store))
    # The index by broker was lent too: the image's own follows its topics, the first context
    # keeps the one it was given (its scans still see the hand-over).
    inverted: dict[int, set[str]] = {}
    for name, held in image._topics.items():
        for broker in held.census:
            inverted.setdefault(broker, set()).add(name)
    assert image._naming.by_broker == inverted
    dead = frozenset({0, 1})  # broker 2 gone: the hand-over's states naming it need work
    expected = sorted(
        tp for tp, state in handed.items() if state is not None and 2 in (state.leader, *state.isr)
    )
    assert sorted(tp for tp in first.needing_attention(dead) if tp[0] == "kept") == expected
    assert ("idle", 1) in first.needing_attention(dead)  # found through the lent index
    assert ("idle", 1) not in second.needing_attention(dead)
    feed.cancel()


def test_an_image_holds_no_container_per_partition_for_the_garbage_collector(
    store: MemoryStore,
) -> None:
    """A full collection walks every object the collector tracks, whenever it runs (during a
    failover too): an image's per-partition data (replica lists, states) must leave its view, or
    2,000,000 partitions add milliseconds to every full collection of a standby."""
    register(store, 0)
    image, feed = follow(store)
    for index in range(3):
        topic(store, f"t{index}", 50)
    caught_up(image, feed, store)
    # A collection untracks a tuple only once its items are untracked, and meets the tuples in
    # no set order: a tuple of tuples may take a second collection.
    gc.collect()
    gc.collect()
    for held in image._topics.values():
        assert held.replicas is not None
        assert len(held.replicas) == 50
        assert not gc.is_tracked(held.replicas), "a topic's replicas are walked by every collection"
        assert not gc.is_tracked(held.states)
    feed.cancel()


def test_grown_partitions_are_vouched_for_by_the_store(store: MemoryStore) -> None:
    """A state node written before the assignment named its partition, seen by no feed event
    since the image's read, is read at the hand-over; one the feed saw is taken as it was."""
    register(store, 0)
    topic(store, "t", 2)
    # Partition 2's state exists before the assignment names it (before the image's read).
    store.create(states.state_path(("t", 2)), states.encode_state(0, 5, (0,), 1), make_parents=True)
    image, feed = follow(store)
    store.create(states.state_path(("t", 3)), states.encode_state(0, 6, (0,), 1), make_parents=True)
    grown = layout.TOPIC.encode(TopicAssignment(partitions={p: (0,) for p in range(5)}))
    store.set(f"{layout.BROKER_TOPICS}/t", grown)
    caught_up(image, feed, store)
    state = image.partition_state(("t", 3))
    assert state is not None
    assert state.leader_epoch == 6
    cold, warm = cold_and_warm(store, image)
    assert warm == cold
    assert warm["parts"][("t", 2)][1] is not None  # read at the hand-over
    assert warm["parts"][("t", 4)][1] is None
    feed.cancel()


def test_a_resync_replaces_the_image_and_replays_only_newer_events(store: MemoryStore) -> None:
    register(store, 0)
    topic(store, "t", 3)
    image = MetadataImage()
    image.apply(TreeEvent(TreeEventKind.RESYNC, ROOT, 1))
    assert not image.current
    # Buffered while the re-read is pending: one older than what the read will see, one newer.
    _data, stat = store.get(states.state_path(("t", 0)))
    stale = attrs.evolve(stat, mzxid=stat.mzxid - 1)
    image.apply(TreeEvent(TreeEventKind.CHANGED, states.state_path(("t", 0)), 2, b"junk", stale))
    newer = attrs.evolve(stat, mzxid=stat.mzxid + 100, version=stat.version + 1)
    update = states.encode_state(2, 9, (2,), 3)
    image.apply(TreeEvent(TreeEventKind.CHANGED, states.state_path(("t", 1)), 3, update, newer))
    assert image.sync(store)
    assert image.current
    assert image.position == 3
    kept = image.partition_state(("t", 0))
    assert kept is not None
    assert kept.leader == 0
    changed = image.partition_state(("t", 1))
    assert changed is not None
    assert (changed.leader, changed.leader_epoch) == (2, 9)


def test_events_without_state_are_skipped_until_their_delete(store: MemoryStore) -> None:
    register(store, 0)
    topic(store, "t", 1)
    image = fresh(store)
    before = contents(image)
    path = states.state_path(("t", 0))
    image.apply(TreeEvent(TreeEventKind.CHANGED, path, 10**6))
    assert contents(image) == before
    image.apply(TreeEvent(TreeEventKind.DELETED, path, 10**6 + 1))
    assert image.partition_state(("t", 0)) is None


def test_an_image_behind_a_resync_fills_nothing(store: MemoryStore) -> None:
    register(store, 0)
    image = fresh(store)
    image.apply(TreeEvent(TreeEventKind.RESYNC, ROOT, 99))
    context = ControllerContext(store, read_batch=5, owner="t", image=image)
    context.load()
    assert context.loaded_from == "store"
    assert context.known_brokers == frozenset({0})


def test_the_columns_hold_numbers_beyond_64_bits(store: MemoryStore) -> None:
    register(store, 0)
    topic(store, "t", 2)
    huge = 2**70
    store.set(
        states.state_path(("t", 1)),
        f'{{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":{huge},"isr":[0]}}'.encode(),
    )
    image = fresh(store)
    state = image.partition_state(("t", 1))
    assert state is not None
    assert state.leader_epoch == huge
    cold, warm = cold_and_warm(store, image)
    assert warm == cold


def test_warm_standby_refuses_a_store_without_a_change_feed(store: MemoryStore) -> None:
    store.characteristics = attrs.evolve(store.characteristics, ordered_change_feed=False)
    election = get_plugin_manager().election("controller", "warm-standby")
    with pytest.raises(UnsupportedError) as caught:
        election.candidate(store, 0, SystemClock(), print, print)
    message = str(caught.value)
    assert "\n" not in message
    assert "warm-standby" in message
    assert "lacks ordered_change_feed" in message


def test_stat_stand_in_is_compared_by_mzxid_only() -> None:
    event = TreeEvent(TreeEventKind.DELETED, "/brokers/ids/1", 5)
    assert event.newer_than(Stat(0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0))


@pytest.mark.parametrize("seed", range(4))
def test_the_census_lets_a_liveness_scan_skip_only_topics_it_cannot_concern(
    store: MemoryStore, seed: int
) -> None:
    """Random leaders, ISRs, deletions, garbage, growth and topics deleted and created again
    through the feed: each topic's census equals a recount of its rows and the image's index by
    broker inverts them, and a warm context finds exactly the partitions a cold one does
    for every set of live brokers (the census lets it skip whole topics)."""
    import random

    rng = random.Random(seed)
    for broker in range(4):
        register(store, broker)
    image, feed = follow(store)
    for name in ("a", "b", "c"):
        topic(store, name, 6, led=rng.random() < 0.7)
    for _ in range(60):
        tp = (rng.choice("abc"), rng.randrange(6))
        path = states.state_path(tp)
        roll = rng.random()
        if roll < 0.6:
            isr = tuple(sorted(rng.sample(range(4), rng.randint(1, 3))))
            leader = rng.choice([*isr, -1])
            data = states.encode_state(leader, rng.randrange(9), isr, 1)
            if store.exists(path) is None:
                store.create(path, data, make_parents=True)
            else:
                store.set(path, data)
        elif roll < 0.75 and store.exists(path) is not None:
            store.delete(path)
        elif roll < 0.85 and store.exists(path) is not None:
            store.set(path, b'{"leader":"x"}')
        elif roll < 0.9:
            store.delete(f"{layout.BROKER_TOPICS}/{tp[0]}", recursive=True)
            topic(store, tp[0], 6, led=rng.random() < 0.7)
        else:
            caught_up(image, feed, store)
            for held in image._topics.values():
                rows = held.states
                readable = rows[rows["status"] == 1]
                recount: dict[int, int] = {}
                for leader, isr in zip(
                    readable["leader"].tolist(), readable["isr"].tolist(), strict=True
                ):
                    for broker in (leader, *image._tuples.table[isr]):
                        recount[broker] = recount.get(broker, 0) + 1
                assert held.census == recount
                assert held.irregular == len(rows) - len(readable)
            # The index by broker is the censuses inverted (a scan looks dead brokers up in it).
            inverted: dict[int, set[str]] = {}
            for name, held in image._topics.items():
                for broker in held.census:
                    inverted.setdefault(broker, set()).add(name)
            assert image._naming.by_broker == inverted
    caught_up(image, feed, store)
    cold = ControllerContext(store, read_batch=5, owner="cold")
    cold.load()
    warm = ControllerContext(store, read_batch=5, owner="warm", image=image)
    warm.load()
    for live in ({0, 1, 2, 3}, {0, 1, 2}, {1, 3}, {0}, set()):
        alive = frozenset(live)
        assert sorted(warm.needing_attention(alive)) == sorted(cold.needing_attention(alive))
    for broker in range(-1, 5):
        named = sorted(
            tp
            for tp, _replicas, state in cold.parts.states()
            if state is not None and (state.leader == broker or broker in state.isr)
        )
        led = [tp for tp in named if cold.parts[tp].state.leader == broker]  # type: ignore[union-attr]
        assert sorted(warm.parts.naming(broker)) == named == sorted(cold.parts.naming(broker))
        assert sorted(warm.parts.naming(broker, as_leader_only=True)) == led
    feed.cancel()
