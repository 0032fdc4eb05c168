"""The share-partition state through the metadata store (memory, ZooKeeper, Redis: ``--backend``):
what one leader writes, a new leader reads back and resumes — no acknowledgement lost, what was
acquired and not acknowledged delivered again; a leader that lost the partition cannot
overwrite it; a stored value that is not a state is refused naming the node."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from coordkit.errors import LayoutError
from coordkit.serve.dataplane.share.in_flight import AcknowledgementBatch, AcquiredRange
from coordkit.serve.dataplane.share.persister import (
    StaleStateError,
    StorePersister,
    group_path,
    state_path,
)
from coordkit.serve.dataplane.share.share_partition import SharePartition
from coordkit.store import MetadataStore
from harness.backends import Backend

TOPIC = uuid.UUID("8a4a2d0f-7d7e-4a3c-9c1e-2f6c1b0e9d11")


@pytest.fixture
def store(backend: Backend) -> Iterator[MetadataStore]:
    opened = backend.open(backend.new_url())
    yield opened
    opened.close()


def test_a_new_leader_resumes_what_the_old_one_persisted(store: MetadataStore) -> None:
    persister = StorePersister(store)
    assert persister.read("g", TOPIC, 0) is None
    old = SharePartition(0)
    old.acquire("m1", [(0, 9)], 500, 0)
    old.acknowledge("m1", [AcknowledgementBatch(0, 4, (1,)), AcknowledgementBatch(7, 7, (3,))], 1)
    version = persister.write("g", TOPIC, 0, old.persisted(2, 0), None)
    # The old leader fails here: 5, 6, 8, 9 acquired and not acknowledged.
    found = persister.read("g", TOPIC, 0)
    assert found is not None
    state, read_version = found
    assert read_version == version
    # Written with the start offset from before the acknowledgement (as Kafka writes it).
    assert state.start_offset == 0
    assert state.leader_epoch == 2
    new = SharePartition.restored(state)
    assert new.start_offset == 5
    # Nothing acknowledged comes back; the rest does, 7 (rejected) never.
    assert new.acquire("m2", [(0, 9)], 500, 0) == [AcquiredRange(5, 6, 1), AcquiredRange(8, 9, 1)]


def test_a_leader_that_lost_the_partition_cannot_overwrite_it(store: MetadataStore) -> None:
    persister = StorePersister(store)
    first = persister.write("g", TOPIC, 1, SharePartition(0).persisted(1, 0), None)
    with pytest.raises(StaleStateError):
        persister.write("g", TOPIC, 1, SharePartition(0).persisted(1, 0), None)
    second = persister.write("g", TOPIC, 1, SharePartition(3).persisted(2, 0), first)
    with pytest.raises(StaleStateError):
        persister.write("g", TOPIC, 1, SharePartition(9).persisted(1, 0), first)
    found = persister.read("g", TOPIC, 1)
    assert found is not None
    assert found[0].start_offset == 3
    assert found[1] == second


def test_a_group_s_states_are_listed_and_deleted_together(store: MetadataStore) -> None:
    persister = StorePersister(store)
    other = uuid.uuid4()
    for topic, partition in [(TOPIC, 0), (TOPIC, 2), (other, 0)]:
        persister.write("orders/eu", topic, partition, SharePartition(0).persisted(0, 0), None)
    persister.write("x", TOPIC, 0, SharePartition(0).persisted(0, 0), None)
    assert set(persister.partitions("orders/eu")) == {(TOPIC, 0), (TOPIC, 2), (other, 0)}
    persister.delete_group("orders/eu")
    assert persister.partitions("orders/eu") == []
    assert persister.partitions("x") == [(TOPIC, 0)]
    assert persister.delete("x", TOPIC, 0)
    assert not persister.delete("x", TOPIC, 0)


@pytest.mark.parametrize("group", ["", ".", "..", "a/b", "ü %"])
def test_any_group_id_is_a_node_name(group: str) -> None:
    name = group_path(group).rsplit("/", 1)[1]
    assert name not in ("", ".", "..")
    assert "/" not in name


@pytest.mark.parametrize(
    ("value", "wanted"),
    [
        (b"[]", "expected a JSON object"),
        (b'{"version": 9}', "unknown version 9"),
        (b'{"version": 1, "startOffset": 0, "leaderEpoch": 0, "stateEpoch": 0}', "stateBatches"),
        (b'{"version": 1, "startOffset": -3, "leaderEpoch": 0, "stateEpoch": 0, '
         b'"stateBatches": []}', "startOffset"),
        (b'{"version": 1, "startOffset": 0, "leaderEpoch": 0, "stateEpoch": 0, "stateBatches": '
         b'[{"firstOffset": 0, "lastOffset": 1, "deliveryState": 1, "deliveryCount": 1}]}',
         "delivery state 1 is never persisted"),
        (b'{"version": 1, "startOffset": 5, "leaderEpoch": 0, "stateEpoch": 0, "stateBatches": '
         b'[{"firstOffset": 0, "lastOffset": 1, "deliveryState": 2, "deliveryCount": 1}]}',
         "before the start offset"),
        (b'{"version": 1, "startOffset": 0, "leaderEpoch": 0, "stateEpoch": 0, "stateBatches": '
         b'[{"firstOffset": 4, "lastOffset": 1, "deliveryState": 2, "deliveryCount": 1}]}',
         "lastOffset"),
    ],
)  # fmt: skip
def test_a_stored_value_that_is_not_a_state_is_refused_naming_the_node(
    store: MetadataStore, value: bytes, wanted: str
) -> None:
    path = state_path("g", TOPIC, 0)
    store.create(path, value, make_parents=True)
    with pytest.raises(LayoutError, match=wanted) as caught:
        StorePersister(store).read("g", TOPIC, 0)
    assert path in str(caught.value)
