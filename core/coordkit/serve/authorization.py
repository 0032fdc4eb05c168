"""The one place handlers ask whether the connection's principal may do something (Kafka's
``AuthHelper``): the process's authorizer (``authorizer.class.name``; none: everything is
allowed, as Kafka without an authorizer), the principal the connection authenticated as, and
the client's address as Kafka's ACL hosts name it (``127.0.0.1``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from coordkit.engine.acls import AclAdmin
from coordkit.engine.strategies import Strategies
from coordkit.errors import LayoutError, UnknownNameError
from coordkit.kafka.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from coordkit.serve import connection
from coordkit.serve.broker_config import BrokerConfigError
from coordkit.serve.context import BrokerContext
from coordkit.store import MetadataStore
from coordkit.strategies.authorization import (
    AUTHORIZER_CLASS_CONFIG,
    Action,
    Authorizer,
    AuthorizerConfigError,
    authorizer_name,
)

log = logging.getLogger("coordkit.serve")

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
SECURITY_DISABLED = 54

#: Kafka's ``AclEntry.authorizationError``.
AUTHORIZATION_ERRORS = {
    ResourceType.TOPIC: TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: 53,
    ResourceType.DELEGATION_TOKEN: 65,
}


def client_address() -> str:
    """The connection's client address as ACL hosts name it (``InetAddress.getHostAddress``)."""
    return connection.client_host.get().removeprefix("/")


def authorize(ctx: BrokerContext, actions: Sequence[Action]) -> list[bool]:
    """Whether the connection's principal may do each of ``actions``."""
    if ctx.authorizer is None or not actions:
        return [True] * len(actions)
    who = str(connection.principal.get())
    return ctx.authorizer.authorize(who, client_address(), actions)


def allowed(ctx: BrokerContext, operation: AclOperation, kind: ResourceType, name: str) -> bool:
    return authorize(ctx, [Action(operation, kind, name)])[0]


def cluster_allowed(ctx: BrokerContext, operation: AclOperation) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def allowed_names(
    ctx: BrokerContext, operation: AclOperation, kind: ResourceType, names: Iterable[str]
) -> set[str]:
    """Which of ``names`` the principal may do ``operation`` on (Kafka's ``filterByAuthorized``)."""
    unique = list(dict.fromkeys(names))
    decisions = authorize(ctx, [Action(operation, kind, name) for name in unique])
    return {name for name, ok in zip(unique, decisions, strict=True) if ok}


def allowed_by_resource_type(ctx: BrokerContext, operation: AclOperation,
                             kind: ResourceType) -> bool:  # fmt: skip
    """Whether the principal may do ``operation`` on some resource of type ``kind`` (Kafka's
    ``Authorizer.authorizeByResourceType``, its default, over the ACLs in the store): allowed
    on a name no ACL names (a super user; ``allow.everyone.if.no.acl.found``), else an ALLOW
    of it on the wildcard, or on a literal or prefix that no DENY of a literal of that name or
    of a prefix of it dominates; a DENY on the wildcard refuses."""
    if ctx.authorizer is None or allowed(ctx, operation, kind, "hardcode"):
        return True
    principal, host = str(connection.principal.get()), client_address()
    admin = AclAdmin(ctx.broker.store)
    denied: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    granted: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
    for pattern in admin.patterns():
        if pattern.type != kind:
            continue
        try:
            entries, _ = admin.read(pattern)
        except LayoutError as exc:  # an ACL node nobody can read: refuse rather than guess
            log.warning("%s refused on every %s: %s", operation.name, kind.name, exc)
            return False
        for entry in entries:
            if (entry.host not in (host, WILDCARD)
                    or entry.principal not in (principal, WILDCARD_PRINCIPAL)
                    or entry.operation not in (operation, AclOperation.ALL)):  # fmt: skip
                continue
            if entry.permission == AclPermissionType.DENY:
                if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD:
                    return False
                denied[pattern.pattern_type].add(pattern.name)
            elif entry.permission == AclPermissionType.ALLOW:
                if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD:
                    return True
                granted[pattern.pattern_type].add(pattern.name)
    for pattern_type, names in granted.items():
        for name in names:
            if pattern_type == PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                continue
            if not any(
                name[:end] in denied[PatternType.PREFIXED] for end in range(1, len(name) + 1)
            ):
                return True
    return False


#: The schema's default of an ``authorized_operations`` field: not asked for (``Int.MinValue``).
NO_AUTHORIZED_OPERATIONS = -(2**31)


def authorized_operations(ctx: BrokerContext, kind: ResourceType, name: str) -> int:
    """Kafka's ``AuthHelper.authorizedOperations``: the bit field (``1 << code``) of the
    operations on resource ``name`` the principal may do, among those ACLs of its type may name
    (every one of them without an authorizer). The authorizer's implications count: an allowed
    Read brings Describe."""
    supported = sorted(SUPPORTED_OPERATIONS[kind])
    decisions = authorize(ctx, [Action(operation, kind, name) for operation in supported])
    return sum(1 << operation for operation, ok in zip(supported, decisions, strict=True) if ok)


def cluster_authorized_operations(ctx: BrokerContext) -> int:
    """Metadata's and DescribeCluster's ``cluster_authorized_operations`` when asked for, as
    Kafka computes them: 0 without Describe on the cluster."""
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)


def not_authorized_message(api: str) -> str:
    """The message of Kafka's ``authorizeClusterOperation`` refusal (Kafka's names its
    internal request object; coordkit the api)."""
    return f"Request {api} is not authorized."


def start_authorizer(
    strategies: Strategies, store: MetadataStore, configs: Mapping[str, str]
) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` names among ``strategies``, built on ``store``
    with the broker ``configs`` and started (``None``: no authorizer configured).

    :raises BrokerConfigError: an authorizer no plugin registers, or a config it refuses.
    """
    name = authorizer_name(configs.get(AUTHORIZER_CLASS_CONFIG, ""))
    if name is None:
        return None
    try:
        authorizer = strategies.authorizer(name)(store, configs)
    except (UnknownNameError, AuthorizerConfigError) as exc:
        raise BrokerConfigError(f"--config {AUTHORIZER_CLASS_CONFIG}: {exc}") from None
    authorizer.start()
    return authorizer


def check_authorizer(strategies: Strategies, configs: Mapping[str, str]) -> None:
    """Refuse (:class:`BrokerConfigError`) an ``authorizer.class.name`` no plugin registers."""
    name = authorizer_name(configs.get(AUTHORIZER_CLASS_CONFIG, ""))
    if name is not None:
        try:
            strategies.authorizer(name)
        except UnknownNameError as exc:
            raise BrokerConfigError(f"--config {AUTHORIZER_CLASS_CONFIG}: {exc}") from None


#: Config resource types (DescribeConfigs, AlterConfigs) checked on a resource of their own: a
#: topic's and (Kafka 4) a group's; the others (brokers, loggers, client metrics) on the cluster.
_TOPIC_CONFIGS = 2
_GROUP_CONFIGS = 32
#: Kafka's default messages of the errors (``Errors.message()``).
AUTHORIZATION_MESSAGES = {
    TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
}


def config_refusal(
    ctx: BrokerContext, resource_type: int, name: str, operation: AclOperation
) -> int | None:
    """Kafka's ConfigHelper and KafkaApis for a config resource: ``operation``
    (DescribeConfigs, AlterConfigs) on the topic for a topic, on the group for a group, on the
    cluster for the others; the error code when refused."""
    if resource_type == _TOPIC_CONFIGS:
        return None if allowed(ctx, operation, ResourceType.TOPIC, name) else (
            TOPIC_AUTHORIZATION_FAILED)  # fmt: skip
    if resource_type == _GROUP_CONFIGS:
        return None if allowed(ctx, operation, ResourceType.GROUP, name) else (
            GROUP_AUTHORIZATION_FAILED)  # fmt: skip
    return None if cluster_allowed(ctx, operation) else CLUSTER_AUTHORIZATION_FAILED
