"""The layout differential (#30): the same operations on three Kafka 3.9 brokers in ZooKeeper mode
and on coordkit's engine, each on its own chroot of one test ZooKeeper, and both trees compared
node by node after each step settles.

Kafka's brokers are driven as an operator drives them: topics, partitions, configs and deletions
through kafka-python's admin client; a controlled shutdown is SIGTERM, a crash SIGKILL. The
preferred election and the reassignment go through their request nodes
(``/admin/preferred_replica_election``, ``/admin/reassign_partitions``), the ZooKeeper-mode
interface Kafka 3.9's controller still watches (its tools send ElectLeaders and
AlterPartitionReassignments instead: KIP-460, KIP-455), written with coordkit's own encoders: so
Kafka's controller reads coordkit's bytes there. coordkit's engine gets the same operations
through a :class:`Cluster` on ``zookeeper://``. Both use the same broker ids, racks, topic names,
partition counts and explicit assignments; the topic each side places at random is compared by
shape (see ``harness.zookeeper_trees``), and the first controller is the same broker on both
sides (coordkit starts Kafka's first), so that the same brokers fail in every step.

Every difference must be a row of the table "Where coordkit differs from Kafka 3.9's ZooKeeper
layout" (docs/engine.md), and every row must still occur: a new difference or a stale row fails.
The seeds' JSON examples are held to both trees in ``test_seed_example_reads_as_kafka_writes_it``.
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import re
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import pytest

from coordkit.engine import Cluster
from coordkit.engine.config import EngineConfig
from coordkit.kafka import layout
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from harness.docs import page
from harness.waiting import wait_for
from harness.zookeeper_trees import (
    Difference,
    KnownDifference,
    Node,
    Normaliser,
    compare,
    dump_tree,
    known_differences,
    render,
)

RACKS = {1: "a", 2: "b", 3: "a"}
BROKERS = tuple(RACKS)
#: Placed by each side's rack-aware placement from a random start: compared by shape.
PLACED = "placed"
#: Placed by hand, the same on both sides: compared exactly.
PINNED = "pinned"
PINNED_ASSIGNMENT = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
#: Each broker is the preferred leader of two partitions: whichever is the first controller still
#: leads one when it fails, after the reassignment has moved the other.
PINNED_ADDED = {3: [1, 3], 4: [2, 1], 5: [3, 2]}
PINNED_CONFIG = {"retention.ms": "86400000"}
PINNED_CONFIG_CHANGED = {"retention.ms": "3600000", "cleanup.policy": "compact"}
#: Written straight into each tree as seed 003's example is (a version 1 node, no topic id), as
#: a tool older than Kafka 2.8 wrote topics.
LEGACY = "legacy"
LEGACY_TOPIC_NODE = b'{"version":1,"partitions":{"0":[1,2],"1":[2,1],"2":[1,2]}}'
#: Kafka's automatic preferred-leader rebalance runs 5 s after a controller takes over: off on
#: both sides, so that leadership moves only when a step moves it. A frozen broker's ZooKeeper
#: session may have been silent a third of its timeout already (its client pings when idle): 10 s
#: keeps a broker frozen up to REASSIGNMENT_START_TIMEOUT well alive.
KAFKA_PROPERTIES = {
    "auto.leader.rebalance.enable": "false",
    "zookeeper.session.timeout.ms": "10000",
}
REASSIGNMENT_START_TIMEOUT = 4.0
ENGINE_CONFIG = EngineConfig(auto_leader_rebalance=False)
#: A step settles within this; Kafka notices a SIGKILLed broker when its session expires.
SETTLE_TIMEOUT = 60.0

#: The table of known differences: its rows are what this test holds coordkit to.
TABLE_DOCUMENT = page("engine.md")
TABLE_TITLE = "Where coordkit differs from Kafka 3.9's ZooKeeper layout"


# -- the two sides -----------------------------------------------------------------------------


class Side(abc.ABC):
    """One cluster under test and its chroot, read through ``zk`` (a kazoo client)."""

    name: str

    def __init__(self, zk: Any, chroot: str):
        self.zk = zk
        self.chroot = chroot

    def dump(self) -> dict[str, Node]:
        return dump_tree(self.zk, self.chroot)

    def write_node(self, path: str, data: bytes) -> None:
        """Create a node as an outside tool would: an admin request, or a topic written by a
        tool older than topic ids."""
        self.zk.create(f"{self.chroot}{path}", data, makepath=True)

    def settled_tree(self, live: Sequence[int]) -> dict[str, Node]:
        """The tree, once it shows a settled cluster of brokers ``live`` and reads the same
        twice in a row (a controller still writing would change it)."""

        waiting_for = ""

        def check() -> dict[str, Node] | None:
            nonlocal waiting_for
            first = self.dump()
            waiting_for = unsettled(first, live) or self.busy()
            if waiting_for:
                return None
            second = self.dump()
            return first if first == second else None

        try:
            tree = wait_for(
                check, timeout=SETTLE_TIMEOUT, what=f"{self.name}'s tree to settle on {live}"
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {waiting_for}\n{self.logs()}") from None
        assert tree is not None  # wait_for returns only what is true
        return tree

    def busy(self) -> str:
        """Why the side itself says it has not settled, beyond its tree (empty when it has)."""
        return ""

    def logs(self) -> str:
        """What to show when the side does not settle."""
        return render(self.dump())

    @abc.abstractmethod
    def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        assignment: Mapping[int, Sequence[int]] | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None: ...

    @abc.abstractmethod
    def add_partitions(
        self, topic: str, total: int, assignment: Mapping[int, Sequence[int]] | None = None
    ) -> None: ...

    @abc.abstractmethod
    def set_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace the topic's config overrides."""

    @abc.abstractmethod
    def delete_topic(self, topic: str) -> None: ...

    @abc.abstractmethod
    def controlled_shutdown(self, broker: int) -> None: ...

    @abc.abstractmethod
    def crash(self, broker: int) -> None: ...

    @abc.abstractmethod
    def start(self, broker: int) -> None: ...

    @abc.abstractmethod
    def fetching_paused(self, broker: int) -> contextlib.AbstractContextManager[None]:
        """While inside, ``broker`` fetches nothing (it stays registered)."""


class KafkaSide(Side):
    """Kafka 3.9's brokers, driven through kafka-python's admin client and signals."""

    name = "Kafka"

    def __init__(self, zk: Any, cluster: KafkaCluster):
        assert cluster.chroot is not None
        super().__init__(zk, cluster.chroot)
        self.cluster = cluster

    @contextlib.contextmanager
    def admin(self) -> Iterator[Any]:
        from kafka.admin import KafkaAdminClient

        running = [n.address for n in self.cluster.nodes.values() if n.running]
        client = KafkaAdminClient(bootstrap_servers=running, request_timeout_ms=30000)
        try:
            yield client
        finally:
            client.close()

    def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        assignment: Mapping[int, Sequence[int]] | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        from kafka.admin import NewTopic

        configs = dict(config or {})
        if assignment is None:
            new = NewTopic(topic, partitions, replication_factor, topic_configs=configs)
        else:
            replicas = {p: list(r) for p, r in assignment.items()}
            new = NewTopic(topic, replica_assignments=replicas, topic_configs=configs)
        with self.admin() as admin:
            admin.create_topics([new])

    def add_partitions(
        self, topic: str, total: int, assignment: Mapping[int, Sequence[int]] | None = None
    ) -> None:
        from kafka.admin import NewPartitions

        added = None if assignment is None else [list(r) for _, r in sorted(assignment.items())]
        with self.admin() as admin:
            admin.create_partitions({topic: NewPartitions(total, added)})

    def set_config(self, topic: str, config: Mapping[str, str]) -> None:
        from kafka.admin import ConfigResource, ConfigResourceType

        resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs=dict(config))
        with self.admin() as admin:
            # AlterConfigs (not the incremental one) replaces the whole set, as coordkit's does.
            admin.alter_configs([resource], incremental=False)

    def delete_topic(self, topic: str) -> None:
        with self.admin() as admin:
            admin.delete_topics([topic])

    def controlled_shutdown(self, broker: int) -> None:
        self.cluster.stop(broker)  # SIGTERM: Kafka's controlled shutdown, then its exit

    def crash(self, broker: int) -> None:
        self.cluster.kill(broker)

    def start(self, broker: int) -> None:
        self.cluster.node(broker).start()

    @contextlib.contextmanager
    def fetching_paused(self, broker: int) -> Iterator[None]:
        # SIGSTOP: it fetches nothing, and its ZooKeeper session outlives the pause.
        pid = self.cluster.node(broker).pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def settled_tree(self, live: Sequence[int]) -> dict[str, Node]:
        self.cluster.wait_ready(SETTLE_TIMEOUT)  # every running broker's Metadata lists them all
        return super().settled_tree(live)

    def logs(self) -> str:
        return f"{super().logs()}\n{self.cluster.log_tail()}"


class CoordkitSide(Side):
    """coordkit's engine: a :class:`Cluster` on the same ZooKeeper."""

    name = "coordkit"

    def __init__(self, zk: Any, chroot: str, cluster: Cluster):
        super().__init__(zk, chroot)
        self.cluster = cluster

    def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        assignment: Mapping[int, Sequence[int]] | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        self.cluster.create_topic(
            topic, partitions, replication_factor, assignment=assignment, config=config
        )

    def add_partitions(
        self, topic: str, total: int, assignment: Mapping[int, Sequence[int]] | None = None
    ) -> None:
        self.cluster.admin.add_partitions(topic, total, assignment=assignment)

    def set_config(self, topic: str, config: Mapping[str, str]) -> None:
        self.cluster.admin.set_config(topic, config)

    def delete_topic(self, topic: str) -> None:
        self.cluster.delete_topic(topic)

    def controlled_shutdown(self, broker: int) -> None:
        self.cluster.stop(broker)

    def crash(self, broker: int) -> None:
        self.cluster.kill(broker)

    def start(self, broker: int) -> None:
        self.cluster.start_broker(broker)

    @contextlib.contextmanager
    def fetching_paused(self, broker: int) -> Iterator[None]:
        fetcher = self.cluster.fetchers[broker]
        fetcher.pause()
        try:
            yield
        finally:
            fetcher.resume()

    def busy(self) -> str:
        status = self.cluster.settled()
        return "" if status else status.waiting_for or "the cluster has not settled"


def unsettled(tree: Mapping[str, Node], live: Sequence[int]) -> str:
    """Why ``tree`` does not show a settled cluster of brokers ``live`` (empty when it does): a
    controller among them, no admin request left, every partition with a leader and an ISR of
    exactly its live replicas, no ISR change notification left."""
    registered = sorted(
        int(p.rsplit("/", 1)[1]) for p in tree if re.match(r"^/brokers/ids/\d+$", p)
    )
    if registered != sorted(live):
        return f"brokers {registered} registered"
    controller = _json(tree.get("/controller"))
    if not isinstance(controller, dict) or controller.get("brokerid") not in live:
        return "no controller among the live brokers"
    pending = [
        p
        for p in tree
        if p in (layout.REASSIGN_PARTITIONS, layout.PREFERRED_REPLICA_ELECTION)
        or p.startswith((f"{layout.DELETE_TOPICS}/", "/isr_change_notification/"))
    ]
    if pending:
        return f"pending {pending}"
    for path in tree:
        match = re.match(r"^/brokers/topics/([^/]+)$", path)
        if match is None:
            continue
        assignment = _json(tree[path])
        if not isinstance(assignment, dict):
            return f"{path} unreadable"
        if assignment.get("adding_replicas") or assignment.get("removing_replicas"):
            return f"{path} is being reassigned"
        for partition, replicas in assignment["partitions"].items():
            state = _json(tree.get(f"{path}/partitions/{partition}/state"))
            if not isinstance(state, dict):
                return f"{path} partition {partition} has no state"
            live_replicas = [b for b in replicas if b in live]
            all_in_sync = sorted(state["isr"]) == sorted(live_replicas)
            if state["leader"] not in live_replicas or not all_in_sync:
                return f"{path} partition {partition}: {state} (live replicas {live_replicas})"
    return ""


def _json(node: Node | None) -> Any:
    if node is None or not node.data:
        return None
    try:
        return json.loads(node.data)
    except ValueError:
        return None


# -- the scenario --------------------------------------------------------------------------------


@attrs.frozen
class Step:
    """Both trees after one step, and how they differ."""

    name: str
    kafka: dict[str, Node]
    coordkit: dict[str, Node]
    differences: list[Difference]


STEP_NAMES = (
    "three brokers started",
    "topics created",
    "topic written without an id",
    "partitions added",
    "topic config changed",
    "topics deleted",
    "controlled shutdown",
    "restarted after the controlled shutdown",
    "broker crashed",
    "restarted after the crash",
    "preferred election",
    "reassignment in flight",
    "reassignment done",
    "controller failed over",
)


class Scenario:
    """Runs each step on Kafka, then on coordkit, and keeps both trees once they settle."""

    def __init__(self, kafka: KafkaSide, coordkit: CoordkitSide, controller: int):
        self.sides: tuple[Side, Side] = (kafka, coordkit)
        #: The first controller (the same broker on both sides) and the two other brokers.
        self.controller = controller
        self.first_other, self.second_other = (b for b in BROKERS if b != controller)
        self.live = list(BROKERS)
        self.normaliser = Normaliser(racks=RACKS, placed_topics=frozenset({PLACED}))
        self.steps: list[Step] = []

    def step(self, name: str, action: Callable[[Side], object] | None = None) -> None:
        """``action`` on each side, then both trees once settled."""
        assert name in STEP_NAMES, name
        for side in self.sides:
            if action is not None:
                action(side)
        self.record(name, *(side.settled_tree(self.live) for side in self.sides))

    def record(self, name: str, kafka: dict[str, Node], coordkit: dict[str, Node]) -> None:
        normalise = self.normaliser.normalise
        self.steps.append(
            Step(name, kafka, coordkit, compare(normalise(kafka), normalise(coordkit)))
        )

    def run(self) -> list[Step]:
        self.step("three brokers started")
        self.step("topics created", create_topics)
        # As a tool older than Kafka 2.8 wrote topics: version 1, no id (seed 003's example).
        self.step(
            "topic written without an id",
            lambda side: side.write_node(layout.topic_path(LEGACY), LEGACY_TOPIC_NODE),
        )
        self.step("partitions added", add_partitions)
        self.step(
            "topic config changed", lambda side: side.set_config(PINNED, PINNED_CONFIG_CHANGED)
        )
        self.step("topics deleted", delete_topics)

        self.live.remove(self.first_other)
        self.step("controlled shutdown", lambda side: side.controlled_shutdown(self.first_other))
        self.live.append(self.first_other)
        self.step(
            "restarted after the controlled shutdown", lambda side: side.start(self.first_other)
        )
        self.live.remove(self.second_other)
        self.step("broker crashed", lambda side: side.crash(self.second_other))
        self.live.append(self.second_other)
        self.step("restarted after the crash", lambda side: side.start(self.second_other))

        every_partition = [(PINNED, p) for p in sorted({*PINNED_ASSIGNMENT, *PINNED_ADDED})]
        election = layout.encode_preferred_election(every_partition)
        self.step(
            "preferred election",
            lambda side: side.write_node(layout.PREFERRED_REPLICA_ELECTION, election),
        )
        self.reassign()

        self.live.remove(self.controller)
        self.step("controller failed over", lambda side: side.crash(self.controller))
        return self.steps

    def reassign(self) -> None:
        """Move the controller's replica of a partition it leads to the broker outside it. The
        joining replica fetches nothing until both trees are read, so the reassignment is caught
        between its phases (the topic node lists the replicas it adds and removes)."""
        partition, replicas = next(
            (p, r) for p, r in PINNED_ASSIGNMENT.items() if r[0] == self.controller
        )
        (joining,) = (b for b in BROKERS if b not in replicas)
        target = [joining if b == self.controller else b for b in replicas]
        plan = layout.encode_reassignment({(PINNED, partition): target})
        in_flight = []
        for side in self.sides:
            with side.fetching_paused(joining):
                side.write_node(layout.REASSIGN_PARTITIONS, plan)
                in_flight.append(reassignment_started(side, partition))
        self.record("reassignment in flight", *in_flight)
        self.step("reassignment done")


def create_topics(side: Side) -> None:
    side.create_topic(PLACED, 4, 2)
    side.create_topic(PINNED, len(PINNED_ASSIGNMENT), 2, PINNED_ASSIGNMENT, PINNED_CONFIG)


def add_partitions(side: Side) -> None:
    side.add_partitions(PLACED, 6)
    side.add_partitions(PINNED, len(PINNED_ASSIGNMENT) + len(PINNED_ADDED), PINNED_ADDED)


def delete_topics(side: Side) -> None:
    side.delete_topic(PLACED)
    side.delete_topic(LEGACY)


def reassignment_started(side: Side, partition: int) -> dict[str, Node]:
    """The tree once the controller has started moving ``partition`` (the topic node lists the
    replicas it adds) and reads the same twice in a row."""

    def check() -> dict[str, Node] | None:
        first = side.dump()
        assignment = _json(first.get(layout.topic_path(PINNED)))
        if not (isinstance(assignment, dict) and assignment.get("adding_replicas")):
            return None
        second = side.dump()
        return first if first == second else None

    tree = wait_for(
        check,
        timeout=REASSIGNMENT_START_TIMEOUT,
        what=f"{side.name} to start reassigning {PINNED}-{partition}",
    )
    assert tree is not None  # wait_for returns only what is true
    return tree


@pytest.fixture(scope="module")
def steps(zookeeper: StandaloneZooKeeper) -> Iterator[list[Step]]:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zookeeper.hosts)
    zk.start()
    try:
        with KafkaCluster(
            zookeeper=zookeeper.hosts,
            broker_ids=BROKERS,
            racks=RACKS,
            properties=KAFKA_PROPERTIES,
        ) as kafka_cluster:
            kafka = KafkaSide(zk, kafka_cluster)
            # coordkit's first broker is the one Kafka's brokers elected: the same controller on
            # both sides, so the same broker ids fail in every later step.
            controller = kafka_cluster.metadata().controller_id
            assert controller in BROKERS, f"Kafka's Metadata names controller {controller}"
            chroot = f"/coordkit-{os.getpid()}"
            with Cluster(
                f"zookeeper://{zookeeper.hosts}{chroot}",
                [controller],
                racks=RACKS,
                config=ENGINE_CONFIG,
                seed=7,
            ) as engine:
                engine.wait_settled()
                for broker in BROKERS:
                    if broker != controller:
                        engine.start_broker(broker)
                coordkit = CoordkitSide(zk, chroot, engine)
                yield Scenario(kafka, coordkit, controller).run()
    finally:
        zk.stop()
        zk.close()


# -- the table of known differences --------------------------------------------------------------


def table_rows() -> list[KnownDifference]:
    return known_differences(TABLE_DOCUMENT, TABLE_TITLE)


def _report(step: Step, differences: Sequence[Difference]) -> str:
    lines = "\n".join(f"  {d.line()}" for d in differences)
    return (
        f"after '{step.name}':\n{lines}\n"
        f"-- Kafka's tree:\n{render(step.kafka)}\n-- coordkit's tree:\n{render(step.coordkit)}"
    )


# -- the tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("step_name", STEP_NAMES)
def test_trees_differ_only_as_the_table_says(step_name: str, steps: list[Step]) -> None:
    (step,) = (s for s in steps if s.name == step_name)
    rows = table_rows()
    unexplained = [d for d in step.differences if not any(r.matches(d) for r in rows)]
    assert not unexplained, (
        f"differences from Kafka 3.9 not in the table {TABLE_TITLE!r} of {TABLE_DOCUMENT} "
        + _report(step, unexplained)
    )


def test_every_row_of_the_table_still_occurs(steps: list[Step]) -> None:
    every = [d for step in steps for d in step.differences]
    stale = [r for r in table_rows() if not any(r.matches(d) for d in every)]
    assert not stale, f"rows of {TABLE_DOCUMENT} that no difference matches any more: " + "; ".join(
        str(r) for r in stale
    )


# -- the seeds' examples (#30 item 5) --------------------------------------------------------------


@attrs.frozen
class SeedExample:
    """A JSON example of one of the seeds (shared/seeds/NNN_*.txt), with where the
    differential's trees hold such a node; ``path`` is ``None`` for a node Kafka 3.9 no longer
    writes. Where a page's example is not JSON as printed, ``repaired`` says what was mended."""

    seed: str
    node: str
    path: str | None
    example: bytes
    repaired: str = ""

    @property
    def id(self) -> str:
        written = "" if self.path is not None else "-kafka-3.9-writes-none"
        return f"seed{self.seed}-{self.node.replace(' ', '-')}{written}"


#: The step whose trees the examples are held to: every broker up, partitions led as assigned.
SEED_STEP = "preferred election"
PINNED_STATE = layout.partition_state_path(PINNED, 0)
SEED_EXAMPLES = (
    SeedExample(
        "000",
        "partition state",
        PINNED_STATE,
        b'{"controller_epoch":61,"leader":0,"version":1,"leader_epoch":0,"isr":[0,2,1]}',
    ),
    SeedExample(
        "000",
        "controller",
        "/controller",
        b'{"version": 1,"brokerid": 0,"timestamp": "1533452008692"}',
    ),
    # "kafka集群中第一个broker第一次启动时为1": the first broker's first start makes it 1.
    SeedExample("000", "controller epoch", "/controller_epoch", b"1"),
    SeedExample(
        "001",
        "topic",
        layout.topic_path(PINNED),
        b'{"version":1,"partitions":{"0":[0,1,2]}}',
        "single quotes made double",
    ),
    SeedExample(
        "001",
        "partition state",
        PINNED_STATE,
        b'{"controller_epoch":20,"leader":0,"version":1,"leader_epoch":0,"isr":[0,1,2]}',
        "single quotes made double",
    ),
    SeedExample(
        "001",
        "broker registration",
        "/brokers/ids/1",
        b'{"jmx_port":1,"timestamp":"1452068227537","host":"h3","version":1,"port":9092}',
        "single quotes made double",
    ),
    SeedExample(
        "001",
        "controller",
        "/controller",
        b'{"version":1,"brokerid":0,"timestamp":"1452068227409"}',
        "single quotes made double",
    ),
    SeedExample(
        "001",
        "consumer registration",
        None,
        b'{"version":1,"subscription":{"replicatedtopic":1},"pattern":"white_list",'
        b'"timestamp":"1452134230082"}',
        "single quotes made double",
    ),
    SeedExample(
        "003",
        "topic",
        layout.topic_path(PINNED),
        b'{"version":1,"partitions":{"0":[1,2],"1":[2,1],"2":[1,2]}}',
        "the trailing comma after the last partition dropped",
    ),
    SeedExample(
        "003",
        "partition state",
        PINNED_STATE,
        b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,1]}',
    ),
    SeedExample(
        "003",
        "broker registration",
        "/brokers/ids/1",
        b'{"jmx_port":6061,"timestamp":"1403061899859","version":1,"host":"192.168.1.148",'
        b'"port":9092}',
        "the comma missing after the timestamp added",
    ),
    SeedExample(
        "003",
        "controller",
        "/controller",
        b'{"version":1,"brokerid":3,"timestamp":"1403061802981"}',
    ),
    SeedExample(
        "003",
        "consumer registration",
        None,
        b'{"version":1,"subscription":{"open_platform_opt_push_plus1":5},"pattern":"static",'
        b'"timestamp":"1411294187842"}',
    ),
)


@pytest.mark.parametrize("seed", SEED_EXAMPLES, ids=lambda s: s.id)
def test_seed_example_reads_as_kafka_writes_it(seed: SeedExample, steps: list[Step]) -> None:
    """coordkit's codec reads the seed's example; where Kafka 3.9 still writes that node,
    Kafka's bytes and coordkit's (shown side by side) decode, each field the seed names to the
    same value once normalised — or to values the table of known differences explains."""
    consumers_path = layout.consumer_registration_path("group", "consumer")
    layout.decode_znode(seed.path or consumers_path, seed.example)  # raises on a bad example
    (step,) = (s for s in steps if s.name == SEED_STEP)
    if seed.path is None:
        # The ZooKeeper consumer left Kafka in 2.0: Kafka 3.9 makes /consumers, and nothing in it.
        for every in steps:
            under = [p for p in every.kafka if p.startswith(f"{layout.CONSUMERS}/")]
            assert not under, f"Kafka 3.9 wrote {under} after '{every.name}'"
        return
    kafka_bytes, coordkit_bytes = step.kafka[seed.path].data, step.coordkit[seed.path].data
    assert kafka_bytes is not None
    assert coordkit_bytes is not None
    print(f"{seed.path}\n  seed {seed.seed}: {seed.example.decode()}")
    print(f"  Kafka 3.9:  {kafka_bytes.decode()}\n  coordkit:   {coordkit_bytes.decode()}")
    layout.decode_znode(seed.path, kafka_bytes)  # coordkit reads what Kafka writes
    layout.decode_znode(seed.path, coordkit_bytes)
    normaliser = Normaliser(racks=RACKS)
    kafka = normaliser.normalise(step.kafka)[seed.path]
    coordkit = normaliser.normalise(step.coordkit)[seed.path]
    documented = json.loads(seed.example)
    named = set(documented) if isinstance(documented, dict) else None
    differences = [
        d
        for d in compare({seed.path: kafka}, {seed.path: coordkit})
        if named is None or _top_field(d.what) in (None, *named)
    ]
    rows = table_rows()
    unexplained = [d.line() for d in differences if not any(r.matches(d) for r in rows)]
    assert not unexplained, (
        f"Kafka's and coordkit's {seed.node} differ on fields seed {seed.seed} names, and "
        f"{TABLE_DOCUMENT} does not say why: {unexplained}"
    )


def _top_field(what: str) -> str | None:
    match = re.match(r"^field `([^`.]+)", what)
    return match[1] if match else None
