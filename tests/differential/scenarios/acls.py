"""Scenarios of the ACL apis (issue #36 item 3): CreateAcls, DescribeAcls and DeleteAcls on
clusters configured without an authorizer (Kafka's default, the differential's clusters): each
answered SECURITY_DISABLED with Kafka's messages, nothing created. Versions: the highest both
sides serve (3 each)."""

from __future__ import annotations

from typing import Any

from coordkit.protocol import messages
from differential.harness import Side, scenario

VERSION = 3
TOPIC, LITERAL, READ, ALLOW = 2, 3, 3, 3
ANY = 1


def _filter_fields() -> dict[str, Any]:
    return {
        "resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
        "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY,
    }  # fmt: skip


@scenario("acls.create_without_authorizer", versions={"CreateAcls": VERSION},
          compare_messages=True)  # fmt: skip
def create_without_authorizer(side: Side) -> list[Any]:
    """Two creations: each SECURITY_DISABLED, "No Authorizer is configured."."""
    Request: Any = messages.CreateAclsRequest
    creations = [
        Request.AclCreation(resource_type=TOPIC, resource_name=side.topic(), principal=who,
                            resource_pattern_type=LITERAL, host="*", operation=READ,
                            permission_type=ALLOW)
        for who in ("User:alice", "User:bob")
    ]  # fmt: skip
    return [side.call(0, Request(creations=creations), VERSION)]


@scenario("acls.describe_without_authorizer", versions={"DescribeAcls": VERSION},
          compare_messages=True)  # fmt: skip
def describe_without_authorizer(side: Side) -> list[Any]:
    """Every ACL asked for: SECURITY_DISABLED, "No Authorizer is configured on the broker"."""
    return [side.call(0, messages.DescribeAclsRequest(**_filter_fields()), VERSION)]


@scenario("acls.delete_without_authorizer", versions={"DeleteAcls": VERSION},
          compare_messages=True)  # fmt: skip
def delete_without_authorizer(side: Side) -> list[Any]:
    """One filter matching everything: SECURITY_DISABLED for it, no matching ACLs."""
    Request: Any = messages.DeleteAclsRequest
    return [side.call(0, Request(filters=[Request.DeleteAclsFilter(**_filter_fields())]), VERSION)]
