"""ZooKeeper subtrees dumped, normalised and compared node by node: how the layout differential
(tests/apache_kafka/test_layout_differential.py) holds the tree coordkit writes to the one Kafka
writes, each under its own chroot of one ZooKeeper.

It lives in the tests' harness, not in ``coordkit.testing``: it reads through kazoo (which the
core's layers keep out of ``coordkit``), and it needs what a store's interface hides on purpose —
ZooKeeper's null data apart from an empty value — and no third party's plugin is held to
Kafka's tree: that is coordkit's own claim.

* :func:`dump_tree` reads every node below a chroot: ``{path: Node(ephemeral, data)}``, paths
  relative to the chroot, ZooKeeper's own ``/zookeeper`` left out.
* :class:`Normaliser` decodes JSON values and replaces only what must differ between two
  clusters: timestamps, host names and ports, randomly generated ids (each distinct id by a
  placeholder naming what holds it, so that equal ids stay equal), the controller's broker id
  (whoever wins the first election), and the replica lists of topics placed at random on both
  sides (by their shapes). ZooKeeper's session ids, zxids and versions are never dumped.
* :func:`compare` lists every difference: a node on one side only, ephemeral against
  persistent, each JSON field (nested objects field by field) and any other value byte for byte.
* :func:`known_differences` reads a Markdown table of the differences a project accepts, each
  row a :class:`KnownDifference` that matches differences by node and kind.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

#: What stands for a value that must differ between two clusters.
TIMESTAMP = "<timestamp>"
HOST = "<host>"
PORT = "<port>"
CLUSTER_ID = "<cluster-id>"
CONTROLLER_BROKER = "<a registered broker>"

_ENDPOINT = re.compile(r"^(?P<listener>[A-Za-z0-9_]+)://(?P<host>.*):(?P<port>[0-9]+)$")
_BROKER = re.compile(r"^/brokers/ids/[0-9]+$")
_TOPIC = re.compile(r"^/brokers/topics/(?P<topic>[^/]+)$")
_STATE = re.compile(r"^/brokers/topics/(?P<topic>[^/]+)/partitions/(?P<partition>[0-9]+)/state$")


@attrs.frozen
class Node:
    """One znode as dumped: whether a session owns it, and its data exactly as stored (``None``
    is ZooKeeper's null data, which ``zkCli get`` shows as ``null``; ``b""`` is an empty value)."""

    ephemeral: bool
    data: bytes | None


@attrs.frozen
class Normalised:
    """One znode ready to compare: its value decoded from JSON (placeholders in), or its bytes
    (``None`` for null data) when they are not JSON."""

    ephemeral: bool
    value: Any
    is_json: bool


def dump_tree(client: Any, chroot: str) -> dict[str, Node]:
    """Every node below ``chroot`` (a kazoo client's path), keyed by its path relative to
    ``chroot`` (``/`` for the chroot itself). ``/zookeeper`` is ZooKeeper's own and left out.

    The reads are not one snapshot: a node deleted while the tree is read is left out, and a
    caller that needs a settled tree reads it twice (see the differential's ``settled_tree``).
    """
    from kazoo.exceptions import NoNodeError

    root = chroot.rstrip("/")
    nodes: dict[str, Node] = {}
    pending = [root or "/"]
    while pending:
        path = pending.pop()
        relative = path[len(root) :] or "/"
        if relative == "/zookeeper" or relative.startswith("/zookeeper/"):
            continue
        try:
            data, stat = client.get(path)
            children = client.get_children(path)
        except NoNodeError:
            continue
        nodes[relative] = Node(ephemeral=stat.ephemeralOwner != 0, data=data)
        pending.extend(f"{path.rstrip('/')}/{child}" for child in children)
    return dict(sorted(nodes.items()))


class Placeholders:
    """A stable placeholder per distinct random value: the first value seen for a label gets
    ``<kind:label>``, another value for the same label ``<kind:label#2>``; the same value always
    gets the same placeholder, wherever it appears."""

    def __init__(self) -> None:
        self._given: dict[tuple[str, str], str] = {}
        self._per_label: dict[tuple[str, str], int] = {}

    def name(self, kind: str, value: str, label: str) -> str:
        key = (kind, value)
        if key not in self._given:
            count = self._per_label.get((kind, label), 0) + 1
            self._per_label[(kind, label)] = count
            suffix = "" if count == 1 else f"#{count}"
            self._given[key] = f"<{kind}:{label}{suffix}>"
        return self._given[key]


@attrs.frozen
class Normaliser:
    """Decodes and normalises one dump.

    :param racks: broker id → rack, the same on both sides: the shapes of placed topics are
        told in racks.
    :param placed_topics: topics whose replicas both sides place at random (Kafka's rack-aware
        placement from a random start index): their replica lists are compared by shape — each
        partition's replica count and the racks it spans — and their partition states name
        brokers by position in the partition's replica list (``<replica 0>`` is the preferred
        replica), so that leadership is still checked against the assignment.
    """

    racks: Mapping[int, str] = attrs.field(factory=dict)
    placed_topics: frozenset[str] = frozenset()

    def normalise(self, tree: Mapping[str, Node]) -> dict[str, Normalised]:
        placeholders = Placeholders()
        decoded = {path: _decode(node.data) for path, node in tree.items()}
        registered = {
            int(path.rsplit("/", 1)[1]) for path in tree if _BROKER.match(path) is not None
        }
        # Topic nodes first, so that a topic id gets its topic's name wherever else it appears.
        replicas: dict[tuple[str, int], list[int]] = {}
        for path, (value, _) in decoded.items():
            match = _TOPIC.match(path)
            if match is None or not isinstance(value, dict):
                continue
            topic = match["topic"]
            if isinstance(value.get("topic_id"), str):
                placeholders.name("topic-id", value["topic_id"], topic)
            for partition, listed in _partitions(value).items():
                replicas[(topic, partition)] = listed
        out = {}
        for path, node in tree.items():
            value, is_json = decoded[path]
            if is_json:
                value = self._normalise_value(path, value, placeholders, registered, replicas)
            out[path] = Normalised(node.ephemeral, value, is_json)
        return out

    def _normalise_value(
        self,
        path: str,
        value: Any,
        placeholders: Placeholders,
        registered: set[int],
        replicas: Mapping[tuple[str, int], list[int]],
    ) -> Any:
        if not isinstance(value, dict):
            return value
        value = dict(value)
        if _BROKER.match(path):
            # When and where the broker runs: its start time, its host and ports.
            _replace(value, "timestamp", TIMESTAMP)
            _replace(value, "host", HOST)
            _replace(value, "port", PORT)
            if isinstance(value.get("endpoints"), list):
                value["endpoints"] = [_endpoint(e) for e in value["endpoints"]]
        elif path == "/controller":
            _replace(value, "timestamp", TIMESTAMP)
            # Who wins the first election is a race on both sides; a broker that is not
            # registered is left as it is, to show.
            if value.get("brokerid") in registered:
                value["brokerid"] = CONTROLLER_BROKER
        elif path == "/cluster/id":
            if isinstance(value.get("id"), str):
                value["id"] = CLUSTER_ID
        elif (match := _TOPIC.match(path)) is not None:
            topic = match["topic"]
            if isinstance(value.get("topic_id"), str):
                value["topic_id"] = placeholders.name("topic-id", value["topic_id"], topic)
            if topic in self.placed_topics and isinstance(value.get("partitions"), dict):
                value["partitions"] = {
                    key: self._shape(listed) for key, listed in value["partitions"].items()
                }
        elif (match := _STATE.match(path)) is not None and match["topic"] in self.placed_topics:
            assigned = replicas.get((match["topic"], int(match["partition"])), [])
            if "leader" in value:
                value["leader"] = _position(value["leader"], assigned)
            if isinstance(value.get("isr"), list):
                value["isr"] = [_position(b, assigned) for b in value["isr"]]
        return value

    def _shape(self, listed: Any) -> Any:
        if not isinstance(listed, list):
            return listed
        racks = sorted(self.racks.get(b, "<no rack>") if isinstance(b, int) else b for b in listed)
        return {"replicas": len(listed), "racks": racks}


def _decode(data: bytes | None) -> tuple[Any, bool]:
    """``(value, True)`` for JSON; ``(data, False)`` for anything else (null data, empty, text)."""
    if not data:
        return data, False
    try:
        return json.loads(data), True
    except (ValueError, UnicodeDecodeError):
        return data, False


def _replace(value: dict[str, Any], field: str, placeholder: str) -> None:
    if field in value:
        value[field] = placeholder


def _endpoint(endpoint: Any) -> Any:
    match = _ENDPOINT.match(endpoint) if isinstance(endpoint, str) else None
    return endpoint if match is None else f"{match['listener']}://{HOST}:{PORT}"


def _partitions(topic_value: Mapping[str, Any]) -> dict[int, list[int]]:
    partitions = topic_value.get("partitions")
    if not isinstance(partitions, dict):
        return {}
    return {
        int(key): listed
        for key, listed in partitions.items()
        if key.isdigit() and isinstance(listed, list)
    }


def _position(broker: Any, assigned: list[int]) -> Any:
    return f"<replica {assigned.index(broker)}>" if broker in assigned else broker


# -- comparing -------------------------------------------------------------------------------------


@attrs.frozen
class Difference:
    """One way two normalised trees differ.

    :param path: the node's path (relative to the chroots).
    :param what: the kind of difference in words, the same for every node it applies to (what
        a table of known differences names): ``only in Kafka``, ``ephemeral in Kafka, persistent
        in coordkit``, ``field `version` differs``, ``field `features` only in Kafka`` (nested
        fields dotted: ``field `partitions.3` only in Kafka``), ``null data in Kafka, empty in
        coordkit``, ``value differs``.
    :param detail: both sides' values.
    """

    path: str
    what: str
    detail: str = ""

    def line(self) -> str:
        return f"{self.path}: {self.what}" + (f" ({self.detail})" if self.detail else "")


def compare(
    left: Mapping[str, Normalised],
    right: Mapping[str, Normalised],
    left_name: str = "Kafka",
    right_name: str = "coordkit",
) -> list[Difference]:
    """Every difference between two normalised trees, by path."""
    differences: list[Difference] = []
    for path in sorted(left.keys() | right.keys()):
        if path not in right:
            differences.append(Difference(path, f"only in {left_name}", _show_node(left[path])))
            continue
        if path not in left:
            differences.append(Difference(path, f"only in {right_name}", _show_node(right[path])))
            continue
        ours, theirs = left[path], right[path]
        if ours.ephemeral != theirs.ephemeral:
            kinds = ("ephemeral", "persistent") if ours.ephemeral else ("persistent", "ephemeral")
            differences.append(
                Difference(path, f"{kinds[0]} in {left_name}, {kinds[1]} in {right_name}")
            )
        if ours.is_json and theirs.is_json:
            differences.extend(
                _compare_json(path, "", ours.value, theirs.value, left_name, right_name)
            )
        elif _null_and_empty(ours, theirs) or _null_and_empty(theirs, ours):
            # ZooKeeper tells null data from an empty value (zkCli shows `null` and nothing).
            kinds = ("null", "empty") if ours.value is None else ("empty", "null")
            what = f"{kinds[0]} data in {left_name}, {kinds[1]} in {right_name}"
            differences.append(Difference(path, what))
        elif ours.is_json != theirs.is_json or ours.value != theirs.value:
            detail = f"{left_name} {_show(ours)}, {right_name} {_show(theirs)}"
            differences.append(Difference(path, "value differs", detail))
    return differences


def _compare_json(
    path: str, prefix: str, ours: Any, theirs: Any, left_name: str, right_name: str
) -> Iterable[Difference]:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(ours.keys() | theirs.keys()):
            field = f"{prefix}{key}"
            if key not in theirs:
                yield Difference(
                    path, f"field `{field}` only in {left_name}", _json_text(ours[key])
                )
            elif key not in ours:
                yield Difference(
                    path, f"field `{field}` only in {right_name}", _json_text(theirs[key])
                )
            else:
                yield from _compare_json(
                    path, f"{field}.", ours[key], theirs[key], left_name, right_name
                )
    elif ours != theirs or type(ours) is not type(theirs):
        what = f"field `{prefix[:-1]}` differs" if prefix else "value differs"
        detail = f"{left_name} {_json_text(ours)}, {right_name} {_json_text(theirs)}"
        yield Difference(path, what, detail)


def _null_and_empty(one: Normalised, other: Normalised) -> bool:
    return not one.is_json and not other.is_json and one.value is None and other.value == b""


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _show(node: Normalised) -> str:
    if node.is_json:
        return _json_text(node.value)
    if node.value is None:
        return "null"
    return repr(node.value)


def _show_node(node: Normalised) -> str:
    return f"{'ephemeral' if node.ephemeral else 'persistent'}, {_show(node)}"


# -- a table of known differences -----------------------------------------------------------------


@attrs.frozen
class KnownDifference:
    """One row of a table of known differences: the nodes it applies to (globs in backticks,
    separated by commas; ``*`` is one path segment) and the difference, in
    :class:`Difference`'s words."""

    nodes: tuple[str, ...]
    what: str
    why: str

    def matches(self, difference: Difference) -> bool:
        return self.what == difference.what and any(
            re.fullmatch(re.escape(glob).replace(r"\*", "[^/]+"), difference.path)
            for glob in self.nodes
        )

    def __str__(self) -> str:
        return f"{', '.join(self.nodes)} | {self.what}"


def known_differences(document: Path, title: str) -> list[KnownDifference]:
    """The rows of the first table under the Markdown heading ``title`` in ``document``, whose
    columns are the nodes, the difference and why.

    :raises AssertionError: no such heading, or a table without rows.
    """
    lines = document.read_text().splitlines()
    heading = next((i for i, line in enumerate(lines) if line.lstrip("#").strip() == title), None)
    assert heading is not None, f"{document} has no heading {title!r}"
    table = itertools.takewhile(
        lambda line: line.startswith("|"),
        itertools.dropwhile(lambda line: not line.startswith("|"), lines[heading + 1 :]),
    )
    rows = []
    for line in list(table)[2:]:  # past the header and its rule
        node, what, why = (cell.strip() for cell in line.strip().strip("|").split("|", 2))
        globs = tuple(glob.strip().strip("`") for glob in node.split(","))
        rows.append(KnownDifference(globs, what, why))
    assert rows, f"the table under {title!r} in {document} has no rows"
    return rows


def render(tree: Mapping[str, Node]) -> str:
    """A dump as text, one node a line (``E`` ephemeral, ``P`` persistent), for a failure's
    report."""
    lines = []
    for path, node in tree.items():
        data = "null" if node.data is None else node.data.decode(errors="replace")
        lines.append(f"{'E' if node.ephemeral else 'P'} {path} {data}")
    return "\n".join(lines)
