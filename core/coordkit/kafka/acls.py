"""ACLs as Kafka keeps them: the enums of ``org.apache.kafka.common.acl`` / ``.resource`` (with
their wire codes), ACL bindings and filters, and the ZooKeeper layout of Kafka 3.9's
``AclAuthorizer`` (``kafka.zk.ZkData``'s ``ZkAclStore`` and ``ZkAclChangeStore``):

* literal resources: ``/kafka-acl/<ResourceType>/<name>``, their changes announced by a sequential
  ``/kafka-acl-changes/acl_changes_N`` holding ``TOPIC:name`` (the resource type's enum name);
* prefixed resources: ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``, announced under
  ``/kafka-acl-extended-changes`` as ``{"version":1,"resourceType":"TOPIC","name":...,
  "patternType":"PREFIXED"}``;
* each resource node ``{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",
  "operation":"Read"}],"version":1}`` — the key order of the Java ``HashMap`` Kafka serialises.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from typing import Any

import attrs

from coordkit.errors import LayoutError
from coordkit.support import jsontext


def _pascal(name: str) -> str:
    """Kafka's ``SecurityUtils.toPascalCase``: ``DESCRIBE_CONFIGS`` → ``DescribeConfigs``."""
    return "".join(part.capitalize() for part in name.split("_"))


class _KafkaEnum(enum.IntEnum):
    @property
    def pascal(self) -> str:
        return _pascal(self.name)

    @classmethod
    def parse(cls, text: str) -> Any:
        """Kafka's ``fromString``/``SecurityUtils`` parsing: the Pascal or upper-case name
        (``Read``, ``READ``), case-insensitively as kafka-acls accepts it."""
        folded = text.replace("_", "").replace("-", "").upper()
        for member in cls:
            if member.name.replace("_", "") == folded:
                return member
        raise ValueError(f"{text!r} is not one of {', '.join(m.pascal for m in cls)}")


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


#: Kafka's ``ResourcePattern.WILDCARD_RESOURCE`` and ``AclEntry``'s wildcards.
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
#: The name of the one cluster resource (Kafka's ``Resource.CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"

#: Kafka's ``AclEntry.supportedOperations``: what an ACL on each resource type may name
#: (``ALL`` is always allowed).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                   AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                                     AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                                     AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}  # fmt: skip


@attrs.frozen(order=True)
class ResourcePattern:
    """A resource an ACL is on: ``type``, ``name`` (``*``: every one), literal or prefixed."""

    type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"{self.type.pascal}:{self.pattern_type.name}:{self.name}"


@attrs.frozen(order=True)
class AccessControlEntry:
    """Who (``principal``, ``User:alice``), from where (``host``, ``*``), may or may not
    (``permission``) do what (``operation``)."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@attrs.frozen(order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@attrs.frozen
class AclBindingFilter:
    """Kafka's ``AclBindingFilter``: ``None`` names and principals/hosts match any; ``ANY``
    enums match any; ``MATCH`` matches the patterns that would apply to a literal name."""

    type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.type not in (ResourceType.ANY, pattern.type):
            return False
        if self.pattern_type == PatternType.MATCH:
            # Kafka's ResourcePatternFilter.matches: what applies to the literal name.
            if pattern.pattern_type == PatternType.LITERAL:
                return self.name is None or pattern.name in (self.name, WILDCARD)
            return self.name is None or self.name.startswith(pattern.name)
        if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
            return False
        return self.name is None or self.name == pattern.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (AclPermissionType.ANY, entry.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


def binding_problem(binding: AclBinding) -> str | None:
    """Why Kafka refuses to create ``binding`` (``None``: it does not): what Kafka's
    ``AclControlManager.validateNewAcl`` / ``AclAuthorizer`` check, in its words."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return "Invalid resourceType " + pattern.type.name
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType " + pattern.pattern_type.name
    if entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return "Invalid operation " + entry.operation.name
    if entry.permission in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
        return "Invalid permissionType " + entry.permission.name
    if not pattern.name:
        return "Resource name should not be empty"
    if pattern.type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is " + CLUSTER_NAME
    if ":" not in entry.principal:
        return f"Could not parse principal from `{entry.principal}` (no colon is present)."
    if entry.host is None or entry.host == "":
        return "Invalid host"
    return None


# -- ZooKeeper layout -----------------------------------------------------------------------------

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
#: ``ZkAclChangeStore.SequenceNumberPrefix``.
CHANGE_PREFIX = "acl_changes_"
#: The roots Kafka's authorizer creates at its start (``ZkAclStore``'s paths and change paths).
ROOTS = (LITERAL_ROOT, f"{EXTENDED_ROOT}/prefixed", LITERAL_CHANGES, EXTENDED_CHANGES)


def pattern_root(pattern_type: PatternType) -> str:
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ROOT
    if pattern_type == PatternType.PREFIXED:
        return f"{EXTENDED_ROOT}/prefixed"
    raise ValueError(f"no ACL store for pattern type {pattern_type.name}")


def resource_path(pattern: ResourcePattern) -> str:
    """``ResourceZNode.path``: the node holding the ACLs of ``pattern``."""
    return f"{pattern_root(pattern.pattern_type)}/{pattern.type.pascal}/{pattern.name}"


def changes_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES if pattern_type == PatternType.LITERAL else EXTENDED_CHANGES


def encode_change(pattern: ResourcePattern) -> bytes:
    """The change notification of ``pattern`` (``LiteralAclChangeStore`` /
    ``ExtendedAclChangeStore``'s ``encode``)."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.type.name}:{pattern.name}".encode()
    event = {"version": 1, "resourceType": pattern.type.name, "name": pattern.name,
             "patternType": pattern.pattern_type.name}  # fmt: skip
    return json.dumps(event, separators=(",", ":")).encode()


def decode_change(path: str, data: bytes) -> ResourcePattern:
    """The resource a change notification at ``path`` names (:class:`LayoutError` else)."""
    try:
        if path.startswith(LITERAL_CHANGES + "/"):
            kind, sep, name = data.decode().partition(":")
            if not sep:
                raise ValueError("expected ResourceType:ResourceName")
            return ResourcePattern(ResourceType.parse(kind), name, PatternType.LITERAL)
        obj = jsontext.loads(data)
        if obj.get("version") != 1:
            raise ValueError(f"unsupported version {obj.get('version')!r}")
        return ResourcePattern(ResourceType.parse(obj["resourceType"]), str(obj["name"]),
                               PatternType.parse(obj["patternType"]))  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError,
            jsontext.JSONTextError) as exc:  # fmt: skip
        raise LayoutError(path, f"not an ACL change notification ({exc})") from None


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    """A resource node's JSON (``ResourceZNode.encode``), entries in a stable order."""
    acls = [
        {"principal": e.principal, "permissionType": e.permission.pascal, "host": e.host,
         "operation": e.operation.pascal}
        for e in sorted(set(entries))
    ]  # fmt: skip
    return json.dumps({"acls": acls, "version": 1}, separators=(",", ":")).encode()


def decode_entries(path: str, data: bytes) -> frozenset[AccessControlEntry]:
    """The entries of a resource node (``AclEntry.fromBytes``: empty data, no entries)."""
    if not data:
        return frozenset()
    try:
        obj = jsontext.loads(data)
        if obj.get("version") != 1:
            raise ValueError(f"version {obj.get('version')!r} is not 1")
        out = set()
        for item in obj["acls"]:
            principal = item["principal"]
            if not isinstance(principal, str) or ":" not in principal:
                raise ValueError(f"principal {principal!r} is not 'Type:name'")
            out.add(AccessControlEntry(principal, str(item["host"]),
                                       AclOperation.parse(item["operation"]),
                                       AclPermissionType.parse(item["permissionType"])))  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError, jsontext.JSONTextError) as exc:
        raise LayoutError(path, f"not a resource's ACLs ({exc})") from None
    return frozenset(out)


def parse_resource_path(path: str) -> ResourcePattern | None:
    """The resource whose node ``path`` is (``None``: not a resource node)."""
    for pattern_type in (PatternType.PREFIXED, PatternType.LITERAL):
        root = pattern_root(pattern_type) + "/"
        if path.startswith(root):
            kind, sep, name = path[len(root) :].partition("/")
            if sep and name:
                try:
                    return ResourcePattern(ResourceType.parse(kind), name, pattern_type)
                except ValueError:
                    return None
    return None
