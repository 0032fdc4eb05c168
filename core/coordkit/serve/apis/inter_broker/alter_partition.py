"""AlterPartition: a Kafka 3.9 leader asks this process's controller to change an ISR (KIP-497);
the rules are the engine's (:mod:`coordkit.engine.controller.alter_partition`), this module reads
the request and writes the answer.

Versions 2-3 (topics by id; v3 names each ISR member with its broker epoch, KIP-903): the ones a
Kafka 3.9 broker of a cluster with topic ids sends. A broker that is not the active controller
answers NOT_CONTROLLER, and the leader looks for the controller again.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

from coordkit.engine.controller.alter_partition import AlterPartitionError, IsrChange
from coordkit.engine.errors import EngineError
from coordkit.engine.states import LeaderIsr
from coordkit.kafka.acls import AclOperation
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import CLUSTER_AUTHORIZATION_FAILED, cluster_allowed
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

log = logging.getLogger("coordkit.serve")

AlterPartitionResponse = messages.AlterPartitionResponse
TopicData = nested(AlterPartitionResponse, "TopicData")
PartitionData = nested(AlterPartitionResponse, "PartitionData")
#: The first version naming each ISR member with its broker epoch.
ISR_WITH_EPOCHS_VERSION = 3


async def handle_alter_partition(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        # Kafka's authorizeClusterOperation: its getErrorResponse, the error alone.
        return AlterPartitionResponse(error_code=CLUSTER_AUTHORIZATION_FAILED, topics=[])
    controller = ctx.broker.controller
    if controller is None or not controller.active:
        return AlterPartitionResponse(error_code=AlterPartitionError.NOT_CONTROLLER, topics=[])
    names = await ctx.topic_names(t.topic_id for t in body.topics)
    changes: list[IsrChange] = []
    unknown: dict[Any, list[int]] = {}
    for topic in body.topics:
        name = names.get(topic.topic_id)
        for p in topic.partitions:
            if name is None:
                unknown.setdefault(topic.topic_id, []).append(p.partition_index)
                continue
            isr = ([b.broker_id for b in p.new_isr_with_epochs]
                   if request.version >= ISR_WITH_EPOCHS_VERSION else list(p.new_isr))  # fmt: skip
            changes.append(IsrChange((name, p.partition_index), p.leader_epoch, tuple(isr),
                                     p.partition_epoch))  # fmt: skip
    future = controller.alter_partition(body.broker_id, body.broker_epoch, changes)
    timeout = ctx.broker.config.controlled_shutdown_timeout
    try:
        result = await ctx.blocking(lambda: future.result(timeout=timeout))
    except concurrent.futures.TimeoutError:
        return AlterPartitionResponse(error_code=errors.REQUEST_TIMED_OUT, topics=[])
    except (EngineError, concurrent.futures.CancelledError):
        return AlterPartitionResponse(error_code=AlterPartitionError.NOT_CONTROLLER, topics=[])
    if result.error:
        log.info("controller %s: AlterPartition from broker %s refused (%s)", ctx.broker_id,
                 body.broker_id, result.error.name)  # fmt: skip
        return AlterPartitionResponse(error_code=result.error, topics=[])
    by_topic: dict[Any, list[Any]] = {}
    for (topic, partition), outcome in result.partitions.items():
        by_topic.setdefault(ctx.topic_ids.id_of(topic), []).append(_partition(partition, outcome))
    for topic_id, partitions in unknown.items():
        by_topic[topic_id] = [PartitionData(partition_index=p, error_code=errors.UNKNOWN_TOPIC_ID)
                              for p in partitions]  # fmt: skip
    return AlterPartitionResponse(error_code=errors.NONE, topics=[
        TopicData(topic_id=topic_id, partitions=partitions)
        for topic_id, partitions in by_topic.items()
    ])  # fmt: skip


def _partition(partition: int, outcome: LeaderIsr | AlterPartitionError) -> Any:
    if isinstance(outcome, AlterPartitionError):
        return PartitionData(partition_index=partition, error_code=outcome, leader_id=-1,
                             leader_epoch=-1, isr=[], partition_epoch=-1)  # fmt: skip
    return PartitionData(partition_index=partition, error_code=errors.NONE,
                         leader_id=outcome.leader, leader_epoch=outcome.leader_epoch,
                         isr=list(outcome.isr), leader_recovery_state=0,
                         partition_epoch=outcome.zk_version)  # fmt: skip
