"""The layout differential's tree tools (harness.zookeeper_trees) without a server: what the
normaliser replaces and what it keeps, every kind of difference, a table of known differences."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.zookeeper_trees import (
    CLUSTER_ID,
    CONTROLLER_BROKER,
    HOST,
    PORT,
    TIMESTAMP,
    Difference,
    Node,
    Normaliser,
    compare,
    dump_tree,
    known_differences,
)


def node(value: Any = None, *, ephemeral: bool = False) -> Node:
    data = value if value is None or isinstance(value, bytes) else json.dumps(value).encode()
    return Node(ephemeral=ephemeral, data=data)


def broker(port: int, timestamp: str, rack: str = "a") -> Node:
    return node(
        {
            "endpoints": [f"PLAINTEXT://127.0.0.1:{port}"],
            "host": "127.0.0.1",
            "port": port,
            "rack": rack,
            "timestamp": timestamp,
            "version": 5,
        },
        ephemeral=True,
    )


def whats(differences: list[Difference]) -> list[tuple[str, str]]:
    return [(d.path, d.what) for d in differences]


def test_what_two_clusters_must_differ_in_is_replaced_and_nothing_else() -> None:
    tree = {
        "/brokers/ids/1": broker(41234, "1700000000001"),
        "/controller": node({"version": 2, "brokerid": 1, "timestamp": "1700000000002"}),
        "/cluster/id": node({"version": "1", "id": "r71-x1jYSYe-VgOlJCEqCA"}),
        "/controller_epoch": node(b"1"),
    }
    normalised = Normaliser().normalise(tree)
    assert normalised["/brokers/ids/1"].value == {
        "endpoints": [f"PLAINTEXT://{HOST}:{PORT}"],
        "host": HOST,
        "port": PORT,
        "rack": "a",
        "timestamp": TIMESTAMP,
        "version": 5,
    }
    assert normalised["/controller"].value == {
        "version": 2,
        "brokerid": CONTROLLER_BROKER,
        "timestamp": TIMESTAMP,
    }
    assert normalised["/cluster/id"].value == {"version": "1", "id": CLUSTER_ID}
    assert normalised["/controller_epoch"].value == 1


def test_a_controller_that_is_not_registered_stays_as_it_is() -> None:
    tree = {"/controller": node({"version": 1, "brokerid": 7, "timestamp": "1"})}
    assert Normaliser().normalise(tree)["/controller"].value["brokerid"] == 7


def test_topic_ids_get_their_topics_name_so_equal_ids_stay_equal() -> None:
    shared = "AAAAAAAAAAAAAAAAAAAAAA"
    tree = {
        "/brokers/topics/a": node({"version": 3, "partitions": {}, "topic_id": shared}),
        "/brokers/topics/b": node({"version": 3, "partitions": {}, "topic_id": shared}),
        "/brokers/topics/c": node({"version": 3, "partitions": {}, "topic_id": "other"}),
    }
    ids = {p: n.value["topic_id"] for p, n in Normaliser().normalise(tree).items()}
    assert ids == {
        "/brokers/topics/a": "<topic-id:a>",
        "/brokers/topics/b": "<topic-id:a>",
        "/brokers/topics/c": "<topic-id:c>",
    }


def test_placed_topics_compare_by_shape_and_leaders_by_position() -> None:
    def cluster(replicas: list[int], leader: int) -> dict[str, Node]:
        return {
            "/brokers/topics/t": node({"version": 3, "partitions": {"0": replicas}}),
            "/brokers/topics/t/partitions/0/state": node({"leader": leader, "isr": replicas}),
        }

    normaliser = Normaliser(racks={1: "a", 2: "b", 3: "a"}, placed_topics=frozenset({"t"}))
    one = normaliser.normalise(cluster([1, 2], 1))
    other = normaliser.normalise(cluster([2, 3], 2))
    assert compare(one, other) == []
    assert one["/brokers/topics/t"].value["partitions"] == {
        "0": {"replicas": 2, "racks": ["a", "b"]}
    }
    assert one["/brokers/topics/t/partitions/0/state"].value == {
        "leader": "<replica 0>",
        "isr": ["<replica 0>", "<replica 1>"],
    }
    # A leader other than the preferred replica, or a rack spread lost, still shows.
    assert whats(compare(one, normaliser.normalise(cluster([2, 3], 3)))) == [
        ("/brokers/topics/t/partitions/0/state", "field `leader` differs")
    ]
    assert whats(compare(one, normaliser.normalise(cluster([1, 3], 1)))) == [
        ("/brokers/topics/t", "field `partitions.0.racks` differs")
    ]


def test_every_kind_of_difference_is_named() -> None:
    kafka = Normaliser().normalise(
        {
            "/a": node(None),
            "/b": node({"version": 5, "features": {}}),
            "/c": node(b"x", ephemeral=True),
            "/d": node({"partitions": {"0": [1]}}),
            "/only": node(None),
        }
    )
    coordkit = Normaliser().normalise(
        {
            "/a": node(b""),
            "/b": node({"version": 1, "rack": "a"}),
            "/c": node(b"y"),
            "/d": node({"partitions": {"0": [1], "1": [2]}}),
            "/mine": node(None),
        }
    )
    assert whats(compare(kafka, coordkit)) == [
        ("/a", "null data in Kafka, empty in coordkit"),
        ("/b", "field `features` only in Kafka"),
        ("/b", "field `rack` only in coordkit"),
        ("/b", "field `version` differs"),
        ("/c", "ephemeral in Kafka, persistent in coordkit"),
        ("/c", "value differs"),
        ("/d", "field `partitions.1` only in coordkit"),
        ("/mine", "only in coordkit"),
        ("/only", "only in Kafka"),
    ]
    version = next(d for d in compare(kafka, coordkit) if d.what == "field `version` differs")
    assert version.line() == "/b: field `version` differs (Kafka 5, coordkit 1)"


def test_a_json_value_and_the_same_text_are_equal_but_types_are_not_blurred() -> None:
    one = Normaliser().normalise({"/n": node({"flag": 1})})
    other = Normaliser().normalise({"/n": node({"flag": True})})
    assert whats(compare(one, other)) == [("/n", "field `flag` differs")]


class FakeKazoo:
    """What dump_tree asks of kazoo: get (data, stat) and children."""

    class Stat:
        def __init__(self, owner: int):
            self.ephemeralOwner = owner

    def __init__(self, nodes: dict[str, tuple[bytes | None, int]]):
        self.nodes = nodes

    def get(self, path: str) -> tuple[bytes | None, FakeKazoo.Stat]:
        data, owner = self.nodes[path]
        return data, self.Stat(owner)

    def get_children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        below = (p[len(prefix) :] for p in self.nodes if p != path and p.startswith(prefix))
        return [name for name in below if "/" not in name]


def test_a_dump_is_relative_to_its_chroot_and_leaves_zookeeper_out() -> None:
    client = FakeKazoo(
        {
            "/": (b"", 0),
            "/zookeeper": (b"", 0),
            "/zookeeper/quota": (b"", 0),
            "/k": (None, 0),
            "/k/brokers": (None, 0),
            "/k/brokers/ids": (None, 0),
            "/k/brokers/ids/1": (b"{}", 0x1234),
            "/other": (b"", 0),
        }
    )
    assert dump_tree(client, "/k") == {
        "/": Node(False, None),
        "/brokers": Node(False, None),
        "/brokers/ids": Node(False, None),
        "/brokers/ids/1": Node(True, b"{}"),
    }
    assert "/zookeeper" not in dump_tree(client, "/")


def test_a_table_of_known_differences_matches_by_node_and_kind(tmp_path: Path) -> None:
    document = tmp_path / "page.md"
    document.write_text(
        "# Project\n\n### Known differences\n\nSome words.\n\n"
        "| node | difference | why |\n| --- | --- | --- |\n"
        "| `/brokers/ids/*` | field `version` differs | an older version |\n"
        "| `/a`, `/b/*/c` | only in Kafka | not made |\n"
        "\nAfter the table.\n\n| x | y | z |\n| --- | --- | --- |\n| `/z` | other | table |\n"
    )
    rows = known_differences(document, "Known differences")
    assert [(r.nodes, r.what, r.why) for r in rows] == [
        (("/brokers/ids/*",), "field `version` differs", "an older version"),
        (("/a", "/b/*/c"), "only in Kafka", "not made"),
    ]
    version, missing = rows
    assert version.matches(Difference("/brokers/ids/12", "field `version` differs"))
    assert not version.matches(Difference("/brokers/ids/12/x", "field `version` differs"))
    assert not version.matches(Difference("/brokers/ids/12", "field `rack` differs"))
    assert missing.matches(Difference("/b/x/c", "only in Kafka"))
    assert not missing.matches(Difference("/b/x/y/c", "only in Kafka"))
    assert not missing.matches(Difference("/a", "only in coordkit"))
