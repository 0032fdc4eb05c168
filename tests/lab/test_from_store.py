"""``coordkit lab run --from-store URL``: a cluster in Kafka's layout read into a study — trees the
engine wrote (brokers with racks, topics, a legacy consumer group) on memory, ZooKeeper and Redis,
and a tree written by hand in Kafka's layout under a ZooKeeper chroot (a Redis prefix, a named
memory store) — always leaving the store exactly as it was: every node's data, version and child
version compared before and after, and the raw server (ZooKeeper's whole tree, Redis's keys) where
nothing else is running.

Private ZooKeeper and redis-server processes come from ``tests/harness`` (a missing binary fails
the run with the install command; nothing is skipped).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.legacy import LegacyConsumer, LegacyConsumerConfig
from coordkit.kafka import layout
from coordkit.kafka.model import BrokerInfo
from coordkit.plugins import PluginManager, get_plugin_manager, open_store
from coordkit.store import MetadataStore
from coordkit_lab.runner import ERROR_METRIC, run_scenario
from coordkit_lab.study import StudyError, load_study, open_study, parse_study, snapshot_store
from harness.kafka_tree import populate, run
from harness.redis_server import RedisServer
from harness.waiting import wait_for
from harness.zookeeper import StandaloneZooKeeper

BACKENDS = ("memory", "zookeeper", "redis")
RACKS = {0: "rack-a", 1: "rack-b", 2: "rack-c"}

Dump = dict[str, tuple[bytes, int, int, int]]


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[StandaloneZooKeeper]:
    server = StandaloneZooKeeper().start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module")
def manager() -> PluginManager:
    return get_plugin_manager()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def new_url(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """A URL of a fresh, empty namespace on the backend named: a named memory store, a ZooKeeper
    chroot two levels deep, a Redis key prefix (servers start on first use)."""

    def make(backend: str) -> str:
        if backend == "memory":
            return f"memory://{unique('study')}"
        if backend == "zookeeper":
            server: StandaloneZooKeeper = request.getfixturevalue("zookeeper")
            return f"zookeeper://{server.hosts}/{unique('lab')}/kafka"
        redis: RedisServer = request.getfixturevalue("redis_server")
        return redis.url(prefix=unique("lab"))

    return make


def dump(url: str) -> Dump:
    """Every node under the store's root: data, version, child version, last zxid that changed it."""
    out: Dump = {}
    with open_store(url, read_only=True) as store:
        stack = ["/"]
        while stack:
            path = stack.pop()
            data, stat = store.get(path)
            out[path] = (data, stat.version, stat.cversion, stat.mzxid)
            stack.extend(f"{path.rstrip('/')}/{name}" for name in store.children(path))
    return out


def zookeeper_tree(server: StandaloneZooKeeper) -> dict[str, tuple[bytes, Any]]:
    """The whole server's tree with full stats (a chroot created by mistake would show)."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=server.hosts)
    client.start(timeout=30)
    try:
        out: dict[str, tuple[bytes, Any]] = {}
        stack = ["/"]
        while stack:
            path = stack.pop()
            out[path] = client.get(path)
            stack.extend(f"{path.rstrip('/')}/{name}" for name in client.get_children(path))
        return out
    finally:
        client.stop()
        client.close()


def redis_keys(server: RedisServer) -> dict[bytes, Any]:
    with server.client() as client:
        return {key: (client.dump(key), client.pttl(key)) for key in client.keys("*")}


def raw_state(backend: str, request: pytest.FixtureRequest) -> Any:
    if backend == "zookeeper":
        return zookeeper_tree(request.getfixturevalue("zookeeper"))
    if backend == "redis":
        return redis_keys(request.getfixturevalue("redis_server"))
    return None


# -- a tree the engine wrote ------------------------------------------------------------------------


class EngineTree:
    """Three racked brokers, two topics and a legacy consumer group of two consumers (one with two
    streams), all live; replication off, so nothing writes once the group has settled."""

    def __init__(self, url: str):
        self.url = url
        self.cluster = Cluster(url, 3, racks=RACKS, config=EngineConfig(replication=False), seed=7)
        self.consumers: list[LegacyConsumer] = []

    def start(self) -> EngineTree:
        self.cluster.start()
        self.cluster.create_topic("orders", 6, 2)
        self.cluster.create_topic("audit", 3, 3)
        self.cluster.wait_settled()
        for name, subscription in (("c0", {"orders": 2}), ("c1", {"orders": 1, "audit": 1})):
            config = LegacyConsumerConfig(
                consumer_id=name, auto_commit_enable=False, rebalance_backoff_ms=100
            )
            consumer = LegacyConsumer(
                self.cluster.open_session(), "billing", subscription, config=config
            )
            self.consumers.append(consumer.start())
        wait_for(
            lambda: (
                all(c.idle for c in self.consumers)
                and sum(len(c.owned()) for c in self.consumers) == 9
            ),
            what="the legacy group to own every partition",
        )
        return self

    def replica_racks(self, topic: str) -> list[list[str]]:
        view = self.cluster.view()
        parts = sorted((p for p in view.partitions if p.topic == topic), key=lambda p: p.partition)
        return [list(dict.fromkeys(RACKS[b] for b in p.replicas)) for p in parts]

    def close(self) -> None:
        for consumer in self.consumers:
            consumer.close()
        self.cluster.close()


@pytest.fixture
def engine_tree(new_url: Callable[[str], str]) -> Iterator[Callable[[str], EngineTree]]:
    trees: list[EngineTree] = []

    def make(backend: str) -> EngineTree:
        tree = EngineTree(new_url(backend))
        trees.append(tree)
        return tree.start()

    yield make
    for tree in trees:
        tree.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_engine_tree_becomes_a_study_and_stays_as_it_was(
    backend: str, engine_tree: Callable[[str], EngineTree], manager: PluginManager
) -> None:
    tree = engine_tree(backend)
    before = dump(tree.url)
    snapshot = snapshot_store(tree.url)
    assert dump(tree.url) == before

    document = snapshot.document
    assert set(document["topics"]) == {"orders", "audit"}
    assert document["topics"]["orders"] == {
        "partitions": 6,
        "replica_racks": tree.replica_racks("orders"),
    }
    assert all(len(racks) == 2 for racks in document["topics"]["orders"]["replica_racks"])
    assert document["topics"]["audit"]["replica_racks"] == tree.replica_racks("audit")
    assert document["groups"] == {
        "billing": {
            "members": {
                "billing_c0-0": {"topics": ["orders"]},
                "billing_c0-1": {"topics": ["orders"]},
                "billing_c1-0": {"topics": ["audit", "orders"]},
            }
        }
    }
    assert snapshot.notes == ()

    study = parse_study(document, manager, where="store")
    assert study.name == "cluster"
    assert [g.name for g in study.groups] == ["billing"]
    specs = study.specs(manager)
    assert len(specs) == len(manager.assignors.names())
    rows = run_scenario(next(s for s in specs if s.strategy == "range"), manager)
    assert rows
    assert all(row[12] != ERROR_METRIC for row in rows)
    assert {row[11] for row in rows} == {9}  # orders and audit
    assert {row[10] for row in rows} == {3}  # three consumer threads


# -- a tree written by hand in Kafka's layout ---------------------------------------------------------


def write_by_hand(store: MetadataStore) -> None:
    """Kafka's JSON as Kafka writes it, keys in any order, on top of the shared small tree (broker
    0 without a rack, topic ``t`` with one partition, an offset of group ``g``)."""
    populate(store)
    for broker, rack in ((1, "r1"), (2, "r2")):
        info = BrokerInfo(f"h{broker}", 9092, "1700000000000", rack=rack)
        store.create(layout.broker_path(broker), layout.BROKER.encode(info))
    store.create(
        "/brokers/topics/t2", b'{"version":1,"partitions":{"2":[0,1],"0":[1,2],"1":[2,0]}}'
    )
    registrations = {
        "/consumers/g/ids/g_c1": '{"version":1,"subscription":{"t2":2,"t":1},"pattern":"static",'
        '"timestamp":"1700000000000"}',
        "/consumers/g/ids/g_c2": '{"pattern":"static","subscription":{"t2":1,"gone":1},'
        '"timestamp":"1700000000001","version":1}',
        "/consumers/w/ids/w_c1": '{"version":1,"subscription":{"t.*":1},"pattern":"white_list",'
        '"timestamp":"1700000000000"}',
    }
    for path, data in registrations.items():
        store.create(path, data.encode(), make_parents=True)
    store.ensure_path("/consumers/empty/ids")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tree_written_by_hand_under_a_chroot_becomes_a_study(
    backend: str,
    new_url: Callable[[str], str],
    request: pytest.FixtureRequest,
    manager: PluginManager,
) -> None:
    url = new_url(backend)
    with open_store(url) as writer:
        write_by_hand(writer)
    before, raw_before = dump(url), raw_state(backend, request)

    snapshot = snapshot_store(url)

    assert dump(url) == before
    assert raw_state(backend, request) == raw_before
    assert snapshot.document["topics"] == {
        "t": {"partitions": 1, "replica_racks": [[]]},  # broker 0 has no rack
        "t2": {"partitions": 3, "replica_racks": [["r1", "r2"], ["r2"], ["r1"]]},
    }
    assert snapshot.document["groups"] == {
        "g": {
            "members": {
                "g_c1-0": {"topics": ["t", "t2"]},
                "g_c1-1": {"topics": ["t2"]},
                "g_c2-0": {"topics": ["t2"]},
            }
        }
    }
    assert snapshot.notes == (
        "group 'g': subscriptions to gone left out (no such topic under /brokers/topics)",
        "group 'w' left out: its consumers subscribe by pattern (white_list); give its members "
        "in a study file",
    )
    study = parse_study(snapshot.document, manager, where=url)
    specs = study.specs(manager)
    assert all(row[12] != ERROR_METRIC for spec in specs for row in run_scenario(spec, manager))


def test_a_mistyped_chroot_is_refused_and_nothing_is_created(
    zookeeper: StandaloneZooKeeper,
) -> None:
    chroot = f"/{unique('mistyped')}/kafka"
    before = zookeeper_tree(zookeeper)
    with pytest.raises(StudyError) as caught:
        snapshot_store(f"zookeeper://{zookeeper.hosts}{chroot}")
    message = str(caught.value)
    assert message.startswith(f"--from-store zookeeper://{zookeeper.hosts}{chroot}: ")
    assert f"no such chroot {chroot} (nothing was created)" in message
    assert zookeeper_tree(zookeeper) == before


def test_credentials_never_show_in_a_refusal(redis_server: RedisServer) -> None:
    url = redis_server.url(prefix=unique("lab"), password="s3cret-pass")
    with pytest.raises(StudyError) as caught:
        snapshot_store(url)
    assert "s3cret-pass" not in str(caught.value)
    assert "--from-store redis://" in str(caught.value)


@pytest.mark.parametrize(
    ("node", "data", "expected"),
    [
        ("/brokers/topics/bad", b"{not json", "/brokers/topics/bad: not valid JSON"),
        (
            "/brokers/topics/gappy",
            b'{"version":1,"partitions":{"0":[0],"2":[0]}}',
            "/brokers/topics/gappy: field 'partitions': partitions must be numbered 0..1",
        ),
        (
            "/consumers/g/ids/g_c9",
            b'{"version":1,"subscription":{"t":0},"pattern":"static","timestamp":"1"}',
            "/consumers/g/ids/g_c9: field 'subscription'",
        ),
        ("/brokers/ids/7", b'{"port":1}', "/brokers/ids/7: field 'host': missing"),
    ],
)
def test_a_node_outside_kafkas_schema_is_refused_with_its_path(
    new_url: Callable[[str], str], node: str, data: bytes, expected: str
) -> None:
    url = new_url("memory")
    with open_store(url) as writer:
        populate(writer)
        writer.create(node, data, make_parents=True)
    before = dump(url)
    with pytest.raises(StudyError) as caught:
        snapshot_store(url)
    assert str(caught.value).startswith(f"--from-store {url}: ")
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)
    assert dump(url) == before


# -- a file beside the store ---------------------------------------------------------------------------

EXTRA = """
name = "billing"
strategies = ["range", "sticky"]

[topics.t2]
loads = [1, 2, 3]

[[groups.g.events]]
kind = "join"
member = "late"
topics = ["t2"]
rack = "r1"
"""


def test_a_file_beside_the_store_adds_loads_events_and_settings(
    tmp_path: Path, new_url: Callable[[str], str], manager: PluginManager
) -> None:
    url = new_url("memory")
    with open_store(url) as writer:
        write_by_hand(writer)
    extra = tmp_path / "extra.toml"
    extra.write_text(EXTRA)
    study, notes = open_study(manager, workload_file=extra, from_store=url)
    assert len(notes) == 2
    assert study.name == "billing"
    assert study.strategies == ("range", "sticky")
    assert study.description == f"snapshot of {url}"
    assert study.topics["t2"].loads == (1.0, 2.0, 3.0)
    assert study.topics["t2"].replica_racks == (("r1", "r2"), ("r2",), ("r1",))  # the store's
    (group,) = study.groups
    assert [m.name for m in group.members] == ["g_c1-0", "g_c1-1", "g_c2-0"]
    assert [e.describe() for e in group.events] == ["late joins (1 topics)"]

    extra.write_text(EXTRA + '\n[members.solo]\ntopics = ["t"]\n')
    with pytest.raises(StudyError, match="groups: give either members"):
        open_study(manager, workload_file=extra, from_store=url)
    extra.write_text('[members.solo]\ntopics = ["t", "t2"]\n')
    alone, _ = open_study(manager, workload_file=extra, from_store=url)
    assert [(g.name, [m.name for m in g.members]) for g in alone.groups] == [("cluster", ["solo"])]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("[topics.nope]\nloads = [1]\n", "topics.nope: not a topic in the store"),
        (
            "[topics.t2]\npartitions = 4\n",
            "topics.t2.partitions: 4 partitions, but the store's topic has 3",
        ),
        ("[topics]\nt2 = 2\n", "topics.t2: 2 partitions, but the store's topic has 3"),
        ("[topics.t2]\nloads = [1, 2]\n", "topics.t2.loads: lists 2 partitions, the topic has 3"),
        (
            '[[events]]\nkind = "leave"\nmember = "nobody"\n',
            "events[0].member: no member 'nobody' in group 'g' at this point",
        ),
    ],
)
def test_a_file_beside_the_store_is_checked_field_by_field(
    tmp_path: Path,
    new_url: Callable[[str], str],
    manager: PluginManager,
    content: str,
    expected: str,
) -> None:
    url = new_url("memory")
    with open_store(url) as writer:
        write_by_hand(writer)
    extra = tmp_path / "extra.toml"
    extra.write_text(content)
    with pytest.raises(StudyError) as caught:
        load_study(extra, manager, base=snapshot_store(url).document)
    assert str(caught.value).startswith(f"{extra}: ")
    assert expected in str(caught.value)


def test_a_store_without_groups_needs_members_from_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, new_url: Callable[[str], str]
) -> None:
    url = new_url("memory")
    with open_store(url) as writer:
        populate(writer)
    before = dump(url)
    out = tmp_path / "report"
    code, _, err = run(capsys, "lab", "run", "--from-store", url, "--out", str(out))
    assert code == 2
    assert err.strip().splitlines() == [
        f"error: --from-store {url}: no legacy consumer group is registered (no "
        "/consumers/G/ids/C node); give the members in a study file beside it: --workload-file FILE"
    ]
    assert not out.exists()
    assert dump(url) == before


# -- the whole command on Spark ----------------------------------------------------------------------


@pytest.mark.lab_process
def test_the_command_studies_a_zookeeper_cluster_without_writing_to_it(
    tmp_path: Path, engine_tree: Callable[[str], EngineTree], zookeeper: StandaloneZooKeeper
) -> None:
    tree = engine_tree("zookeeper")
    before = dump(tree.url)
    out = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordkit_lab",
            "run",
            "--from-store",
            tree.url,
            "-s",
            "range,roundrobin",
            "--master",
            "local[1]",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shown = " ".join(done.stdout.split())  # as printed, lines wrapped to the console
    assert (
        "study cluster (1 group, 9 partitions), 2 scenarios (2 strategies × 1 replicate)" in shown
    )
    assert dump(tree.url) == before
    effective = json.loads((out / "study.json").read_text())
    assert effective["description"] == f"snapshot of {tree.url}"
    assert effective["strategies"] == ["range", "roundrobin"]
    assert list(effective["groups"]["billing"]["members"]) == [
        "billing_c0-0",
        "billing_c0-1",
        "billing_c1-0",
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["study"] == "cluster"
    assert summary["run"]["workloads"] == ["study"]
    assert summary["run"]["strategies"] == ["range", "roundrobin"]
