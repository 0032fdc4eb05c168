"""Offset storages (``zookeeper`` and ``offsets-topic``) on every backend: commit and fetch, all or
nothing, concurrent committers, restart-resume, bad input, and the offsets-topic partitioning."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from coordkit.errors import (
    BadVersionError,
    LayoutError,
    NoNodeError,
    StoreError,
    UnsupportedError,
)
from coordkit.kafka import layout
from coordkit.kafka.coordinators import coordinator_partition
from coordkit.kafka.model import TopicPartition
from coordkit.plugins import get_plugin_manager
from coordkit.store import Check, MetadataStore
from coordkit.strategies.offsets import InvalidOffsetRequestError, OffsetAndMetadata, OffsetStorage
from coordkit_offsets import OffsetsTopicStorage

STORAGES = ["zookeeper", "offsets-topic"]

Session = Callable[[], MetadataStore]


def storage(name: str, store: MetadataStore, **options: Any) -> OffsetStorage:
    made = get_plugin_manager().offset_store(name)(store, **options)
    assert isinstance(made, OffsetStorage)
    return made


def topic_storage(store: MetadataStore, **options: Any) -> OffsetsTopicStorage:
    made = storage("offsets-topic", store, **options)
    assert isinstance(made, OffsetsTopicStorage)
    return made


def tree(store: MetadataStore) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    stack = ["/"]
    while stack:
        path = stack.pop()
        out[path] = store.get(path)[0]
        stack.extend(f"{path.rstrip('/')}/{c}" for c in store.children(path))
    return out


def offsets(**values: int) -> dict[TopicPartition, OffsetAndMetadata]:
    """``orders_3=7`` → ``{TopicPartition("orders", 3): OffsetAndMetadata(7)}``."""
    out = {}
    for key, value in values.items():
        topic, _, partition = key.rpartition("_")
        out[TopicPartition(topic, int(partition))] = OffsetAndMetadata(value)
    return out


def positions(fetched: dict[TopicPartition, OffsetAndMetadata]) -> dict[str, int]:
    return {str(tp): value.offset for tp, value in fetched.items()}


@pytest.mark.parametrize("name", STORAGES)
def test_commit_then_fetch_returns_latest_offsets(name: str, open_session: Session) -> None:
    store = storage(name, open_session())
    store.commit("billing", offsets(orders_0=5, orders_1=9, audit_0=1))
    store.commit("billing", offsets(orders_1=12))  # last write per key wins
    store.commit("other", offsets(orders_0=100))

    assert positions(store.fetch("billing")) == {"audit-0": 1, "orders-0": 5, "orders-1": 12}
    wanted = [TopicPartition("orders", 1), TopicPartition("orders", 7)]
    assert positions(store.fetch("billing", wanted)) == {"orders-1": 12}
    assert positions(store.fetch("nobody")) == {}
    assert store.groups() == ["billing", "other"]


@pytest.mark.parametrize("name", STORAGES)
def test_delete_group_forgets_only_that_group(name: str, open_session: Session) -> None:
    store = storage(name, open_session())
    store.commit("a", offsets(t_0=1, t_1=2, u_0=3))
    store.commit("b", offsets(t_0=4))
    store.delete_group("a")
    store.delete_group("never-committed")
    assert store.fetch("a") == {}
    assert positions(store.fetch("b")) == {"t-0": 4}
    assert store.groups() == ["b"]


@pytest.mark.parametrize("name", STORAGES)
def test_delete_offsets_forgets_only_those_partitions_while_the_fence_holds(
    name: str, open_session: Session
) -> None:
    """OffsetDelete's storage step: the partitions named go (one never committed is skipped),
    the group's others and other groups' stay; a stale fence deletes nothing (op 0)."""
    store = open_session()
    store.create("/fence", b"state")
    stored = storage(name, store)
    stored.commit("a", offsets(t_0=1, t_1=2, u_0=3))
    stored.commit("b", offsets(t_0=4))
    stored.delete_offsets("a", [TopicPartition("t", 0), TopicPartition("t", 9)],
                          fence=[Check("/fence", 0)])  # fmt: skip
    assert positions(stored.fetch("a")) == {"t-1": 2, "u-0": 3}
    assert positions(stored.fetch("b")) == {"t-0": 4}
    before = tree(store)
    with pytest.raises(BadVersionError) as stale:
        stored.delete_offsets("a", [TopicPartition("u", 0)], fence=[Check("/fence", 7)])
    assert stale.value.op_index == 0
    assert tree(store) == before


@pytest.mark.parametrize("name", STORAGES)
def test_new_session_resumes_from_committed_offsets(name: str, open_session: Session) -> None:
    first = open_session()
    storage(name, first).commit("g", offsets(events_0=41, events_1=7))
    first.close()
    resumed = storage(name, open_session())
    assert positions(resumed.fetch("g")) == {"events-0": 41, "events-1": 7}


@pytest.mark.parametrize("name", STORAGES)
def test_commit_failing_mid_way_leaves_store_unchanged(name: str, open_session: Session) -> None:
    session = open_session()
    store = storage(name, session)
    store.commit("g", offsets(ok_0=1))  # the layout's roots exist, so only the new nodes differ
    # An ephemeral node where the commit must create a parent: the last op of the multi fails.
    blocker = open_session()
    if name == "zookeeper":
        blocked = layout.consumer_offsets_path("g", "zz")
    else:
        blocked = topic_storage(blocker).record_path("g", TopicPartition("zz", 0)).rsplit("/", 1)[0]
    blocker.create(blocked, b"", ephemeral=True, make_parents=True)
    before = tree(session)

    with pytest.raises(StoreError):
        store.commit("g", offsets(ok_0=2, ok_1=5, zz_0=9))

    assert tree(session) == before
    assert positions(store.fetch("g")) == {"ok-0": 1}


@pytest.mark.parametrize("name", STORAGES)
def test_concurrent_committers_creating_the_same_nodes_all_succeed(
    name: str, open_session: Session
) -> None:
    committers = 4
    stores = [storage(name, open_session()) for _ in range(committers)]
    errors: list[BaseException] = []
    start = threading.Barrier(committers)

    def commit(index: int) -> None:
        try:
            start.wait()
            stores[index].commit("race", offsets(t_0=index, t_1=index, u_0=index))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(committers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    final = positions(stores[0].fetch("race"))
    assert set(final) == {"t-0", "t-1", "u-0"}
    # Each commit was atomic, so the three keys hold the same committer's value.
    assert len(set(final.values())) == 1
    assert next(iter(final.values())) in range(committers)


@pytest.mark.parametrize("name", STORAGES)
@pytest.mark.parametrize(
    ("group", "entries", "fragment"),
    [
        ("", {TopicPartition("t", 0): OffsetAndMetadata(1)}, "group id must be non-empty"),
        ("a/b", {TopicPartition("t", 0): OffsetAndMetadata(1)}, "must not contain '/'"),
        ("g", {TopicPartition("bad topic", 0): OffsetAndMetadata(1)}, "'bad topic'"),
        ("g", {("t", 0): OffsetAndMetadata(1)}, "expected a TopicPartition"),
        ("g", {TopicPartition("t", 0): 5}, "expected an OffsetAndMetadata"),
    ],
)
def test_bad_commit_input_is_named_and_writes_nothing(
    name: str, group: str, entries: dict[Any, Any], fragment: str, open_session: Session
) -> None:
    session = open_session()
    store = storage(name, session)
    before = tree(session)
    with pytest.raises(InvalidOffsetRequestError, match="offsets of group") as info:
        store.commit(group, entries)
    assert fragment in str(info.value)
    assert tree(session) == before


def test_negative_offsets_and_partitions_are_refused_by_the_value_types() -> None:
    with pytest.raises(ValueError, match="offset"):
        OffsetAndMetadata(-1)
    with pytest.raises(ValueError, match="partition"):
        TopicPartition("t", -1)


@pytest.mark.parametrize("name", STORAGES)
def test_fetch_names_bad_partitions(name: str, open_session: Session) -> None:
    store = storage(name, open_session())
    with pytest.raises(InvalidOffsetRequestError, match=r"'g'.*expected a TopicPartition"):
        store.fetch("g", ["t-0"])  # type: ignore[list-item]


def test_zookeeper_storage_writes_seed_001_layout(open_session: Session) -> None:
    session = open_session()
    storage("zookeeper", session).commit("g", offsets(orders_2=1234))
    data, _ = session.get("/consumers/g/offsets/orders/2")
    assert data == b"1234"
    assert layout.decode_znode("/consumers/g/offsets/orders/2", data).offset == 1234


def test_offsets_topic_places_groups_by_coordinator_partition(open_session: Session) -> None:
    session = open_session()
    store = topic_storage(session, num_partitions=7)
    groups = [f"group-{i}" for i in range(12)]
    for group in groups:
        store.commit(group, {TopicPartition("t", 0): OffsetAndMetadata(1, metadata=group)})

    for partition in range(7):
        expected = sorted(g for g in groups if coordinator_partition(g, 7) == partition)
        assert store.groups_in_partition(partition) == expected
        loaded = store.load_partition(partition)
        assert sorted(loaded) == expected
        for group, committed in loaded.items():
            assert committed[TopicPartition("t", 0)].metadata == group
    assert store.partition_of("group-3") == coordinator_partition("group-3", 7)


def test_offsets_topic_keeps_the_whole_record(open_session: Session) -> None:
    store = storage("offsets-topic", open_session())
    tp = TopicPartition("t", 4)
    stamped = OffsetAndMetadata(9, metadata="batch-17", commit_timestamp=123, leader_epoch=3)
    store.commit("g", {tp: stamped})
    assert store.fetch("g") == {tp: stamped}
    store.commit("g", {tp: OffsetAndMetadata(10)})
    latest = store.fetch("g")[tp]
    assert (latest.offset, latest.metadata, latest.leader_epoch) == (10, "", -1)
    assert latest.commit_timestamp > 0  # stamped by the storage when the committer did not


def test_offsets_topic_refuses_another_partition_count(open_session: Session) -> None:
    session = open_session()
    storage("offsets-topic", session, num_partitions=10).commit("g", offsets(t_0=1))
    with pytest.raises(LayoutError, match="num_partitions=10"):
        storage("offsets-topic", session, num_partitions=50).fetch("g")


def test_factories_name_unknown_and_bad_options(open_session: Session) -> None:
    session = open_session()
    with pytest.raises(TypeError, match=r"'offsets-topic': unknown option\(s\) partitions"):
        storage("offsets-topic", session, partitions=3)
    with pytest.raises(ValueError, match="'num_partitions' must be >= 1"):
        storage("offsets-topic", session, num_partitions=0)
    with pytest.raises(TypeError, match="'zookeeper': expected a MetadataStore"):
        get_plugin_manager().offset_store("zookeeper")("not a store")


@pytest.mark.parametrize("name", STORAGES)
def test_require_durable_follows_the_backends_characteristics(
    name: str, open_session: Session
) -> None:
    store = open_session()
    if store.characteristics.durable:
        storage(name, store, require_durable=True).commit("g", offsets(t_0=1))
        fetched = storage(name, open_session()).fetch("g")
        assert {tp: o.offset for tp, o in fetched.items()} == {TopicPartition("t", 0): 1}
    else:
        with pytest.raises(UnsupportedError, match=f"offset storage '{name}' with require_durable"):
            storage(name, store, require_durable=True)
    with pytest.raises(TypeError, match="'require_durable' must be bool"):
        storage(name, store, require_durable="yes")


@pytest.mark.parametrize("name", STORAGES)
def test_fenced_commit_writes_only_while_the_fence_holds(name: str, open_session: Session) -> None:
    """A coordinator fences commits with its offsets partition's state version: a stale version
    or a missing node refuses the whole commit and names the fence (op 0)."""
    store = open_session()
    store.create("/fence", b"state")
    stored = storage(name, store)
    stored.commit("g", offsets(t_0=1), fence=[Check("/fence", 0)])
    store.set("/fence", b"moved")  # the partition's state changed: version 1
    before = tree(store)
    with pytest.raises(BadVersionError) as stale:
        stored.commit("g", offsets(t_0=2, t_1=2), fence=[Check("/fence", 0)])
    assert stale.value.op_index == 0
    with pytest.raises(NoNodeError) as gone:
        stored.commit("g", offsets(t_0=3), fence=[Check("/nowhere", 0)])
    assert gone.value.op_index == 0
    assert tree(store) == before
    assert {tp: o.offset for tp, o in stored.fetch("g").items()} == {TopicPartition("t", 0): 1}
    stored.commit("g", offsets(t_0=4), fence=[Check("/fence", 1)])
    assert stored.fetch("g")[TopicPartition("t", 0)].offset == 4
