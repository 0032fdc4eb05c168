"""The one reader of a cluster's topics (coordkit.kafka.reader): what the admin commands read
strictly and the engine's snapshot leniently."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordkit.errors import LayoutError
from coordkit.kafka import layout
from coordkit.kafka.model import PartitionState, TopicAssignment
from coordkit.kafka.reader import read_topic_nodes
from coordkit_memory import MemoryServer, MemoryStore


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    client = MemoryStore.connect(MemoryServer())
    orders = TopicAssignment({0: (1, 2), 1: (2, 1)})
    client.create(layout.topic_path("orders"), layout.TOPIC.encode(orders), make_parents=True)
    state = PartitionState(leader=1, leader_epoch=3, isr=(1, 2), controller_epoch=1)
    client.create(
        layout.partition_state_path("orders", 0),
        layout.PARTITION_STATE.encode(state),
        make_parents=True,
    )
    client.create(layout.topic_path("garbled"), b"{not json", make_parents=True)
    yield client
    client.close()


def test_assignments_and_raw_states_of_the_topics_that_exist(store: MemoryStore) -> None:
    nodes = read_topic_nodes(store, ["orders", "missing"], strict=True)
    assert nodes.assignments == {"orders": TopicAssignment({0: (1, 2), 1: (2, 1)})}
    assert list(nodes.states) == [("orders", 0), ("orders", 1)]
    state = nodes.states[("orders", 0)]
    assert state is not None
    assert layout.PARTITION_STATE.decode(state[0]).leader_epoch == 3
    assert state[1] == 0  # the node's version, for fencing and memoised decoding
    assert nodes.states[("orders", 1)] is None  # no state node yet
    assert nodes.unreadable == ()


def test_strict_reading_names_the_node_it_cannot_decode(store: MemoryStore) -> None:
    with pytest.raises(LayoutError, match="/brokers/topics/garbled"):
        read_topic_nodes(store, ["orders", "garbled"], strict=True)


def test_lenient_reading_lists_it_and_reads_the_rest(store: MemoryStore) -> None:
    nodes = read_topic_nodes(store, ["garbled", "orders"], strict=False)
    assert list(nodes.assignments) == ["orders"]
    assert nodes.unreadable == ("/brokers/topics/garbled",)
