"""CreateAcls, DescribeAcls and DeleteAcls (Kafka's ``AclApis``) over the ACLs of the store, in
Kafka 3.9's ZooKeeper layout (:class:`coordkit.engine.acls.AclAdmin`).

Without an authorizer (``authorizer.class.name`` unset, Kafka's default) each is answered
SECURITY_DISABLED with Kafka's messages. With one, CreateAcls and DeleteAcls need Alter on the
cluster, DescribeAcls Describe (CLUSTER_AUTHORIZATION_FAILED, nothing written). A binding Kafka
refuses (an ANY or UNKNOWN type, pattern, operation or permission; an empty name; a cluster
resource not named ``kafka-cluster``) is INVALID_REQUEST, the others of the request created.
The brokers' authorizers learn of a change from its notification (so does a Kafka 3.9 broker on
the same ZooKeeper).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from coordkit.engine.acls import AclAdmin
from coordkit.errors import StoreError
from coordkit.kafka.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    binding_problem,
)
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import (
    CLUSTER_AUTHORIZATION_FAILED,
    SECURITY_DISABLED,
    cluster_allowed,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

log = logging.getLogger("coordkit.serve")

CreateResponse = messages.CreateAclsResponse
CreationResult = nested(CreateResponse, "AclCreationResult")
DescribeResponse = messages.DescribeAclsResponse
DescribeResource = nested(DescribeResponse, "DescribeAclsResource")
AclDescription = nested(DescribeResponse, "AclDescription")
DeleteResponse = messages.DeleteAclsResponse
FilterResult = nested(DeleteResponse, "DeleteAclsFilterResult")
MatchingAcl = nested(DeleteResponse, "DeleteAclsMatchingAcl")

#: Kafka's messages without an authorizer (DescribeAcls has its own).
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
#: Kafka 4.4's versions of the three apis (v0 is gone: v1 added the pattern type).
VERSIONS = (1, 3)


def _enum(kind: Any, code: int) -> Any:
    try:
        return kind(code)
    except ValueError:
        return kind.UNKNOWN


def _binding(creation: Any) -> AclBinding:
    pattern = ResourcePattern(_enum(ResourceType, creation.resource_type), creation.resource_name,
                              _enum(PatternType, creation.resource_pattern_type))  # fmt: skip
    entry = AccessControlEntry(creation.principal, creation.host,
                               _enum(AclOperation, creation.operation),
                               _enum(AclPermissionType, creation.permission_type))  # fmt: skip
    return AclBinding(pattern, entry)


def _filter(body: Any) -> AclBindingFilter:
    return AclBindingFilter(
        _enum(ResourceType, body.resource_type_filter), body.resource_name_filter,
        _enum(PatternType, body.pattern_type_filter), body.principal_filter, body.host_filter,
        _enum(AclOperation, body.operation), _enum(AclPermissionType, body.permission_type),
    )  # fmt: skip


def _filter_problem(where: AclBindingFilter) -> str | None:
    """Kafka's ``AclBindingFilter.isUnknown``: a filter with an UNKNOWN part is refused."""
    for value in (where.type, where.pattern_type, where.operation, where.permission):
        if value.name == "UNKNOWN":
            return f"Filter contains UNKNOWN elements: {type(value).__name__}"
    return None


async def handle_create_acls(ctx: BrokerContext, request: Request) -> Any:
    creations = request.body.creations or []

    def every(code: int, message: str | None) -> Any:
        results = [CreationResult(error_code=code, error_message=message) for _ in creations]
        return CreateResponse(throttle_time_ms=0, results=results)

    if ctx.authorizer is None:
        return every(SECURITY_DISABLED, NO_AUTHORIZER)
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return every(CLUSTER_AUTHORIZATION_FAILED, None)
    bindings = [_binding(c) for c in creations]
    problems = [binding_problem(b) for b in bindings]
    valid = [b for b, problem in zip(bindings, problems, strict=True) if problem is None]
    failure: str | None = None
    if valid:
        try:
            await ctx.blocking(lambda: AclAdmin(ctx.broker.store).add(valid))
        except StoreError as exc:
            log.warning("broker %s: ACLs not created: %s", ctx.broker_id, exc)
            failure = str(exc)
    results = []
    for problem in problems:
        if problem is not None:
            results.append(CreationResult(error_code=errors.INVALID_REQUEST, error_message=problem))
        elif failure is not None:
            results.append(CreationResult(error_code=errors.UNKNOWN_SERVER_ERROR,
                                          error_message=failure))  # fmt: skip
        else:
            results.append(CreationResult(error_code=errors.NONE, error_message=None))
    return CreateResponse(throttle_time_ms=0, results=results)


async def handle_describe_acls(ctx: BrokerContext, request: Request) -> Any:
    def refused(code: int, message: str | None) -> Any:
        return DescribeResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                resources=[])  # fmt: skip

    if ctx.authorizer is None:
        return refused(SECURITY_DISABLED, NO_AUTHORIZER_DESCRIBE)
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return refused(CLUSTER_AUTHORIZATION_FAILED, None)
    where = _filter(request.body)
    problem = _filter_problem(where)
    if problem is not None:
        return refused(errors.INVALID_REQUEST, problem)
    found = await ctx.blocking(lambda: AclAdmin(ctx.broker.store).describe(where))
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = defaultdict(list)
    for binding in found:
        grouped[binding.pattern].append(binding.entry)
    resources = [
        DescribeResource(
            resource_type=int(p.type), resource_name=p.name, pattern_type=int(p.pattern_type),
            acls=[AclDescription(principal=e.principal, host=e.host, operation=int(e.operation),
                                 permission_type=int(e.permission)) for e in entries],
        )
        for p, entries in grouped.items()
    ]  # fmt: skip
    return DescribeResponse(throttle_time_ms=0, error_code=errors.NONE, error_message=None,
                            resources=resources)  # fmt: skip


async def handle_delete_acls(ctx: BrokerContext, request: Request) -> Any:
    filters = [_filter(f) for f in request.body.filters or []]

    def every(code: int, message: str | None) -> Any:
        results = [FilterResult(error_code=code, error_message=message, matching_acls=[])
                   for _ in filters]  # fmt: skip
        return DeleteResponse(throttle_time_ms=0, filter_results=results)

    if ctx.authorizer is None:
        return every(SECURITY_DISABLED, NO_AUTHORIZER)
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return every(CLUSTER_AUTHORIZATION_FAILED, None)
    problems = [_filter_problem(f) for f in filters]
    valid = [f for f, problem in zip(filters, problems, strict=True) if problem is None]
    removed = iter(await ctx.blocking(lambda: AclAdmin(ctx.broker.store).remove(valid)))
    results = []
    for problem in problems:
        if problem is not None:
            results.append(FilterResult(error_code=errors.INVALID_REQUEST, error_message=problem,
                                        matching_acls=[]))  # fmt: skip
            continue
        matching = [
            MatchingAcl(error_code=errors.NONE, error_message=None,
                        resource_type=int(b.pattern.type), resource_name=b.pattern.name,
                        pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal,
                        host=b.entry.host, operation=int(b.entry.operation),
                        permission_type=int(b.entry.permission))
            for b in next(removed)
        ]  # fmt: skip
        results.append(FilterResult(error_code=errors.NONE, error_message=None,
                                    matching_acls=matching))  # fmt: skip
    return DeleteResponse(throttle_time_ms=0, filter_results=results)


AclHandler = Callable[[BrokerContext, Request], Awaitable[Any]]

#: What the dispatcher serves: api name → (lowest, highest version, handler).
ACL_APIS: dict[str, tuple[int, int, AclHandler]] = {
    "DescribeAcls": (*VERSIONS, handle_describe_acls),
    "CreateAcls": (*VERSIONS, handle_create_acls),
    "DeleteAcls": (*VERSIONS, handle_delete_acls),
}
