"""CreateAcls, DescribeAcls and DeleteAcls on ``coordkit serve``, and the authorizer's decisions
on the apis it guards, through raw requests of an unauthenticated connection (``User:ANONYMOUS``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit.engine.acls import AclAdmin
from coordkit.kafka.acls import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from coordkit.protocol import messages
from coordkit.serve.broker_config import parse_broker_configs
from coordkit.serve.classes import nested
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, in_process_fixture  # noqa: F401

ANONYMOUS = "User:ANONYMOUS"
Creation = nested(messages.CreateAclsRequest, "AclCreation")
DeleteFilter = nested(messages.DeleteAclsRequest, "DeleteAclsFilter")
AUTHORIZER = ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer"]


def _settings(*words: str) -> Any:
    return parse_broker_configs(words).serve_settings()


def _creation(name: str, operation: AclOperation, *, kind: ResourceType = ResourceType.TOPIC,
              pattern: PatternType = PatternType.LITERAL, principal: str = ANONYMOUS) -> Any:  # fmt: skip
    return Creation(resource_type=int(kind), resource_name=name, resource_pattern_type=int(pattern),
                    principal=principal, host="*", operation=int(operation),
                    permission_type=int(AclPermissionType.ALLOW))  # fmt: skip


def _describe_all() -> Any:
    return messages.DescribeAclsRequest(
        resource_type_filter=int(ResourceType.ANY), resource_name_filter=None,
        pattern_type_filter=int(PatternType.ANY), principal_filter=None, host_filter=None,
        operation=int(AclOperation.ANY), permission_type=int(AclPermissionType.ANY),
    )  # fmt: skip


def test_without_an_authorizer_the_acl_apis_are_security_disabled(
    in_process: InProcessFactory, raw_client: Callable[[str], RawClient]
) -> None:
    server = in_process(1)
    client = raw_client(server.address(0))
    create = client.call(
        messages.CreateAclsRequest(creations=[_creation("t", AclOperation.READ)]), 3
    )
    assert [(r.error_code, r.error_message) for r in create.results] == [
        (54, "No Authorizer is configured.")
    ]
    described = client.call(_describe_all(), 3)
    assert (described.error_code, described.error_message) == (
        54, "No Authorizer is configured on the broker",
    )  # fmt: skip
    assert AclAdmin(server.server.cluster.admin_store).read_all() == {}


def test_acl_apis_with_the_kafka_authorizer(
    in_process: InProcessFactory, raw_client: Callable[[str], RawClient]
) -> None:
    server = in_process(1, settings=_settings(*AUTHORIZER))
    store = server.server.cluster.admin_store
    client = raw_client(server.address(0))
    request = messages.CreateAclsRequest(creations=[_creation("t", AclOperation.READ)])
    # no ACL lets ANONYMOUS alter the cluster: refused, nothing written
    assert [r.error_code for r in client.call(request, 3).results] == [31]
    assert client.call(_describe_all(), 3).error_code == 31
    assert AclAdmin(store).read_all() == {}
    # granted Alter on the cluster (written to the store as kafka-acls would)
    cluster = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME)
    alter = AccessControlEntry(ANONYMOUS, "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    AclAdmin(store).add([AclBinding(cluster, alter)])
    wait_for(lambda: client.call(_describe_all(), 3).error_code == 0, what="the ACL taken in")
    request = messages.CreateAclsRequest(creations=[
        _creation("t", AclOperation.READ),
        _creation("app-", AclOperation.READ, kind=ResourceType.GROUP, pattern=PatternType.PREFIXED),
        _creation("other", AclOperation.READ, kind=ResourceType.CLUSTER),
        _creation("t", AclOperation.ANY),
    ])  # fmt: skip
    results = [(r.error_code, r.error_message) for r in client.call(request, 3).results]
    assert results == [
        (0, None), (0, None),
        (42, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (42, "Invalid operation ANY"),
    ]  # fmt: skip
    assert store.get("/kafka-acl/Topic/t")[0] == (
        b'{"acls":[{"principal":"User:ANONYMOUS","permissionType":"Allow","host":"*",'
        b'"operation":"Read"}],"version":1}'
    )
    described = client.call(_describe_all(), 3)
    assert sorted(
        (r.resource_type, r.resource_name, r.pattern_type, a.operation)
        for r in described.resources
        for a in r.acls
    ) == [(2, "t", 3, 3), (3, "app-", 4, 3), (4, CLUSTER_NAME, 3, 7)]
    delete = messages.DeleteAclsRequest(filters=[DeleteFilter(
        resource_type_filter=int(ResourceType.TOPIC), resource_name_filter=None,
        pattern_type_filter=int(PatternType.ANY), principal_filter=ANONYMOUS, host_filter=None,
        operation=int(AclOperation.ANY), permission_type=int(AclPermissionType.ANY))])  # fmt: skip
    [result] = client.call(delete, 3).filter_results
    assert result.error_code == 0
    assert [(m.resource_name, m.operation) for m in result.matching_acls] == [("t", 3)]
    assert store.exists("/kafka-acl/Topic/t") is None
