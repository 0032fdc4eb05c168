"""The controller's requests to a broker: LeaderAndIsr, UpdateMetadata and StopReplica, as a Kafka
3.9 broker in ZooKeeper mode answers them (``KafkaApis`` and ``ReplicaManager``).

Whoever is controller — a ``coordkit serve`` process or a Kafka 3.9 broker — sends them; a broker
answers only the current one. Under an authorizer the sender needs ClusterAction on the cluster
(else CLUSTER_AUTHORIZATION_FAILED, Kafka's error response of the request, nothing applied). Every
request is checked then against the broker epoch (a request
meant for an earlier registration of this broker: STALE_BROKER_EPOCH, nothing applied), then
against the newest controller epoch (an older controller: STALE_CONTROLLER_EPOCH, nothing
applied); see :mod:`coordkit.serve.control_plane.metadata_cache`, which keeps both and takes what is accepted.

Per partition, Kafka's rules: LeaderAndIsr applies a state whose leader epoch is newer than the
broker's (an equal or older one is STALE_CONTROLLER_EPOCH, a partition this broker holds no
replica of UNKNOWN_TOPIC_OR_PARTITION, a topic id other than the one known INCONSISTENT_TOPIC_ID);
StopReplica stops a replica whose leader epoch is not older than the broker's (else
FENCED_LEADER_EPOCH), and a deletion (the leader epoch Kafka's controller sends while deleting a
topic) drops the topic's logs. UpdateMetadata carries every partition's state and the live
brokers' endpoints (where followers here fetch from remote leaders).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from coordkit.engine.cluster_id import kafka_uuid_text
from coordkit.engine.events import StateChange
from coordkit.engine.states import TP, LeaderIsr
from coordkit.kafka.acls import AclOperation
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import CLUSTER_AUTHORIZATION_FAILED, cluster_allowed
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.control_plane.metadata_cache import MetadataCache

log = logging.getLogger("coordkit.serve")

LeaderAndIsrResponse = messages.LeaderAndIsrResponse
LeaderAndIsrTopicError = nested(LeaderAndIsrResponse, "LeaderAndIsrTopicError")
LeaderAndIsrPartitionError = nested(LeaderAndIsrResponse, "LeaderAndIsrPartitionError")
UpdateMetadataResponse = messages.UpdateMetadataResponse
StopReplicaResponse = messages.StopReplicaResponse
StopReplicaPartitionError = nested(StopReplicaResponse, "StopReplicaPartitionError")

#: Kafka's ``LeaderAndIsr.LeaderDuringDelete`` and ``EpochDuringDelete``: a topic being deleted.
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
#: ``LeaderAndIsr.NoEpoch``: StopReplica before v3 names no epoch (nothing to check).
NO_EPOCH = -1
ZERO_UUID = uuid.UUID(int=0)
#: LeaderAndIsr's answers are grouped by topic id from v5.
TOPIC_ID_VERSION = 5


def _cache(ctx: BrokerContext) -> MetadataCache:
    if ctx.metadata is None:
        raise RuntimeError("the controller's requests need the process's metadata cache")
    return ctx.metadata


def _fenced(ctx: BrokerContext, request: Request, what: str) -> int:
    """The error that refuses the whole request, or ``NONE``."""
    body = request.body
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        # Kafka's authorizeClusterOperation, before anything else.
        return CLUSTER_AUTHORIZATION_FAILED
    cache = _cache(ctx)
    broker_epoch = getattr(body, "broker_epoch", -1)
    if cache.stale_broker_epoch(broker_epoch, ctx.broker.broker_epoch,
                                f"broker {ctx.broker_id}: {what}"):  # fmt: skip
        return errors.STALE_BROKER_EPOCH
    if cache.stale_controller(body.controller_id, body.controller_epoch,
                              f"broker {ctx.broker_id}: {what}"):  # fmt: skip
        return errors.STALE_CONTROLLER_EPOCH
    return errors.NONE


def _topic_id(value: Any) -> str | None:
    """A request's topic id in Kafka's text form; ``None`` for none (absent, or all zeros)."""
    return None if value is None or value == ZERO_UUID else kafka_uuid_text(value)


def _grouped(request: Request, ungrouped: str, grouped: str) -> Iterator[tuple[str, Any, Any]]:
    """(topic, topic id or None, partition state) of a request that lists partition states
    ungrouped before v2/v5 and by topic after."""
    body = request.body
    for state in getattr(body, ungrouped, None) or ():
        yield state.topic_name, None, state
    for topic in getattr(body, grouped, None) or ():
        for state in topic.partition_states:
            yield topic.topic_name, getattr(topic, "topic_id", None), state


# -- LeaderAndIsr -------------------------------------------------------------------------------


async def handle_leader_and_isr(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    results: dict[tuple[str, Any], list[Any]] = {}
    error = _fenced(ctx, request, "LeaderAndIsr")
    if error:
        # Kafka's getErrorResponse: every partition named, with the request's error.
        for topic, topic_id, state in _grouped(request, "ungrouped_partition_states",
                                               "topic_states"):  # fmt: skip
            results.setdefault((topic, topic_id), []).append((state.partition_index, error))
        return _leader_and_isr_answer(request, error, results)
    cache = _cache(ctx)
    changes: list[StateChange] = []
    ids: dict[str, str] = {}
    for topic, topic_id, state in _grouped(request, "ungrouped_partition_states", "topic_states"):
        tp = (topic, state.partition_index)
        code = _leader_and_isr_partition(ctx, tp, _topic_id(topic_id), state, changes)
        if (known := _topic_id(topic_id)) is not None:
            ids[topic] = known
        results.setdefault((topic, topic_id), []).append((state.partition_index, code))
    cache.topic_ids_known(ids)
    cache.partition_states_applied(changes)
    log.info("broker %s: LeaderAndIsr from controller %s (epoch %s): %d partitions, %d applied",
             ctx.broker_id, body.controller_id, body.controller_epoch,
             sum(len(r) for r in results.values()), len(changes))  # fmt: skip
    return _leader_and_isr_answer(request, errors.NONE, results)


def _leader_and_isr_answer(
    request: Request, error: int, results: dict[tuple[str, Any], list[Any]]
) -> Any:
    if request.version < TOPIC_ID_VERSION:
        return LeaderAndIsrResponse(error_code=error, partition_errors=[
            LeaderAndIsrPartitionError(topic_name=topic, partition_index=p, error_code=code)
            for (topic, _), found in results.items() for p, code in found
        ])  # fmt: skip
    return LeaderAndIsrResponse(error_code=error, topics=[
        LeaderAndIsrTopicError(topic_id=topic_id or ZERO_UUID, partition_errors=[
            LeaderAndIsrPartitionError(partition_index=p, error_code=code) for p, code in found
        ])
        for (_, topic_id), found in results.items()
    ])  # fmt: skip


def _leader_and_isr_partition(
    ctx: BrokerContext, tp: TP, topic_id: str | None, state: Any, changes: list[StateChange]
) -> int:
    known = ctx.topic_ids.id_of(tp[0])
    known_id = kafka_uuid_text(known) if known.int else None
    if topic_id is not None and known_id is not None and known_id != topic_id:
        log.error("broker %s: LeaderAndIsr for %s-%s names topic id %s, this broker knows %s "
                  "(INCONSISTENT_TOPIC_ID)", ctx.broker_id, *tp, topic_id, known_id)  # fmt: skip
        return errors.INCONSISTENT_TOPIC_ID
    current = ctx.replication.leadership(tp)
    current_epoch = -1 if current is None else current[1]
    if state.leader_epoch < current_epoch or (
        state.leader_epoch == current_epoch
        and not _cache(ctx).told_by_metadata_only(tp, current_epoch)
    ):
        # Kafka: an older epoch than the partition's, and an equal one (the broker already
        # follows this decision). An epoch UpdateMetadata brought first is not the partition's:
        # Kafka keeps it in its metadata cache, and the LeaderAndIsr for it applies.
        return errors.STALE_CONTROLLER_EPOCH
    if ctx.broker_id not in state.replicas:
        return errors.UNKNOWN_TOPIC_OR_PARTITION
    changes.append(_state_change(tp, state, state.partition_epoch))
    return errors.NONE


def _state_change(tp: TP, state: Any, version: int) -> StateChange:
    current = LeaderIsr(state.leader, state.leader_epoch, tuple(state.isr),
                        state.controller_epoch, version)  # fmt: skip
    # Told, not written here: the writer is unknown (as for states read from the store).
    return StateChange(tp, current, current, None, -1, tuple(state.replicas))


# -- UpdateMetadata -----------------------------------------------------------------------------


async def handle_update_metadata(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    error = _fenced(ctx, request, "UpdateMetadata")
    if error:
        return UpdateMetadataResponse(error_code=error)
    cache = _cache(ctx)
    changes: list[StateChange] = []
    ids: dict[str, str] = {}
    deleting: set[str] = set()
    for topic, topic_id, state in _grouped(request, "ungrouped_partition_states", "topic_states"):
        if (known := _topic_id(topic_id)) is not None:
            ids[topic] = known
        if state.leader == LEADER_DURING_DELETE:
            deleting.add(topic)
        else:
            changes.append(_state_change((topic, state.partition_index), state, state.zk_version))
    cache.brokers_live(dict(_addresses(body.live_brokers, ctx.connector.listener)))
    cache.topic_ids_known(ids)
    cache.metadata_states_known(changes)
    for topic in sorted(deleting):
        cache.forget_topic(topic)
    return UpdateMetadataResponse(error_code=errors.NONE)


#: Kafka's ``SecurityProtocol`` ids: before v3 an endpoint names its protocol, not a listener.
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


def _addresses(brokers: Iterable[Any], listener: str) -> Iterator[tuple[int, tuple[str, int]]]:
    """Each live broker's endpoint of the inter-broker ``listener`` (the one followers here
    fetch on), as Kafka's follower finds its leader's."""
    for broker in brokers:
        if broker.v0_host:
            yield broker.id, (broker.v0_host, broker.v0_port)
        for endpoint in broker.endpoints or ():
            name = endpoint.listener or SECURITY_PROTOCOLS.get(endpoint.security_protocol)
            if name == listener:
                yield broker.id, (endpoint.host, endpoint.port)
                break


# -- StopReplica --------------------------------------------------------------------------------


async def handle_stop_replica(ctx: BrokerContext, request: Request) -> Any:
    error = _fenced(ctx, request, "StopReplica")
    if error == CLUSTER_AUTHORIZATION_FAILED:
        # Kafka's getErrorResponse: every partition named, with the error.
        return StopReplicaResponse(error_code=error, partition_errors=[
            StopReplicaPartitionError(topic_name=topic, partition_index=partition,
                                      error_code=error)
            for topic, partition, _, _ in _stop_replica_partitions(request)
        ])  # fmt: skip
    if error:
        return StopReplicaResponse(error_code=error)
    cache = _cache(ctx)
    answers = []
    deleted: set[str] = set()
    for topic, partition, epoch, delete in _stop_replica_partitions(request):
        current = ctx.replication.leadership((topic, partition))
        current_epoch = -1 if current is None else current[1]
        if epoch not in (EPOCH_DURING_DELETE, NO_EPOCH) and epoch < current_epoch:
            code = errors.FENCED_LEADER_EPOCH
        else:
            code = errors.NONE
            if delete and epoch == EPOCH_DURING_DELETE:
                deleted.add(topic)
            elif delete and ctx.logs.drop_partition((topic, partition)):
                # A replica a reassignment took off this broker: its log goes.
                log.info("broker %s: %s-%s stopped and its log deleted (StopReplica from "
                         "controller %s)", ctx.broker_id, topic, partition,
                         request.body.controller_id)  # fmt: skip
        answers.append(StopReplicaPartitionError(topic_name=topic, partition_index=partition,
                                                 error_code=code))  # fmt: skip
    for topic in sorted(deleted):
        cache.forget_topic(topic)
    return StopReplicaResponse(error_code=errors.NONE, partition_errors=answers)


def _stop_replica_partitions(request: Request) -> Iterator[tuple[str, int, int, bool]]:
    """(topic, partition, leader epoch, delete) of each partition, whatever the version."""
    body = request.body
    delete = bool(getattr(body, "delete_partitions", False))
    for p in getattr(body, "ungrouped_partitions", None) or ():
        yield p.topic_name, p.partition_index, NO_EPOCH, delete
    for t in getattr(body, "topics", None) or ():
        for index in t.partition_indexes:
            yield t.name, index, NO_EPOCH, delete
    for t in getattr(body, "topic_states", None) or ():
        for s in t.partition_states:
            yield t.topic_name, s.partition_index, s.leader_epoch, bool(s.delete_partition)
