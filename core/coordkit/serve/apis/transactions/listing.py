"""DescribeTransactions and ListTransactions (KIP-664, what ``kafka-transactions.sh`` sends), as
Kafka's ``KafkaApis`` and ``TransactionCoordinator`` answer them:

* DescribeTransactions (sent to each id's coordinator): per id, Describe on it
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), NOT_COORDINATOR from another broker,
  TRANSACTIONAL_ID_NOT_FOUND for an id without state; else its state's name, timeout, start time
  (-1 when no transaction began), producer id and epoch, and its partitions of topics the
  principal may Describe.
* ListTransactions (sent to every broker): the ids this broker coordinates, filtered by state
  names (an unknown name is listed back in ``unknown_state_filters``), producer ids, v1's
  duration (open for longer than it) and v2's transactional id pattern (a Java regular
  expression, matched here by Python's, which agree on the patterns tools pass), leaving out
  ``Dead`` ids and those the principal may not Describe.
"""

from __future__ import annotations

import re
from typing import Any

from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import allowed, allowed_names
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.transactions.coordinator import coordinator_of
from coordkit.serve.transactions.metadata import TransactionMetadata, TxnState

DescribeResponse = messages.DescribeTransactionsResponse
DescribedState = nested(DescribeResponse, "TransactionState")
DescribedTopic = nested(DescribeResponse, "TopicData")
ListResponse = messages.ListTransactionsResponse
ListedState = nested(ListResponse, "TransactionState")

DESCRIBE_VERSIONS = (0, 0)
LIST_VERSIONS = (0, 2)
_NAMES = {state.value: state for state in TxnState}


async def _describe_one(ctx: BrokerContext, transactional_id: str) -> Any:
    # An error's answer keeps the schema's defaults (zeros), as Kafka's does.
    answer = DescribedState(transactional_id=transactional_id, error_code=errors.NONE,
                            transaction_state="", transaction_timeout_ms=0,
                            transaction_start_time_ms=0, producer_id=0, producer_epoch=0,
                            topics=[])  # fmt: skip
    if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        answer.error_code = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return answer
    if not transactional_id:
        answer.error_code = errors.INVALID_REQUEST
        return answer
    error, found = await coordinator_of(ctx).describe(transactional_id)
    if error or found is None or found.state == TxnState.DEAD:
        answer.error_code = error or errors.TRANSACTIONAL_ID_NOT_FOUND
        return answer
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(found.partitions):
        by_topic.setdefault(topic, []).append(partition)
    described = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, by_topic)
    answer.transaction_state = found.state.value
    answer.transaction_timeout_ms = found.timeout_ms
    answer.transaction_start_time_ms = found.start_ms
    answer.producer_id = found.producer_id
    answer.producer_epoch = found.producer_epoch
    answer.topics = [DescribedTopic(topic=topic, partitions=partitions)
                     for topic, partitions in by_topic.items() if topic in described]  # fmt: skip
    return answer


async def handle_describe_transactions(ctx: BrokerContext, request: Request) -> Any:
    return DescribeResponse(
        throttle_time_ms=0,
        transaction_states=[
            await _describe_one(ctx, transactional_id)
            for transactional_id in request.body.transactional_ids
        ],
    )


def _included(
    found: TransactionMetadata,
    states: set[TxnState],
    producer_ids: set[int],
    duration_ms: int,
    pattern: re.Pattern[str] | None,
    now: int,
) -> bool:
    """Kafka's ``TransactionStateManager.listTransactionStates`` filter."""
    if found.state == TxnState.DEAD:
        return False
    if producer_ids and found.producer_id not in producer_ids:
        return False
    if states and found.state not in states:
        return False
    if duration_ms >= 0 and now - found.start_ms <= duration_ms:
        return False
    return pattern is None or pattern.fullmatch(found.transactional_id) is not None


async def handle_list_transactions(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    states = {_NAMES[name] for name in body.state_filters if name in _NAMES}
    unknown = [name for name in body.state_filters if name not in _NAMES]
    duration = body.duration_filter if request.version >= 1 else -1
    pattern = None
    if request.version >= 2 and body.transactional_id_pattern:
        try:
            pattern = re.compile(body.transactional_id_pattern)
        except re.error:
            return ListResponse(throttle_time_ms=0, error_code=errors.INVALID_REQUEST,
                                unknown_state_filters=[], transaction_states=[])  # fmt: skip
    coordinator = coordinator_of(ctx)
    now = coordinator.clock()
    listed = [
        found
        for found in await coordinator.listing()
        if _included(found, states, set(body.producer_id_filters), duration, pattern, now)
    ]
    described = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                              [found.transactional_id for found in listed])  # fmt: skip
    return ListResponse(
        throttle_time_ms=0,
        error_code=errors.NONE,
        unknown_state_filters=unknown,
        transaction_states=[
            ListedState(
                transactional_id=found.transactional_id,
                producer_id=found.producer_id,
                transaction_state=found.state.value,
            )
            for found in listed
            if found.transactional_id in described
        ],
    )
