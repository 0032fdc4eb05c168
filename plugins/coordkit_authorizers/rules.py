"""Kafka's ``AclAuthorizer.authorizeAction`` (Kafka 3.9), over a snapshot of the ACLs.

* A super user (``super.users``) may do anything.
* The ACLs that apply to a resource are those of the literal resource, of the wildcard resource
  ``*`` of its type, and of every prefixed resource its name starts with — whoever they are for.
  None at all: ``allow.everyone.if.no.acl.found`` decides.
* Otherwise a matching Deny refuses (deny wins), else a matching Allow allows, else refused. An
  entry matches when its principal is the one asking or ``User:*``, its host the client's
  address or ``*``, and its operation the one asked or ``All``. Deny matches the operation
  itself only; Allow of Read, Write, Delete or Alter implies Describe, and Allow of
  AlterConfigs implies DescribeConfigs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from coordkit.kafka.acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
)
from coordkit.strategies.authorization import Action

Acls = Mapping[ResourcePattern, frozenset[AccessControlEntry]]

#: The operations whose Allow implies another's.
IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}  # fmt: skip


def matching_acls(acls: Acls, action: Action) -> Iterator[AccessControlEntry]:
    """Every entry that applies to ``action``'s resource (``AclAuthorizer.matchingAcls``)."""
    kind, name = action.resource_type, action.name
    for literal in (name, WILDCARD):
        yield from acls.get(ResourcePattern(kind, literal, PatternType.LITERAL), ())
    for end in range(1, len(name) + 1):
        yield from acls.get(ResourcePattern(kind, name[:end], PatternType.PREFIXED), ())


def _matches(entry: AccessControlEntry, principal: str, host: str,
             operations: frozenset[AclOperation], permission: AclPermissionType) -> bool:  # fmt: skip
    return (
        entry.permission == permission
        and entry.principal in (principal, WILDCARD_PRINCIPAL)
        and (entry.operation in operations or entry.operation == AclOperation.ALL)
        and entry.host in (host, WILDCARD)
    )


def decide(
    acls: Acls,
    principal: str,
    host: str,
    action: Action,
    *,
    super_users: frozenset[str] = frozenset(),
    allow_if_no_acl: bool = False,
) -> bool:
    """Whether ``principal`` from ``host`` may do ``action`` (see the module docstring)."""
    if principal in super_users:
        return True
    entries = list(matching_acls(acls, action))
    if not entries:
        return allow_if_no_acl
    asked = frozenset({action.operation})
    if any(_matches(e, principal, host, asked, AclPermissionType.DENY) for e in entries):
        return False
    allowing = IMPLIED_BY.get(action.operation, asked)
    return any(_matches(e, principal, host, allowing, AclPermissionType.ALLOW) for e in entries)
