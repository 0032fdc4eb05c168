"""CreateTopics and DeleteTopics through the engine's topic administration.

CreateTopics: the placement strategy the cluster runs places the replicas (or the request's own
assignment is checked and used), and the answer waits, up to the request's timeout, until the
controller has elected every new partition's leader — as Kafka's controller answers once the
topic is in its metadata.

DeleteTopics queues each topic in ``/admin/delete_topics`` and waits, up to the request's
timeout, until the controller has removed it; a topic still there then is REQUEST_TIMED_OUT
(its deletion goes on), as Kafka answers. The brokers drop a deleted topic's served logs when
they see it gone (see :mod:`coordkit.serve.dataplane.follower`).

A config value that a topic config coordkit serve honours refuses (``retention.ms=soon``,
``min.insync.replicas=0``) is INVALID_CONFIG, and nothing is created, as Kafka's controller
validates it (``LogConfig.validate``).

As Kafka 4's controller answers: a name given twice in one request is refused once
(INVALID_REQUEST) and neither created nor deleted; a refused topic's result has no topic id
and -1 partitions and replication factor; a created one (or, validating only, one that would
be) its topic id. DeleteTopics v6 names each topic by name or by id (Kafka's
``ControllerApis.deleteTopics``): both, neither, or one given twice is INVALID_REQUEST, an unknown
id UNKNOWN_TOPIC_ID, and every result carries the topic's id.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from coordkit.engine.cluster_id import kafka_uuid, new_kafka_uuid
from coordkit.engine.errors import (
    InvalidReplicaAssignmentError,
    TopicExistsError,
    UnknownTopicError,
)
from coordkit.engine.states import TP, state_path
from coordkit.engine.topics import TopicAdmin
from coordkit.errors import CoordkitError, LayoutError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.configs.describe import created_topic_configs
from coordkit.serve.authorization import TOPIC_AUTHORIZATION_FAILED, allowed, cluster_allowed
from coordkit.serve.classes import nested
from coordkit.serve.config_catalogue import TOPIC_KEYS, InvalidConfigValueError
from coordkit.serve.context import BrokerContext
from coordkit.serve.topic_ids import read_topic_ids
from coordkit.store import MetadataStore
from coordkit.store.tree import children

log = logging.getLogger("coordkit.serve")

Response = messages.CreateTopicsResponse
Result = nested(Response, "CreatableTopicResult")
DeleteResponse = messages.DeleteTopicsResponse
DeleteResult = nested(DeleteResponse, "DeletableTopicResult")
#: How often an answer that waits for the controller looks at the store.
POLL_SECONDS = 0.02
#: Kafka's message for a name given twice in one request (its controller's words).
DUPLICATE_NAME = "Duplicate topic name."
DUPLICATE_ID = "Duplicate topic id."
NEITHER = "Neither topic name nor id were specified."
BOTH = "You may not specify both topic name and topic id."
NAME_OF_AN_ID_GIVEN = "The provided topic name maps to an ID that was already supplied."
#: DeleteTopics names topics by name or id from v6.
DELETE_BY_ID_VERSION = 6
#: Kafka's ``Uuid.ZERO_UUID``: a result without a topic.
NO_TOPIC_ID = uuid.UUID(int=0)


def twice_named(names: Iterable[str]) -> set[str]:
    """The names a request gives more than once."""
    return {name for name, count in Counter(names).items() if count > 1}


def _check_brokers(assignment: Mapping[int, Sequence[int]], registered: set[int]) -> None:
    """An explicit assignment may name registered brokers only (Kafka's controller)."""
    unknown = sorted({b for replicas in assignment.values() for b in replicas} - registered)
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"the assignment names brokers {unknown}, which are not registered "
            f"(registered: {sorted(registered)})"
        )


def _check_collision(name: str, existing: Iterable[str]) -> None:
    """Kafka's ``Topic.hasCollision``: two names equal but for ``.`` against ``_`` would share
    their metric names, so the second is refused."""
    folded = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == folded:
            raise LayoutError(
                f"{layout.BROKER_TOPICS}/{name}",
                f"topic {name!r} collides with existing topic {other!r}",
                field="topic",
            )


def _create(ctx: BrokerContext, topic: Any, validate_only: bool, existing: set[str]) -> Any:
    """Create (or, validating only, place) one topic of the ``existing``; its result entry."""
    # Kafka's KafkaApis: Create on the cluster, or else on the topic.
    if not cluster_allowed(ctx, AclOperation.CREATE) and not allowed(
        ctx, AclOperation.CREATE, ResourceType.TOPIC, topic.name
    ):
        return _refused(topic.name, TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    partitions = (
        ctx.settings.default_partitions if topic.num_partitions == -1 else topic.num_partitions
    )
    factor = (
        ctx.settings.default_replication_factor
        if topic.replication_factor == -1
        else topic.replication_factor
    )
    assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments or []}
    result = Result(name=topic.name, num_partitions=partitions, replication_factor=factor)
    if assignment:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return _refused(
                topic.name,
                errors.INVALID_REQUEST,
                "both an assignment and a partition count or replication factor were given",
            )
        result.num_partitions = len(assignment)
        result.replication_factor = len(next(iter(assignment.values())))
    config = {c.name: c.value for c in topic.configs or [] if c.value is not None}
    invalid = _invalid_config(config)
    if invalid is not None:
        return _refused(topic.name, errors.INVALID_CONFIG, invalid)
    admin: TopicAdmin = ctx.admin
    try:
        if assignment:
            _check_brokers(assignment, {b.id for b in admin.brokers()})
        if topic.name not in existing:
            _check_collision(topic.name, existing)
        if validate_only:
            if admin.store.exists(layout.topic_path(topic.name)) is not None:
                raise TopicExistsError(f"topic {topic.name!r} already exists")
            if not assignment:
                admin.placement.place(
                    admin.brokers(), partitions, factor, rng=admin.rng, topic=topic.name
                )
            # Kafka's controller answers the id the topic would get.
            result.topic_id = kafka_uuid(new_kafka_uuid())
        else:
            created = admin.create_topic(
                topic.name,
                partitions,
                factor,
                config=config,
                assignment=assignment or None,
            )
            if created.topic_id is not None:
                result.topic_id = kafka_uuid(created.topic_id)
                ctx.topic_ids.add(topic.name, created.topic_id)
        # CreateTopics v5+ answers the new topic's configs, as DescribeConfigs would.
        result.configs = created_topic_configs(ctx, config, nested(Result, "CreatableTopicConfigs"))
    except TopicExistsError as exc:
        # Kafka's controller's message (the store path the engine names is coordkit's own).
        return _refused(topic.name, errors.topic_creation_error(exc),
                        f"Topic '{topic.name}' already exists.")  # fmt: skip
    except (CoordkitError, ValueError) as exc:
        return _refused(topic.name, errors.topic_creation_error(exc), str(exc))
    return result


def _invalid_config(config: Mapping[str, str]) -> str | None:
    """Kafka's message for the first name of ``config`` that is not one of Kafka's topic
    configs, or value its validator refuses (Kafka's ``LogConfig.validate``), if any."""
    for name, text in config.items():
        key = TOPIC_KEYS.get(name)
        if key is None:
            return f"Unknown topic config name: {name}"
        try:
            key.parse(text)
        except InvalidConfigValueError as exc:
            return str(exc)
    return None


def _refused(name: str, code: int, message: str) -> Any:
    """A refused topic's result: no topic id, no partition count or replication factor."""
    return Result(name=name, topic_id=NO_TOPIC_ID, error_code=code, error_message=message,
                  num_partitions=-1, replication_factor=-1)  # fmt: skip


def wait_for_states(store: MetadataStore, tps: list[TP], timeout: float) -> None:
    """Until every partition of ``tps`` has a state (the controller elected its leader), or
    timeout."""
    paths = [state_path(tp) for tp in tps]
    deadline = time.monotonic() + timeout
    while paths and time.monotonic() < deadline:
        results = store.get_many(paths)
        paths = [p for p, r in zip(paths, results, strict=True) if isinstance(r, Exception)]
        if paths:
            time.sleep(POLL_SECONDS)


def _create_all(ctx: BrokerContext, request: Request) -> list[Any]:
    body = request.body
    twice = twice_named(topic.name for topic in body.topics)
    existing = set(children(ctx.broker.store, layout.BROKER_TOPICS))
    results = [
        _create(ctx, topic, bool(body.validate_only), existing)
        for topic in body.topics
        if topic.name not in twice
    ]
    results += [_refused(name, errors.INVALID_REQUEST, DUPLICATE_NAME) for name in sorted(twice)]
    if not body.validate_only:
        done = [(r.name, p) for r in results if r.error_code == errors.NONE
                for p in range(r.num_partitions)]  # fmt: skip
        wait_for_states(ctx.broker.store, done, max(body.timeout_ms, 0) / 1000)
    return results


async def handle_create_topics(ctx: BrokerContext, request: Request) -> Any:
    results = await ctx.blocking(lambda: _create_all(ctx, request))
    done = "would create" if request.body.validate_only else "created"
    for result in results:
        if result.error_code == errors.NONE:
            log.info("broker %s: %s topic %r (%s partitions, replication factor %s)", ctx.broker_id,
                     done, result.name, result.num_partitions, result.replication_factor)  # fmt: skip
    return Response(throttle_time_ms=0, topics=results)


def _queue_deletion(ctx: BrokerContext, name: str) -> Any:
    """Queue one topic for deletion; its result entry (NONE: queued)."""
    result = DeleteResult(name=name, error_code=errors.NONE)
    if not allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
        result.error_code = TOPIC_AUTHORIZATION_FAILED  # Kafka's KafkaApis: Delete on the topic
        return result
    if not ctx.broker.config.delete_topic_enable:
        result.error_code = errors.TOPIC_DELETION_DISABLED
        result.error_message = "topic deletion is disabled (delete.topic.enable=false)"
        return result
    try:
        ctx.admin.delete_topic(name)
    except (UnknownTopicError, LayoutError) as exc:
        result.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
        result.error_message = str(exc)
    return result


def _wait_until_deleted(store: MetadataStore, names: list[str], timeout: float) -> set[str]:
    """Until no topic of ``names`` has its assignment or its deletion request left (the
    controller deleted it), or timeout; the topics still there."""
    paths = {name: (layout.topic_path(name), layout.delete_topic_path(name)) for name in names}
    deadline = time.monotonic() + timeout
    while True:
        listed = [path for name in sorted(paths) for path in paths[name]]
        found = dict(zip(listed, store.get_many(listed), strict=True))
        paths = {
            name: pair
            for name, pair in paths.items()
            if any(not isinstance(found[p], StoreError) for p in pair)
        }
        if not paths or time.monotonic() >= deadline:
            return set(paths)
        time.sleep(POLL_SECONDS)


def _by_name_or_id(ctx: BrokerContext, body: Any) -> tuple[list[Any], dict[str, uuid.UUID]]:
    """DeleteTopics v6's topics, checked as Kafka's controller checks them: the refused ones'
    results, and the topics to delete (name → id)."""
    refused: list[Any] = []
    names: list[str] = []
    ids: list[uuid.UUID] = []
    for topic in body.topics:
        if topic.name is None and not topic.topic_id.int:
            refused.append(_delete_refused(None, NO_TOPIC_ID, errors.INVALID_REQUEST, NEITHER))
        elif topic.name is None:
            ids.append(topic.topic_id)
        elif topic.topic_id.int:
            refused.append(
                _delete_refused(topic.name, topic.topic_id, errors.INVALID_REQUEST, BOTH)
            )
        else:
            names.append(topic.name)
    twice_ids = {i for i, n in Counter(ids).items() if n > 1}
    twice = twice_named(names)
    refused += [_delete_refused(n, NO_TOPIC_ID, errors.INVALID_REQUEST, DUPLICATE_NAME)
                for n in sorted(twice)]  # fmt: skip
    refused += [_delete_refused(None, i, errors.INVALID_REQUEST, DUPLICATE_ID)
                for i in sorted(twice_ids)]  # fmt: skip
    store = ctx.broker.store
    existing = set(children(store, layout.BROKER_TOPICS))
    known = {name: kafka_uuid(text) for name, text in read_topic_ids(store).items()}
    by_id = {topic_id: name for name, topic_id in known.items() if name in existing}
    wanted: dict[uuid.UUID, str] = {}
    for topic_id in dict.fromkeys(ids):
        if topic_id in twice_ids:
            continue
        if topic_id in by_id:
            wanted[topic_id] = by_id[topic_id]
        else:
            refused.append(_delete_refused(None, topic_id, errors.UNKNOWN_TOPIC_ID,
                                           f"topic id {topic_id} does not exist"))  # fmt: skip
    without_id: list[str] = []
    for name in names:
        if name in twice:
            continue
        topic_id = known.get(name, NO_TOPIC_ID)
        if name not in existing:
            refused.append(_delete_refused(name, NO_TOPIC_ID, errors.UNKNOWN_TOPIC_OR_PARTITION,
                                           f"topic {name!r} does not exist"))  # fmt: skip
        elif not topic_id.int:
            without_id.append(name)  # not given one yet by the controller
        elif topic_id in twice_ids or topic_id in wanted:
            # As Kafka: the topic named both ways is refused once, under its name.
            wanted.pop(topic_id, None)
            refused.append(
                _delete_refused(name, topic_id, errors.INVALID_REQUEST, NAME_OF_AN_ID_GIVEN)
            )
        else:
            wanted[topic_id] = name
    chosen = {name: topic_id for topic_id, name in wanted.items()}
    chosen.update((name, NO_TOPIC_ID) for name in without_id)
    return refused, chosen


def _delete_refused(name: str | None, topic_id: uuid.UUID, code: int, message: str) -> Any:
    return DeleteResult(name=name, topic_id=topic_id, error_code=code, error_message=message)


def _delete_all(ctx: BrokerContext, request: Request) -> list[Any]:
    body = request.body
    if request.version >= DELETE_BY_ID_VERSION:
        results, chosen = _by_name_or_id(ctx, body)
        for name, topic_id in chosen.items():
            result = _queue_deletion(ctx, name)
            result.topic_id = topic_id
            results.append(result)
    else:
        names = list(body.topic_names or [])
        twice = twice_named(names)
        results = [_queue_deletion(ctx, name) for name in names if name not in twice]
        results += [
            DeleteResult(name=name, error_code=errors.INVALID_REQUEST,
                         error_message=DUPLICATE_NAME)
            for name in sorted(twice)
        ]  # fmt: skip
    queued = [r for r in results if r.error_code == errors.NONE]
    if queued:
        timeout = max(body.timeout_ms, 0) / 1000
        left = _wait_until_deleted(ctx.broker.store, [r.name for r in queued], timeout)
        for result in queued:
            if result.name in left:
                result.error_code = errors.REQUEST_TIMED_OUT
                result.error_message = (
                    f"not deleted within {body.timeout_ms} ms; the deletion goes on"
                )
    return results


async def handle_delete_topics(ctx: BrokerContext, request: Request) -> Any:
    """DeleteTopics v1-6 (v6 names topics by name or by id)."""
    results = await ctx.blocking(lambda: _delete_all(ctx, request))
    for result in results:
        if result.error_code == errors.NONE:
            log.info("broker %s: deleted topic %r", ctx.broker_id, result.name)
    return DeleteResponse(throttle_time_ms=0, responses=results)
