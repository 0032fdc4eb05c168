"""Kafka's AclAuthorizer rules (coordkit_authorizers.rules) as a table, and the ACL layout's
encodings (coordkit.kafka.acls) against what Kafka 3.9 writes."""

from __future__ import annotations

import pytest

from coordkit.errors import LayoutError
from coordkit.kafka import acls as layout
from coordkit.kafka.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from coordkit.strategies.authorization import Action, authorizer_name
from coordkit_authorizers.kafka import parse_super_users
from coordkit_authorizers.rules import decide

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(kind: ResourceType, name: str, principal: str, op: AclOperation,
        perm: AclPermissionType = ALLOW, pattern: PatternType = LIT, host: str = "*",
        ) -> tuple[ResourcePattern, AccessControlEntry]:  # fmt: skip
    return ResourcePattern(kind, name, pattern), AccessControlEntry(principal, host, op, perm)


def index(
    *items: tuple[ResourcePattern, AccessControlEntry],
) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    out: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for pattern, entry in items:
        out.setdefault(pattern, set()).add(entry)
    return {p: frozenset(e) for p, e in out.items()}


ALICE, BOB = "User:alice", "User:bob"

#: (ACLs, principal, host, action, allowed)
CASES = [
    # no ACL at all on the resource: refused (allow.everyone.if.no.acl.found=false)
    ([], ALICE, "1.2.3.4", Action(Op.READ, TOPIC, "t"), False),
    # literal allow, and what it implies
    ([acl(TOPIC, "t", ALICE, Op.READ)], ALICE, "1.2.3.4", Action(Op.READ, TOPIC, "t"), True),
    ([acl(TOPIC, "t", ALICE, Op.READ)], ALICE, "h", Action(Op.DESCRIBE, TOPIC, "t"), True),
    ([acl(TOPIC, "t", ALICE, Op.WRITE)], ALICE, "h", Action(Op.DESCRIBE, TOPIC, "t"), True),
    ([acl(TOPIC, "t", ALICE, Op.DELETE)], ALICE, "h", Action(Op.DESCRIBE, TOPIC, "t"), True),
    ([acl(TOPIC, "t", ALICE, Op.ALTER)], ALICE, "h", Action(Op.DESCRIBE, TOPIC, "t"), True),
    ([acl(TOPIC, "t", ALICE, Op.CREATE)], ALICE, "h", Action(Op.DESCRIBE, TOPIC, "t"), False),
    ([acl(TOPIC, "t", ALICE, Op.DESCRIBE)], ALICE, "h", Action(Op.READ, TOPIC, "t"), False),
    (
        [acl(TOPIC, "t", ALICE, Op.ALTER_CONFIGS)],
        ALICE,
        "h",
        Action(Op.DESCRIBE_CONFIGS, TOPIC, "t"),
        True,
    ),
    (
        [acl(TOPIC, "t", ALICE, Op.DESCRIBE_CONFIGS)],
        ALICE,
        "h",
        Action(Op.ALTER_CONFIGS, TOPIC, "t"),
        False,
    ),
    ([acl(TOPIC, "t", ALICE, Op.ALL)], ALICE, "h", Action(Op.ALTER_CONFIGS, TOPIC, "t"), True),
    # another principal's ACL on the resource: ACLs exist, none for bob
    ([acl(TOPIC, "t", ALICE, Op.READ)], BOB, "h", Action(Op.READ, TOPIC, "t"), False),
    ([acl(TOPIC, "t", "User:*", Op.READ)], BOB, "h", Action(Op.READ, TOPIC, "t"), True),
    # deny wins, for the principal or everyone; deny of Read does not deny Describe
    (
        [acl(TOPIC, "t", ALICE, Op.READ), acl(TOPIC, "t", ALICE, Op.READ, DENY)],
        ALICE,
        "h",
        Action(Op.READ, TOPIC, "t"),
        False,
    ),
    (
        [acl(TOPIC, "*", ALICE, Op.ALL), acl(TOPIC, "t", "User:*", Op.WRITE, DENY)],
        ALICE,
        "h",
        Action(Op.WRITE, TOPIC, "t"),
        False,
    ),
    (
        [acl(TOPIC, "t", ALICE, Op.WRITE), acl(TOPIC, "t", ALICE, Op.READ, DENY)],
        ALICE,
        "h",
        Action(Op.DESCRIBE, TOPIC, "t"),
        True,
    ),
    (
        [acl(TOPIC, "t", ALICE, Op.READ), acl(TOPIC, "t", ALICE, Op.ALL, DENY)],
        ALICE,
        "h",
        Action(Op.READ, TOPIC, "t"),
        False,
    ),
    # hosts
    (
        [acl(TOPIC, "t", ALICE, Op.READ, host="10.0.0.1")],
        ALICE,
        "10.0.0.1",
        Action(Op.READ, TOPIC, "t"),
        True,
    ),
    (
        [acl(TOPIC, "t", ALICE, Op.READ, host="10.0.0.1")],
        ALICE,
        "10.0.0.2",
        Action(Op.READ, TOPIC, "t"),
        False,
    ),
    (
        [acl(TOPIC, "t", ALICE, Op.READ), acl(TOPIC, "t", ALICE, Op.READ, DENY, host="10.0.0.2")],
        ALICE,
        "10.0.0.1",
        Action(Op.READ, TOPIC, "t"),
        True,
    ),
    # wildcard and prefixed resources
    ([acl(TOPIC, "*", ALICE, Op.READ)], ALICE, "h", Action(Op.READ, TOPIC, "anything"), True),
    (
        [acl(TOPIC, "pay", ALICE, Op.READ, pattern=PRE)],
        ALICE,
        "h",
        Action(Op.READ, TOPIC, "payments"),
        True,
    ),
    (
        [acl(TOPIC, "pay", ALICE, Op.READ, pattern=PRE)],
        ALICE,
        "h",
        Action(Op.READ, TOPIC, "pa"),
        False,
    ),
    ([acl(TOPIC, "pay", ALICE, Op.READ)], ALICE, "h", Action(Op.READ, TOPIC, "payments"), False),
    (
        [
            acl(TOPIC, "pay", ALICE, Op.READ, pattern=PRE),
            acl(TOPIC, "payments", ALICE, Op.READ, DENY),
        ],
        ALICE,
        "h",
        Action(Op.READ, TOPIC, "payments"),
        False,
    ),
    # the resource type counts
    ([acl(GROUP, "t", ALICE, Op.READ)], ALICE, "h", Action(Op.READ, TOPIC, "t"), False),
    (
        [acl(CLUSTER, "kafka-cluster", ALICE, Op.CREATE)],
        ALICE,
        "h",
        Action(Op.CREATE, CLUSTER, "kafka-cluster"),
        True,
    ),
]


@pytest.mark.parametrize(("acls", "principal", "host", "action", "allowed"), CASES)
def test_kafka_rules(acls: list[tuple[ResourcePattern, AccessControlEntry]], principal: str,
                     host: str, action: Action, allowed: bool) -> None:  # fmt: skip
    assert decide(index(*acls), principal, host, action) is allowed


def test_super_users_and_no_acl_found() -> None:
    acls = index(acl(TOPIC, "t", ALICE, Op.READ, DENY))
    read = Action(Op.READ, TOPIC, "t")
    supers = parse_super_users(" User:admin ; User:alice;")
    assert supers == {"User:admin", "User:alice"}
    # a super user passes even a Deny
    assert decide(acls, ALICE, "h", read, super_users=supers)
    # allow.everyone.if.no.acl.found applies only where no ACL applies
    other = Action(Op.READ, TOPIC, "u")
    assert decide(acls, BOB, "h", other, allow_if_no_acl=True)
    assert not decide(acls, BOB, "h", read, allow_if_no_acl=True)
    with pytest.raises(ValueError, match=r"super\.users: 'admin' is not a principal"):
        parse_super_users("admin")


def test_kafka_class_names_name_the_kafka_authorizer() -> None:
    assert authorizer_name("kafka.security.authorizer.AclAuthorizer") == "kafka"
    assert authorizer_name("org.apache.kafka.metadata.authorizer.StandardAuthorizer") == "kafka"
    assert authorizer_name("") is None
    assert authorizer_name("mine") == "mine"


def test_layout_as_kafka_writes_it() -> None:
    entry = AccessControlEntry(ALICE, "*", Op.READ, ALLOW)
    # Kafka 3.9's ResourceZNode.encode: Jackson over Java HashMaps (this key order)
    assert layout.encode_entries([entry]) == (
        b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",'
        b'"operation":"Read"}],"version":1}'
    )
    assert layout.decode_entries("/p", layout.encode_entries([entry])) == {entry}
    described = AccessControlEntry(BOB, "10.0.0.1", Op.DESCRIBE_CONFIGS, DENY)
    text = (b'{"version":1,"acls":[{"host":"10.0.0.1","permissionType":"Deny",'
            b'"operation":"DescribeConfigs","principal":"User:bob"}]}')  # fmt: skip
    assert layout.decode_entries("/p", text) == {described}
    literal = ResourcePattern(TOPIC, "t")
    prefixed = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PRE)
    assert layout.resource_path(literal) == "/kafka-acl/Topic/t"
    assert layout.resource_path(prefixed) == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    assert (
        layout.parse_resource_path("/kafka-acl-extended/prefixed/TransactionalId/tx-") == prefixed
    )
    assert layout.encode_change(literal) == b"TOPIC:t"
    assert layout.encode_change(prefixed) == (
        b'{"version":1,"resourceType":"TRANSACTIONAL_ID","name":"tx-","patternType":"PREFIXED"}'
    )
    assert layout.decode_change("/kafka-acl-changes/acl_changes_0000000001", b"TOPIC:a:b") == (
        ResourcePattern(TOPIC, "a:b")
    )
    path = "/kafka-acl-extended-changes/acl_changes_0000000001"
    assert layout.decode_change(path, layout.encode_change(prefixed)) == prefixed
    with pytest.raises(LayoutError, match="acl_changes_0000000001: not an ACL change"):
        layout.decode_change(path, b"TOPIC:t")
    with pytest.raises(LayoutError, match="/p: not a resource's ACLs"):
        layout.decode_entries("/p", b'{"version":1,"acls":[{"principal":"alice"}]}')


def test_filters_as_kafka_matches_them() -> None:
    read = AccessControlEntry(ALICE, "*", Op.READ, ALLOW)
    literal = AclBinding(ResourcePattern(TOPIC, "payments"), read)
    prefixed = AclBinding(ResourcePattern(TOPIC, "pay", PRE), read)
    wildcard = AclBinding(ResourcePattern(TOPIC, "*"), read)
    everything = AclBindingFilter()
    assert all(everything.matches(b) for b in (literal, prefixed, wildcard))
    match = AclBindingFilter(TOPIC, "payments", PatternType.MATCH)
    assert all(match.matches(b) for b in (literal, prefixed, wildcard))
    exact = AclBindingFilter(TOPIC, "payments", LIT)
    assert [exact.matches(b) for b in (literal, prefixed, wildcard)] == [True, False, False]
    assert not AclBindingFilter(principal=BOB).matches(literal)
    assert not AclBindingFilter(operation=Op.WRITE).matches(literal)
    assert layout.binding_problem(literal) is None
    assert layout.binding_problem(AclBinding(ResourcePattern(CLUSTER, "c"), read)) == (
        "The only valid name for the CLUSTER resource is kafka-cluster"
    )
