"""FindCoordinator: which broker coordinates a group (any broker answers).

The coordinator of a group is the leader of its ``__consumer_offsets`` partition, read from the
partition's state in the store; the first lookup creates the offsets topic (as Kafka does) and is
answered COORDINATOR_NOT_AVAILABLE until its partitions have leaders. v4+ looks up a batch of
keys. A transactional id (key type 1) is answered the same way from ``__transaction_state``
(:mod:`coordkit.serve.transactions.state_manager`), Describe on it checked
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); other key types get INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.kafka.model import BrokerInfo
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.groups.waiting import coordinator
from coordkit.serve.apis.metadata import read_brokers
from coordkit.serve.authorization import GROUP_AUTHORIZATION_FAILED, allowed_names
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.transactions.state_manager import TransactionStateManager

Response = messages.FindCoordinatorResponse
Coordinator = nested(Response, "Coordinator")
#: FindCoordinator versions served (v4 batches keys; v5 only adds an error code of transaction
#: version 2, TRANSACTION_ABORTABLE, never answered here).
VERSIONS = (0, 5)
GROUP_KEY = 0
TRANSACTION_KEY = 1
BATCHED_VERSION = 4


def _find(ctx: BrokerContext, keys: list[str], key_type: int) -> list[tuple[str, int, Any]]:
    """Per key: ``(key, error code, BrokerInfo and id or None)`` (store work, off the loop)."""
    if key_type == TRANSACTION_KEY:
        return _find_transaction_coordinators(ctx, keys)
    if key_type != GROUP_KEY:
        return [(key, errors.INVALID_REQUEST, None) for key in keys]
    brokers: dict[int, BrokerInfo] | None = None
    found: list[tuple[str, int, Any]] = []
    # Kafka's KafkaApis: Describe on the group, before anything is looked up (or created).
    described = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, keys)
    for key in keys:
        if key not in described:
            found.append((key, GROUP_AUTHORIZATION_FAILED, None))
            continue
        answer = coordinator(ctx).find_coordinator(key)
        if answer.error or answer.coordinator is None:
            found.append((key, int(answer.error) or errors.COORDINATOR_NOT_AVAILABLE, None))
            continue
        if brokers is None:
            brokers = dict(read_brokers(ctx.broker.store))
        info = brokers.get(answer.coordinator)
        if info is None:  # its leader is not registered (stopped): clients retry
            found.append((key, errors.COORDINATOR_NOT_AVAILABLE, None))
        else:
            found.append((key, errors.NONE, (answer.coordinator, info)))
    return found


def _find_transaction_coordinators(
    ctx: BrokerContext, keys: list[str]
) -> list[tuple[str, int, Any]]:
    """Per transactional id: the leader of its ``__transaction_state`` partition."""
    states = TransactionStateManager(ctx, ctx.settings.transactions)
    described = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, keys)
    brokers = dict(read_brokers(ctx.broker.store))
    found: list[tuple[str, int, Any]] = []
    for key in keys:
        if not key:
            found.append((key, errors.INVALID_REQUEST, None))
        elif key not in described:
            found.append((key, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None))
        elif (leader := states.leader_of(key)) is None or leader not in brokers:
            found.append((key, errors.COORDINATOR_NOT_AVAILABLE, None))
        else:
            found.append((key, errors.NONE, (leader, brokers[leader])))
    return found


async def handle_find_coordinator(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    batched = request.version >= BATCHED_VERSION
    keys = list(body.coordinator_keys) if batched else [body.key]
    key_type = body.key_type if request.version >= 1 else GROUP_KEY
    found = await ctx.blocking(lambda: _find(ctx, keys, key_type))
    if batched:
        return Response(
            throttle_time_ms=0,
            coordinators=[
                Coordinator(
                    key=key,
                    node_id=where[0] if where else -1,
                    host=where[1].host if where else "",
                    port=where[1].port if where else -1,
                    error_code=code,
                    error_message=None,
                )
                for key, code, where in found
            ],
        )
    _key, code, where = found[0]
    return Response(
        throttle_time_ms=0,
        error_code=code,
        error_message=None,
        node_id=where[0] if where else -1,
        host=where[1].host if where else "",
        port=where[1].port if where else -1,
    )
