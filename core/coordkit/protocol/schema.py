"""Kafka's message definitions (``definitions/*.json``), read into specs the compiler works from.

The files are Kafka's own (``clients/src/main/resources/common/message``), with ``//`` comments,
which are stripped before parsing. Only the keys that change the wire format are kept: versions,
``flexibleVersions`` (also per field), ``nullableVersions``, ``taggedVersions``/``tag``,
``ignorable``, ``default`` and the field types; ``about``, ``mapKey``, ``entityType`` and friends
document and are dropped.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from attrs import field, frozen

from coordkit.protocol.errors import ProtocolError
from coordkit.support import jsontext

#: Highest version a ``N+`` range reaches (Kafka versions are int16).
MAX_VERSION = 32767

#: Fixed-size types, with their :mod:`struct` format character.
FIXED_FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "float64": "d",
    "uuid": "16s",
}
#: Every primitive type a field may have.
PRIMITIVES = frozenset([*FIXED_FORMATS, "string", "bytes", "records"])

#: The request/response pairs coordkit's brokers answer (issue 17), by Kafka's api name.
API_NAMES = (
    "Produce",
    "Fetch",
    "ListOffsets",
    "Metadata",
    "OffsetCommit",
    "OffsetFetch",
    "FindCoordinator",
    "JoinGroup",
    "Heartbeat",
    "LeaveGroup",
    "SyncGroup",
    "DescribeGroups",
    "ListGroups",
    "ApiVersions",
    "CreateTopics",
    "DeleteTopics",
    "CreatePartitions",
    "InitProducerId",
    "OffsetForLeaderEpoch",
    # Topic and broker configs (issue 35 item 1).
    "DescribeConfigs",
    "AlterConfigs",
    "IncrementalAlterConfigs",
    # KIP-848's consumer group protocol (issue 33).
    "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe",
    # The ZooKeeper-mode controller's requests to brokers, and a broker's to it (issue 34):
    # Kafka 4 dropped them, so their definitions are Kafka 3.9's (definitions/README.md).
    "LeaderAndIsr",
    "StopReplica",
    "UpdateMetadata",
    "ControlledShutdown",
    # A Kafka 3.9 leader's ISR change to the controller (Kafka 4.4's definition, v2-3).
    "AlterPartition",
    # A Kafka 3.9 broker's request for a block of producer ids (Kafka 4.4's definition, v0).
    "AllocateProducerIds",
    # The admin apis tools call (issue 35 item 2).
    "DescribeCluster",
    "DescribeLogDirs",
    "DeleteRecords",
    "ElectLeaders",
    "AlterPartitionReassignments",
    "ListPartitionReassignments",
    "DeleteGroups",
    "OffsetDelete",
    "DescribeProducers",
    "DescribeTopicPartitions",
    # ACLs (issue 36).
    "DescribeAcls",
    "CreateAcls",
    "DeleteAcls",
    # Authentication and SCRAM users (issue 36 item 2).
    "SaslHandshake",
    "SaslAuthenticate",
    "AlterUserScramCredentials",
    "DescribeUserScramCredentials",
    # Client quotas and the config resources Kafka 4 lists (issue 35).
    "DescribeClientQuotas",
    "AlterClientQuotas",
    "ListConfigResources",
    # Share groups, KIP-932 (issue 37).
    "ShareGroupHeartbeat",
    "ShareGroupDescribe",
    "ShareFetch",
    "ShareAcknowledge",
    "DescribeShareGroupOffsets",
    "AlterShareGroupOffsets",
    "DeleteShareGroupOffsets",
    # Transactions (issue 38).
    "AddPartitionsToTxn",
    "AddOffsetsToTxn",
    "EndTxn",
    "TxnOffsetCommit",
    "WriteTxnMarkers",
    "DescribeTransactions",
    "ListTransactions",
)


@frozen
class Versions:
    """An inclusive range of versions; ``lo > hi`` is the empty range (Kafka's ``none``)."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str, where: str) -> Versions:
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        match = re.fullmatch(r"(\d+)(\+|-(\d+))?", text)
        if match is None:
            raise ProtocolError(f"bad version range {text!r}", path=where)
        lo = int(match.group(1))
        if match.group(2) is None:
            return cls(lo, lo)
        if match.group(2) == "+":
            return cls(lo, MAX_VERSION)
        return cls(lo, int(match.group(3)))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    def __str__(self) -> str:
        if self.lo > self.hi:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


NO_VERSIONS = Versions(1, 0)


@frozen
class FieldSpec:
    """One field of a message or struct, as Kafka's JSON declares it.

    ``kind`` is a primitive name, ``struct`` or ``array``; an array's ``element`` is a primitive
    name or ``struct``, and ``struct`` names the element or field struct.
    """

    name: str
    attr: str
    kind: str
    element: str | None
    struct: StructSpec | None
    versions: Versions
    nullable_versions: Versions
    tagged_versions: Versions
    tag: int | None
    ignorable: bool
    default: str
    flexible_versions: Versions | None

    def present(self, version: int) -> bool:
        return version in self.versions

    def tagged(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged_versions

    def nullable(self, version: int) -> bool:
        return version in self.nullable_versions

    @property
    def may_be_null(self) -> bool:
        return self.nullable_versions.lo <= self.nullable_versions.hi


@frozen
class StructSpec:
    """A struct: the message itself, an inline struct, or one of its ``commonStructs``."""

    name: str
    fields: tuple[FieldSpec, ...] = field(factory=tuple)


@frozen
class MessageSpec:
    """One definition file: a request, a response or a header."""

    name: str
    kind: str
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    struct: StructSpec
    structs: dict[str, StructSpec]

    @property
    def api(self) -> str:
        """The api name: ``Metadata`` for ``MetadataRequest``."""
        return re.sub(r"(Request|Response)$", "", self.name)

    def flexible(self, version: int) -> bool:
        return version in self.flexible_versions


def snake_case(name: str) -> str:
    """Kafka's field name as a Python attribute: ``ThrottleTimeMs`` → ``throttle_time_ms``."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*')


def strip_comments(text: str) -> str:
    """Drop ``//`` comments outside strings (Kafka's JSON files carry them; JSON does not)."""
    return _STRING_OR_COMMENT.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else "", text)


class _Parser:
    """Builds the specs of one file, resolving ``commonStructs`` by name."""

    def __init__(self, name: str, raw: dict[str, object]) -> None:
        self.file = name
        self.common = {str(s["name"]): s for s in _list(raw.get("commonStructs", []), name)}
        self.structs: dict[str, StructSpec] = {}

    def struct(self, name: str, raw_fields: object, where: str) -> StructSpec:
        if name in self.structs:
            return self.structs[name]
        fields = tuple(self.field(f, f"{where}.{f.get('name')}") for f in _list(raw_fields, where))
        attrs = [f.attr for f in fields]
        if len(set(attrs)) != len(attrs):
            raise ProtocolError(f"duplicate field names in {name}", path=self.file)
        tags = [f.tag for f in fields if f.tag is not None]
        if len(set(tags)) != len(tags):
            raise ProtocolError(f"duplicate tags in {name}", path=self.file)
        spec = StructSpec(name, fields)
        self.structs[name] = spec
        return spec

    def field(self, raw: dict[str, object], where: str) -> FieldSpec:
        name = str(raw["name"])
        type_name = str(raw["type"])
        element: str | None = None
        struct: StructSpec | None = None
        base = type_name.removeprefix("[]")
        if base in PRIMITIVES:
            kind = "array" if type_name.startswith("[]") else base
            element = base if kind == "array" else None
        else:
            kind = "array" if type_name.startswith("[]") else "struct"
            element = "struct" if kind == "array" else None
            if "fields" in raw:
                struct = self.struct(base, raw["fields"], where)
            elif base in self.common:
                struct = self.struct(base, self.common[base].get("fields", []), where)
            else:
                raise ProtocolError(f"unknown type {type_name!r}", path=f"{self.file} {where}")
        versions = Versions.parse(str(raw["versions"]), where)
        tag = raw.get("tag")
        tagged = Versions.parse(str(raw.get("taggedVersions", "none")), where)
        if (tag is None) != (tagged == NO_VERSIONS):
            raise ProtocolError("tag and taggedVersions go together", path=f"{self.file} {where}")
        flexible = raw.get("flexibleVersions")
        return FieldSpec(
            name=name,
            attr=snake_case(name),
            kind=kind,
            element=element,
            struct=struct,
            versions=versions,
            nullable_versions=Versions.parse(str(raw.get("nullableVersions", "none")), where),
            tagged_versions=tagged,
            tag=int(str(tag)) if tag is not None else None,
            ignorable=bool(raw.get("ignorable", False)),
            default=str(raw.get("default", "")),
            flexible_versions=None if flexible is None else Versions.parse(str(flexible), where),
        )


def _list(value: object, where: str) -> list[dict[str, object]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ProtocolError("expected a list of objects", path=where)
    return value


def parse_definition(file_name: str, text: str) -> MessageSpec:
    """Parse one of Kafka's message definition files."""
    raw = jsontext.loads(strip_comments(text))
    if not isinstance(raw, dict):
        raise ProtocolError("not a JSON object", path=file_name)
    parser = _Parser(file_name, raw)
    name = str(raw["name"])
    struct = parser.struct(name, raw.get("fields", []), name)
    api_key = raw.get("apiKey")
    return MessageSpec(
        name=name,
        kind=str(raw["type"]),
        api_key=None if api_key is None else int(str(api_key)),
        valid_versions=Versions.parse(str(raw["validVersions"]), name),
        flexible_versions=Versions.parse(str(raw.get("flexibleVersions", "none")), name),
        struct=struct,
        structs=parser.structs,
    )


@cache
def load_definition(name: str) -> MessageSpec:
    """The vendored definition ``name`` (``MetadataRequest``, ``RequestHeader``)."""
    source = resources.files("coordkit.protocol").joinpath("definitions").joinpath(f"{name}.json")
    return parse_definition(f"{name}.json", source.read_text(encoding="utf-8"))
