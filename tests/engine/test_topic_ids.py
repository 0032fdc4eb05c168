"""Topic ids for topics written without one (a version 1 or 2 node, by a tool older than Kafka
2.8): the controller gives each an id as Kafka's ``processTopicIds`` does — on failover and for new
topics — rewriting the node as version 3 with partitions and reassignment state kept, and never
changes an id a node has (tests/apache_kafka/test_zookeeper_mode.py holds Kafka 3.9 to the same)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pytest

from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.image import ROOT, MetadataImage
from coordkit.engine.controller.topic_ids import TopicIds
from coordkit.engine.errors import ControllerFencedError
from coordkit.engine.fencing import FencedWriter
from coordkit.engine.instrument import InstrumentedStore
from coordkit.errors import StoreError
from coordkit.kafka import layout
from coordkit.store import MetadataStore, Stat, TreeEvent, TreeEventKind
from coordkit.strategies.elections import ControllerTerm
from harness.waiting import wait_for

KAFKA_ID = re.compile(r"[A-Za-z0-9_-]{22}")
#: As Kafka 2.7's AdminZkClient wrote them: version 1, and version 2 (KIP-455) with empty moves.
OLD_V1 = b'{"version":1,"partitions":{"0":[0,1],"1":[1,0]}}'
OLD_V2 = b'{"version":2,"partitions":{"0":[1,0]},"adding_replicas":{},"removing_replicas":{}}'
KEPT_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
WITH_ID = (
    b'{"version":3,"partitions":{"0":[0,1]},"adding_replicas":{},"removing_replicas":{},'
    b'"topic_id":"' + KEPT_ID.encode() + b'"}'
)


def topic_node(store: MetadataStore, topic: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(store.get(layout.topic_path(topic))[0])
    return data


def write_old_topics(store: MetadataStore) -> None:
    for topic, data in (("old1", OLD_V1), ("old2", OLD_V2), ("kept", WITH_ID)):
        store.create(layout.topic_path(topic), data, make_parents=True)


def given_id(store: MetadataStore, topic: str) -> str | None:
    found = topic_node(store, topic).get("topic_id")
    return found if isinstance(found, str) else None


def assert_given(store: MetadataStore, topic: str, partitions: dict[str, list[int]]) -> str:
    node = topic_node(store, topic)
    assert node["version"] == 3
    assert KAFKA_ID.fullmatch(node["topic_id"]), node
    assert node["partitions"] == partitions  # kept, as Kafka's setTopicIds keeps them
    assert node["adding_replicas"] == node["removing_replicas"] == {}
    topic_id: str = node["topic_id"]
    return topic_id


@pytest.mark.parametrize("strategy", ["kafka", "warm-standby"])
def test_the_controller_gives_ids_to_topics_loaded_without_one(
    make_cluster: Callable[..., Cluster],
    open_session: Callable[[], MetadataStore],
    until: Callable[..., Any],
    strategy: str,
) -> None:
    admin = open_session()
    write_old_topics(admin)
    config = EngineConfig(controller_election=strategy, auto_leader_rebalance=False)
    cluster = make_cluster(2, config=config)
    wait_for(lambda: given_id(admin, "old1") and given_id(admin, "old2"), what="topic ids")
    first = assert_given(admin, "old1", {"0": [0, 1], "1": [1, 0]})
    second = assert_given(admin, "old2", {"0": [1, 0]})
    assert first != second
    assert given_id(admin, "kept") == KEPT_ID  # an id a node has is never changed
    view = until(cluster, lambda v: len(v.partitions) == 4, "leaders for every partition")
    assert {p.topic for p in view.partitions} == {"old1", "old2", "kept"}
    # A topic written without an id while the controller runs (a new topic) gets one too.
    admin.create(layout.topic_path("late"), OLD_V1)
    wait_for(lambda: given_id(admin, "late"), what="an id for the late topic")
    late = assert_given(admin, "late", {"0": [0, 1], "1": [1, 0]})
    # A new controller (on failover) keeps every id.
    controller = cluster.controller_broker()
    assert controller is not None
    cluster.kill(controller.broker_id)
    wait_for(
        lambda: (
            (found := cluster.controller_broker()) is not None
            and found.broker_id != controller.broker_id
            and found.controller is not None
            and found.controller.ready.is_set()
        ),
        what="a new controller",
    )
    cluster.start_broker(controller.broker_id)
    until(cluster, lambda v: len(v.partitions) == 6, "leaders after the failover")
    assert [given_id(admin, t) for t in ("old1", "old2", "kept", "late")] == [
        first,
        second,
        KEPT_ID,
        late,
    ]


def test_a_standby_image_hands_over_the_topics_without_an_id(
    open_session: Callable[[], MetadataStore],
) -> None:
    admin = open_session()
    write_old_topics(admin)
    image = MetadataImage()
    image.apply(TreeEvent(TreeEventKind.RESYNC, ROOT, 0))
    assert image.sync(admin)
    context = ControllerContext(admin, read_batch=100, owner="check", image=image)
    context.load()
    assert context.loaded_from == "image"
    assert context.without_ids == {"old1", "old2"}
    # The feed telling the node rewritten with an id takes the topic out.
    data, stat = admin.get(layout.topic_path("old1"))
    rewritten = data.replace(b'"version":1', b'"version":3,"topic_id":"' + KEPT_ID.encode() + b'"')
    after = attrs.evolve(stat, mzxid=stat.mzxid + 1_000_000, version=stat.version + 1)
    image.apply(
        TreeEvent(TreeEventKind.CHANGED, layout.topic_path("old1"), after.mzxid, rewritten, after)
    )
    again = ControllerContext(admin, read_batch=100, owner="check", image=image)
    again.load()
    assert again.without_ids == {"old2"}


class RewritesAfterRead(InstrumentedStore):
    """Rewrites ``old1`` (as a tool adding a partition would) right after the controller's read
    of the candidates: its write must fail the version check, not undo the tool's."""

    def __init__(self, inner: MetadataStore, other: MetadataStore):
        super().__init__(inner, "rewrites")
        self.other = other
        self.armed = True

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        found = super().get_many(paths)
        if self.armed and layout.topic_path("old1") in paths:
            self.armed = False
            self.other.set(
                layout.topic_path("old1"),
                b'{"version":1,"partitions":{"0":[0,1],"1":[1,0],"2":[0,1]}}',
            )
        return found


def test_a_node_rewritten_meanwhile_is_not_overwritten(
    open_session: Callable[[], MetadataStore],
) -> None:
    admin = open_session()
    write_old_topics(admin)
    # A term of its own (no cluster: a running controller would give the ids first).
    admin.create(layout.CONTROLLER_EPOCH, b"1", make_parents=True)
    own = open_session()
    writer = FencedWriter(own, ControllerTerm(0, 1, 0))
    # The candidates, read on a session that rewrites one node between the read and the write.
    context = ControllerContext(RewritesAfterRead(own, admin), read_batch=100, owner="check")
    context.without_ids = {"old1", "old2", "kept"}
    ids = TopicIds(context, writer, broker_id=0, write_batch_ops=10)
    assert ids.process() == ["old2"]
    assert given_id(admin, "old1") is None  # the tool's write stands ...
    assert topic_node(admin, "old1")["partitions"]["2"] == [0, 1]
    assert context.without_ids == {"old1"}  # ... and the topic stays a candidate
    assert ids.process() == ["old1"]
    assert_given(admin, "old1", {"0": [0, 1], "1": [1, 0], "2": [0, 1]})
    assert given_id(admin, "kept") == KEPT_ID
    # A write behind a newer epoch is fenced, as every controller write.
    admin.set(layout.CONTROLLER_EPOCH, b"2")
    context.without_ids = {"gone"}
    admin.create(layout.topic_path("gone"), OLD_V1)
    with pytest.raises(ControllerFencedError):
        ids.process()
    assert given_id(admin, "gone") is None
