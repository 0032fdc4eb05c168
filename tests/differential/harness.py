"""The scenario differential: the same scripted exchange of raw Kafka requests played against a
real Kafka cluster and a ``coordkit serve`` cluster of the same size, the responses compared field
by field.

* A :class:`Scenario` is a named function that gets a :class:`Side` — connections to the brokers
  of one cluster by index, and helpers to create topics and find leaders and coordinators — and
  returns the responses it recorded (or raises: the exception's type is then the recording).
  Scenarios register themselves with :func:`scenario` and declare the api versions they use.
* Every recording is :func:`normalised <Normaliser>` before the comparison: only what must
  differ between two clusters is replaced — node ids (mapped by the broker's position), hosts and
  ports, the cluster id, topic ids, producer ids and member ids the brokers generate (each mapped
  to a placeholder in order of appearance, so that the same id is the same placeholder), throttle
  times and broker-stamped times; error messages are left out unless the scenario compares them.
  Record batches are decoded into their fields.
* :func:`differences` lists every field whose normalised values differ;
  :func:`known_differences` reads the table of the differences coordkit has (docs/serve.md),
  which the test holds the differences to (see ``test_scenarios.py``).
"""

from __future__ import annotations

import re
import socket
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from coordkit.protocol import KafkaCodec, Struct, messages
from coordkit.protocol.records import RecordBatch, decode_batches
from coordkit.testing.waiting import wait_for
from differential import requests as rq
from harness.docs import page, shown

#: Seconds a socket waits for an answer before the scenario fails (a hang, not an answer).
SOCKET_TIMEOUT = 30.0
#: Bound of every wait for the cluster to reach a state (a failing scenario's hang, no more).
WAIT_SECONDS = 30.0
CLIENT_ID = "coordkit-differential"
#: The api versions every side answers that the harness itself uses in its helpers.
HELPER_VERSIONS = {
    "Metadata": 13,
    "CreateTopics": 7,
    "ListOffsets": 11,
    "FindCoordinator": 5,
    "Produce": 13,
    "DeleteTopics": 6,
    "InitProducerId": 5,
}
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


# -- scenarios ------------------------------------------------------------------------------------


ScenarioFunction = Callable[["Side"], list[Any]]


@attrs.frozen
class Scenario:
    """A named exchange of requests.

    :param versions: api name → the version the scenario sends (checked: see
        :func:`highest_common_versions`); a call at another version fails the scenario.
    :param older_versions: why the scenario sends versions other than the highest both sides
        support (an unknown version, a malformed frame), or ``None``.
    :param compare_messages: error messages are compared too (by default only codes are).
    """

    name: str
    function: ScenarioFunction
    versions: Mapping[str, int]
    older_versions: str | None = None
    compare_messages: bool = False

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def doc(self) -> str:
        return (self.function.__doc__ or "").strip()


SCENARIOS: dict[str, Scenario] = {}


def scenario(
    name: str,
    *,
    versions: Mapping[str, int],
    older_versions: str | None = None,
    compare_messages: bool = False,
) -> Callable[[ScenarioFunction], ScenarioFunction]:
    """Register the decorated function as scenario ``name`` (``family.what``)."""

    def register(function: ScenarioFunction) -> ScenarioFunction:
        if name in SCENARIOS:
            raise ValueError(f"scenario {name!r} is registered twice")
        SCENARIOS[name] = Scenario(name, function, dict(versions), older_versions,
                                   compare_messages)  # fmt: skip
        return function

    return register


def highest_common_versions(*ranges: Mapping[str, tuple[int, int]]) -> dict[str, int]:
    """Per api every side answers: the highest version all of them support."""
    common: dict[str, int] = {}
    for api in set.intersection(*(set(r) for r in ranges)):
        low = max(r[api][0] for r in ranges)
        high = min(r[api][1] for r in ranges)
        if low <= high:
            common[api] = high
    return common


# -- connections ----------------------------------------------------------------------------------


class ConnectionClosedError(ConnectionError):
    """The broker closed the connection."""


class Connection:
    """One TCP connection to a broker, speaking Kafka's protocol with coordkit's codec.

    Requests may be sent ahead of their answers (:meth:`send`, then :meth:`receive` in order): a
    JoinGroup that waits for a rebalance is sent on one connection while other members act on
    theirs.
    """

    def __init__(self, address: tuple[str, int], check_version: Callable[[str, int], None]):
        self.address = address
        self.sock = socket.create_connection(address, timeout=SOCKET_TIMEOUT)
        self.codec = KafkaCodec()
        self._check_version = check_version
        self._correlation = 0
        #: Requests sent and not yet answered, oldest first: (correlation id, api, version).
        self._pending: list[tuple[int, str, int]] = []

    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    def send(self, request: Struct, version: int, *, expect_answer: bool = True) -> int:
        """Send ``request``; its correlation id. ``expect_answer=False``: the broker sends none
        (a Produce with acks=0)."""
        api = type(request).KAFKA_NAME.removesuffix("Request")
        self._check_version(api, version)
        correlation = self.next_correlation_id()
        frame = self.codec.encode_request(
            request, version=version, correlation_id=correlation, client_id=CLIENT_ID
        )
        self.sock.sendall(frame)
        if expect_answer:
            self._pending.append((correlation, api, version))
        return correlation

    def send_raw(self, frame: bytes) -> None:
        """Send bytes as they are (a malformed frame)."""
        self.sock.sendall(frame)

    def receive(self) -> Any:
        """The answer to the oldest request sent and not yet answered."""
        correlation, api, version = self._pending.pop(0)
        got, body = self.codec.decode_response(api, version, self.read_frame())
        if got != correlation:
            raise AssertionError(f"{api} answer has correlation id {got}, expected {correlation}")
        return body

    def call(self, request: Struct, version: int) -> Any:
        self.send(request, version)
        return self.receive()

    def read_frame(self) -> bytes:
        """The next response frame (without its size prefix)."""
        size = _SIZE.unpack(self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            try:
                chunk = self.sock.recv(count - len(data))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise ConnectionClosedError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


@attrs.frozen
class FrameOutcome:
    """What a broker did with a frame: answered it (the answer's frame), passed over it without
    an answer, or closed the connection."""

    kind: str  # "answered", "no answer" or "closed"
    frame: bytes | None = None


def probe_frame(connection: Connection, frame: bytes, correlation_id: int) -> FrameOutcome:
    """Send ``frame`` (a request with ``correlation_id``, malformed or not), then a valid
    ApiVersions request, and tell from what comes back what the broker did with the frame: no
    waiting on a clock decides it (the second request's answer, or the connection's end, does)."""
    connection.send_raw(frame)
    follow_up = connection.next_correlation_id()
    connection.send_raw(
        connection.codec.encode_request(
            messages.ApiVersionsRequest(), version=0, correlation_id=follow_up, client_id=CLIENT_ID
        )
    )
    try:
        answer = connection.read_frame()
    except ConnectionClosedError:
        return FrameOutcome("closed")
    got = _CORRELATION.unpack_from(answer, 0)[0]
    if got == follow_up:
        return FrameOutcome("no answer")
    if got != correlation_id:
        raise AssertionError(f"an answer with correlation id {got}, sent {correlation_id}")
    return FrameOutcome("answered", answer)


# -- a cluster, as a scenario sees it ----------------------------------------------------------------


class Side:
    """One cluster, for one scenario: brokers by index (0 to N-1, in broker id order), a
    connection to each opened on first use, and helpers.

    Names are the scenario's own: :meth:`topic` and :meth:`group` prefix them with the
    scenario's name, so no two scenarios share a topic or a group on a cluster both reuse.
    """

    def __init__(
        self,
        name: str,
        addresses: Sequence[tuple[str, int]],
        broker_ids: Sequence[int],
        run: Scenario,
        *,
        salt: str = "",
    ) -> None:
        self.name = name
        self.addresses = list(addresses)
        self.broker_ids = list(broker_ids)
        self.scenario = run
        #: Every topic and group name of the scenario starts with this (``salt`` tells runs
        #: on one cluster apart: the tests start fresh clusters and need none).
        self.prefix = f"d{salt}-" + re.sub(r"[^a-zA-Z0-9-]", "-", run.name)
        self._connections: list[Connection] = []
        self._default: dict[int, Connection] = {}

    # -- names and ids
    def topic(self, suffix: str = "t") -> str:
        return f"{self.prefix}-{suffix}"

    def group(self, suffix: str = "g") -> str:
        return f"{self.prefix}-{suffix}"

    def broker_id(self, index: int) -> int:
        return self.broker_ids[index]

    def index_of(self, broker_id: int) -> int:
        return self.broker_ids.index(broker_id)

    @property
    def size(self) -> int:
        return len(self.broker_ids)

    # -- connections
    def check_version(self, api: str, version: int) -> None:
        """A scenario calls an api only at the version it declared."""
        declared = self.scenario.versions.get(api)
        if declared != version:
            raise AssertionError(
                f"scenario {self.scenario.name} sends {api} v{version} but declares "
                f"{'v' + str(declared) if declared is not None else 'no version of it'}"
            )

    def connect(self, index: int) -> Connection:
        """A new connection to broker ``index`` (closed at the scenario's end)."""
        connection = Connection(self.addresses[index], self.check_version)
        self._connections.append(connection)
        return connection

    def connection(self, index: int) -> Connection:
        """The scenario's shared connection to broker ``index``."""
        if index not in self._default:
            self._default[index] = self.connect(index)
        return self._default[index]

    def call(self, index: int, request: Struct, version: int) -> Any:
        """Send ``request`` at ``version`` to broker ``index`` and return its answer."""
        return self.connection(index).call(request, version)

    def close(self) -> None:
        for connection in self._connections:
            connection.close()
        self._connections.clear()
        self._default.clear()

    # -- helpers: they use the helper versions on connections of their own, so that a
    # scenario's declared versions and its connections' order of answers stay its own.
    def helper_call(self, index: int, request: Struct) -> Any:
        api = type(request).KAFKA_NAME.removesuffix("Request")
        connection = Connection(self.addresses[index], lambda _api, _version: None)
        try:
            return connection.call(request, HELPER_VERSIONS[api])
        finally:
            connection.close()

    def metadata(self, index: int, topics: Sequence[str] | None) -> Any:
        return self.helper_call(index, rq.metadata(topics))

    def placement(self, partitions: int, replication: int) -> dict[int, list[int]]:
        """The assignment both sides get for a topic the helpers create: partition ``p`` on
        brokers ``p, p+1, ...`` (by index, mapped to this side's ids), so that leaders and
        replicas sit at the same positions on both sides."""
        return {
            p: [self.broker_id((p + r) % self.size) for r in range(replication)]
            for p in range(partitions)
        }

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication: int = 3,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create ``name`` with the assignment of :meth:`placement` and wait until every broker
        knows its leaders and each leader serves its partitions."""
        assignment = self.placement(partitions, replication)
        topic = rq.creatable(name, -1, -1, assignment=assignment, configs=configs)
        request = rq.create_topics(topic)
        answer = self.helper_call(0, request)
        code = answer.topics[0].error_code
        if code != 0:
            raise AssertionError(f"{self.name}: creating topic {name}: error {code}")
        self.wait_topic_ready(name, partitions)

    def wait_topic_ready(self, name: str, partitions: int) -> None:
        """Until every broker's metadata lists ``partitions`` partitions of ``name`` with a
        leader, and every leader answers ListOffsets for its partitions."""

        def known_everywhere() -> bool:
            for index in range(self.size):
                topic = self.metadata(index, [name]).topics[0]
                led = [p for p in topic.partitions if p.leader_id >= 0]
                if topic.error_code != 0 or len(led) != partitions:
                    return False
            return True

        wait_for(known_everywhere, WAIT_SECONDS, f"{self.name}: topic {name} known everywhere")
        for partition in range(partitions):
            wait_for(
                lambda p=partition: self.latest_offset(name, p) is not None,  # type: ignore[misc]
                WAIT_SECONDS,
                f"{self.name}: the leader of {name}-{partition} serving it",
            )

    def wait_topic_gone(self, name: str) -> None:
        """Until no broker's metadata lists ``name``."""

        def gone() -> bool:
            return all(
                self.metadata(i, [name]).topics[0].error_code == rq.UNKNOWN_TOPIC_OR_PARTITION
                for i in range(self.size)
            )

        wait_for(gone, WAIT_SECONDS, f"{self.name}: topic {name} gone from every broker")

    def leader(self, topic: str, partition: int = 0) -> int:
        """The index of the broker leading ``topic``-``partition``."""
        found = self.metadata(0, [topic]).topics[0]
        for p in found.partitions:
            if p.partition_index == partition and p.leader_id >= 0:
                return self.index_of(p.leader_id)
        raise AssertionError(f"{self.name}: {topic}-{partition} has no leader")

    def latest_offset(self, topic: str, partition: int) -> int | None:
        """The leader's latest offset of ``topic``-``partition`` (``None``: not served yet)."""
        request = rq.list_offsets(topic, partition, rq.LATEST_TIMESTAMP)
        try:
            leader = self.leader(topic, partition)
        except AssertionError:
            return None
        answer = self.helper_call(leader, request).topics[0].partitions[0]
        return None if answer.error_code else int(answer.offset)

    def topic_id(self, name: str) -> uuid.UUID:
        """``name``'s topic id, as broker 0's metadata gives it (zero: no such topic)."""
        found: uuid.UUID = self.metadata(0, [name]).topics[0].topic_id
        return found

    def coordinator(self, group: str) -> int:
        """The index of the broker coordinating ``group`` (once it is available)."""
        request = rq.find_coordinator(group)

        def found() -> Any:
            answer = self.helper_call(0, request).coordinators[0]
            return None if answer.error_code else answer

        answer = wait_for(found, WAIT_SECONDS, f"{self.name}: the coordinator of {group}")
        return self.index_of(answer.node_id)

    def produce(
        self, topic: str, partition: int, batch: RecordBatch | bytes, acks: int = -1
    ) -> Any:
        """Produce one batch to the partition's leader (a helper's write, acks=all by
        default: the records are below the high watermark when it returns)."""
        request = by_id(self, rq.produce(topic, partition, batch, acks=acks))
        answer = self.helper_call(self.leader(topic, partition), request)
        found = answer.responses[0].partition_responses[0]
        if found.error_code:
            raise AssertionError(f"{self.name}: produce to {topic}-{partition}: {found}")
        return found


def by_id(side: Side, request: Struct) -> Struct:
    """A Produce or Fetch request built with topic names, each topic also given its id (the
    versions scenarios send, Produce 13 and Fetch 13+, carry only the id), unless it has one."""
    if isinstance(request, messages.ProduceRequest):
        for produced in request.topic_data:
            if not produced.topic_id.int:  # an id a scenario set is its own
                produced.topic_id = side.topic_id(produced.name)
    elif isinstance(request, messages.FetchRequest):
        for fetched in request.topics:
            if not fetched.topic_id.int:
                fetched.topic_id = side.topic_id(fetched.topic)
    else:
        raise TypeError(f"{type(request).__name__} names no topics by id")
    return request


# -- normalising --------------------------------------------------------------------------------------

#: Fields holding broker ids (one, or a list): mapped by the broker's position.
NODE_ID_FIELDS = frozenset(
    {"node_id", "leader_id", "controller_id", "replica_nodes", "isr_nodes", "offline_replicas"}
)
#: Fields holding member ids the coordinator generated.
MEMBER_ID_FIELDS = frozenset({"member_id", "leader"})
#: Fields left out of every comparison: throttling is each broker's own business.
DROPPED_FIELDS = frozenset({"throttle_time_ms"})
#: Lists whose order carries no meaning (Kafka builds them from hash maps): compared sorted
#: (after normalising).
UNORDERED_LISTS = frozenset(
    {"brokers", "members", "groups", "topics", "responses", "partition_responses", "partitions"}
)


class Normaliser:
    """Turns one side's recordings into plain data where only what must differ is replaced."""

    def __init__(self, broker_ids: Sequence[int], *, compare_messages: bool) -> None:
        self.nodes = {broker_id: f"broker-{i}" for i, broker_id in enumerate(sorted(broker_ids))}
        self.compare_messages = compare_messages
        self._placeholders: dict[str, dict[object, str]] = {}

    def placeholder(self, kind: str, value: object) -> str:
        """The same placeholder for the same value of ``kind``, numbered by first appearance."""
        seen = self._placeholders.setdefault(kind, {})
        if value not in seen:
            seen[value] = f"<{kind} {len(seen) + 1}>"
        return seen[value]

    def node(self, value: object) -> object:
        if isinstance(value, int) and value >= 0:
            return self.nodes.get(value, f"<unknown node {value}>")
        return value

    def normalise(self, value: object, field: str = "") -> object:
        if isinstance(value, Struct):
            return self.struct(value)
        if isinstance(value, list):
            items = [self.normalise(item, field) for item in value]
            if field in UNORDERED_LISTS:
                items.sort(key=repr)
            return items
        if isinstance(value, dict):
            return {k: self.normalise(v, k) for k, v in value.items()}
        if isinstance(value, tuple):
            return tuple(self.normalise(v, field) for v in value)
        return self.scalar(field, value)

    def struct(self, message: Struct) -> dict[str, object]:
        out: dict[str, object] = {"$struct": type(message).KAFKA_NAME}
        for field in type(message).FIELDS:
            if field in DROPPED_FIELDS:
                continue
            if field == "error_message" and not self.compare_messages:
                continue
            value = getattr(message, field)
            if field == "records" and isinstance(value, bytes | bytearray | memoryview):
                out[field] = self.batches(bytes(value))
            else:
                out[field] = self.normalise(value, field)
        if message.unknown_tags:
            out["$unknown_tags"] = sorted(message.unknown_tags)
        return out

    def scalar(self, field: str, value: object) -> object:
        if field in NODE_ID_FIELDS:
            return self.node(value)
        if field in MEMBER_ID_FIELDS and isinstance(value, str) and value:
            return self.placeholder("member id", value)
        if field == "topic_id" and isinstance(value, uuid.UUID) and value.int:
            return self.placeholder("topic id", value)
        if field == "producer_id" and isinstance(value, int) and value >= 0:
            return self.placeholder("producer id", value)
        if field == "cluster_id" and value is not None:
            return "<cluster id>"
        if field in ("host", "client_host") and value:
            return "<host>"
        if field == "port" and isinstance(value, int) and value >= 0:
            return "<port>"
        if field == "log_append_time_ms" and isinstance(value, int) and value >= 0:
            return value if value in rq.SCRIPTED_TIMESTAMPS else "<broker time>"
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value).hex()
        if isinstance(value, uuid.UUID):
            return str(value)
        return value

    def batches(self, data: bytes) -> object:
        """A records field as its batches' fields (the CRC left out: it covers fields
        compared here, and a broker's own leader epoch)."""
        if not data:
            return []
        try:
            decoded = decode_batches(data, allow_partial_tail=True)
        except ValueError as exc:
            return f"<undecodable records: {exc}>"
        return [
            {
                "base_offset": b.base_offset,
                "partition_leader_epoch": b.partition_leader_epoch,
                "attributes": b.attributes,
                "producer_id": self.scalar("producer_id", b.producer_id),
                "producer_epoch": b.producer_epoch,
                "base_sequence": b.base_sequence,
                "max_timestamp": b.max_timestamp,
                "records": [
                    (r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
                    for r in b.records
                ],
            }
            for b in decoded
        ]


@attrs.frozen
class Recording:
    """A scenario's outcome on one side: what it returned (normalised), or the type of what it
    raised."""

    returned: object = None
    raised: str | None = None
    #: What was raised, in full (shown in a failure report, never compared: it names ports).
    detail: str = attrs.field(default="", eq=False)

    def as_data(self) -> object:
        return {"raised": self.raised} if self.raised is not None else self.returned


def renamed(data: object, old: str, new: str) -> object:
    """``data`` with ``old`` replaced by ``new`` in every string and key (a recording made under
    a salted prefix, read as if made under the plain one)."""
    if isinstance(data, str):
        return data.replace(old, new)
    if isinstance(data, dict):
        return {renamed(k, old, new): renamed(v, old, new) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(renamed(item, old, new) for item in data)
    return data


def record(run: Scenario, side: Side) -> Recording:
    """Run ``run`` on ``side`` and normalise what it returns."""
    normaliser = Normaliser(side.broker_ids, compare_messages=run.compare_messages)
    try:
        returned = run.function(side)
    except (ConnectionError, OSError, AssertionError) as exc:
        return Recording(raised=type(exc).__name__, detail=f"{type(exc).__name__}: {exc}")
    finally:
        side.close()
    return Recording(returned=normaliser.normalise(list(returned)))


# -- differences ------------------------------------------------------------------------------------


@attrs.frozen
class Difference:
    scenario: str
    path: str
    kafka: object
    coordkit: object

    def __str__(self) -> str:
        return f"{self.scenario}: {self.path or '(whole)'}: kafka {self.kafka!r}, coordkit {self.coordkit!r}"


_ABSENT = "<absent>"


def differences(scenario_name: str, kafka: object, coordkit: object) -> list[Difference]:
    """Every leaf where the two normalised recordings differ (paths like
    ``[1].topics[0].error_code``)."""
    found: list[Difference] = []
    _diff(scenario_name, "", kafka, coordkit, found)
    return found


def _diff(name: str, path: str, a: object, b: object, out: list[Difference]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            sub = f"{path}.{key}" if path else str(key)
            _diff(name, sub, a.get(key, _ABSENT), b.get(key, _ABSENT), out)
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            _diff(name, f"{path}[{i}]", a[i] if i < len(a) else _ABSENT,
                  b[i] if i < len(b) else _ABSENT, out)  # fmt: skip
    elif a != b:
        out.append(Difference(name, path, a, b))


# -- the documentation's table of known differences -----------------------------------------------

#: The page of the table, and its heading.
TABLE_PAGE = page("serve.md")
TABLE_HEADING = "Where `coordkit serve` differs from Kafka 4.x"


@attrs.frozen
class KnownDifference:
    """A row of the table: scenario patterns, field patterns, what and why."""

    #: the page holding the table (``docs/serve.md``)
    document: str
    line: int
    scenarios: tuple[str, ...]
    fields: tuple[str, ...]
    difference: str
    reason: str

    def covers_scenario(self, name: str) -> bool:
        return any(_glob(p).fullmatch(name) for p in self.scenarios)

    def covers(self, found: Difference) -> bool:
        return self.covers_scenario(found.scenario) and any(
            _glob(p).fullmatch(found.path) for p in self.fields
        )

    def __str__(self) -> str:
        patterns = f"{', '.join(self.scenarios)} / {', '.join(self.fields)}"
        return f"{self.document} line {self.line}: {patterns}: {self.difference}"


def stale_rows(
    table: Iterable[KnownDifference],
    family: str,
    names: Iterable[str],
    found: Mapping[str, Sequence[Difference]],
) -> list[str]:
    """The rows of ``table`` for the scenarios ``family`` + each of ``names`` that no difference
    needs: a row that names none of them, or whose named ones all ran (are in ``found``) without
    one difference it covers."""
    stale = []
    names = list(names)
    for row in table:
        covered = [name for name in names if row.covers_scenario(f"{family}{name}")]
        if not covered:
            stale.append(f"{row} (names none of {family}*)")
        elif all(name in found for name in covered) and not any(
            row.covers(d) for name in covered for d in found[name]
        ):
            stale.append(str(row))
    return stale


def _glob(pattern: str) -> re.Pattern[str]:
    """``*`` matches anything (dots and brackets included); everything else is literal."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


_CODE = re.compile(r"`([^`]+)`")


def known_differences(document: Path = TABLE_PAGE) -> list[KnownDifference]:
    """The rows of the table under the heading :data:`TABLE_HEADING` of ``document``.

    :raises AssertionError: the heading or its table is missing, or a row is not
        ``| scenarios | fields | difference | why |`` with the patterns in backticks.
    """
    where = shown(document)
    lines = document.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.lstrip("#").strip() == TABLE_HEADING]
    if len(starts) != 1:
        raise AssertionError(f"{where}: expected one heading {TABLE_HEADING!r}")
    rows: list[KnownDifference] = []
    in_table = False
    for number, line in enumerate(lines[starts[0] + 1 :], start=starts[0] + 2):
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if in_table:
                break
            continue
        in_table = True
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if cells[0].lower() in ("scenarios", "scenario") or set(cells[0]) <= set("-: "):
            continue  # the header and its rule
        if len(cells) != 4:
            raise AssertionError(f"{where}:{number}: a row needs 4 cells, found {len(cells)}")
        scenarios, fields = tuple(_CODE.findall(cells[0])), tuple(_CODE.findall(cells[1]))
        if not scenarios or not fields:
            raise AssertionError(f"{where}:{number}: scenarios and fields go in backticks")
        rows.append(KnownDifference(where, number, scenarios, fields, cells[2], cells[3]))
    if not rows:
        raise AssertionError(f"{where}: no rows under {TABLE_HEADING!r}")
    return rows
