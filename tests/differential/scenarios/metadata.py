"""Scenarios of ApiVersions, Metadata and topic administration (CreateTopics, DeleteTopics,
CreatePartitions).

Versions: ApiVersions v5, Metadata v13, CreateTopics v7, DeleteTopics v6, CreatePartitions v3 —
the highest both Kafka 4.4 and coordkit serve answer (DeleteTopics v6 by name here; by id in
scenarios/topic_ids.py).
"""

from __future__ import annotations

import uuid
from typing import Any

from coordkit.protocol import APIS, messages
from differential import requests as rq
from differential.harness import Side, scenario

METADATA = {"Metadata": rq.METADATA}
CREATE = {"CreateTopics": rq.CREATE_TOPICS, "Metadata": rq.METADATA}
DELETE = {"DeleteTopics": rq.DELETE_TOPICS, "Metadata": rq.METADATA}
PARTITIONS = {"CreatePartitions": rq.CREATE_PARTITIONS, "Metadata": rq.METADATA}
#: A topic id no cluster has (fixed: seeded, so both sides are asked the same).
UNKNOWN_TOPIC_ID = uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF)


def own_topics(response: Any, side: Side) -> Any:
    """A Metadata response with only the scenario's own topics (both clusters are shared by
    every scenario of the module)."""
    response.topics = [t for t in response.topics if (t.name or "").startswith(side.prefix)]
    return response


def topics_only(response: Any) -> Any:
    """What a Metadata response says about topics, by name (brokers and controller have
    scenarios of their own)."""
    return sorted(response.topics, key=lambda t: t.name or "")


def shape(topic: Any) -> dict[str, Any]:
    """A topic's partition count and replication factor: what is the same on both sides for a
    topic placed by the broker (placement differs between clusters, by design)."""
    return {
        "error_code": topic.error_code,
        "name": topic.name,
        "partitions": len(topic.partitions),
        "replication": sorted({len(p.replica_nodes) for p in topic.partitions}),
    }


# -- ApiVersions ---------------------------------------------------------------------------------


@scenario("metadata.api_versions_ranges", versions={"ApiVersions": rq.API_VERSIONS})
def api_versions_ranges(side: Side) -> list[Any]:
    """ApiVersions v5: the version range of every api coordkit's codec knows (an api the broker
    does not serve is recorded as absent)."""
    answer = side.call(0, messages.ApiVersionsRequest(client_software_name="coordkit-differential",
                                                      client_software_version="1.0"), rq.API_VERSIONS)  # fmt: skip
    served = {key.api_key: (key.min_version, key.max_version) for key in answer.api_keys}
    return [
        answer.error_code,
        {name: served.get(api.key, "absent") for name, api in sorted(APIS.items())},
    ]


@scenario("metadata.api_versions_features", versions={"ApiVersions": rq.API_VERSIONS})
def api_versions_features(side: Side) -> list[Any]:
    """ApiVersions v5's tagged fields: the supported and finalized features (KRaft's
    ``metadata.version`` and others) and their epoch."""
    answer = side.call(0, messages.ApiVersionsRequest(client_software_name="coordkit-differential",
                                                      client_software_version="1.0"), rq.API_VERSIONS)  # fmt: skip
    return [
        sorted(f.name for f in answer.supported_features),
        sorted(f.name for f in answer.finalized_features),
        answer.finalized_features_epoch >= 0,
    ]


@scenario("metadata.api_versions_bad_client_software", versions={"ApiVersions": rq.API_VERSIONS})
def api_versions_bad_client_software(side: Side) -> list[Any]:
    """ApiVersions v5 with a client software name outside Kafka's pattern
    (``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``): INVALID_REQUEST, with the ranges all the
    same (a client may retry without the name)."""
    answer = side.call(0, messages.ApiVersionsRequest(client_software_name="bad name!",
                                                      client_software_version="1.0"), rq.API_VERSIONS)  # fmt: skip
    return [answer.error_code, len(answer.api_keys) > 0]


# -- Metadata ------------------------------------------------------------------------------------


@scenario("metadata.missing_topic", versions=METADATA)
def missing_topic(side: Side) -> list[Any]:
    """A topic nobody created, auto-creation not allowed by the request:
    UNKNOWN_TOPIC_OR_PARTITION, no partitions, zero topic id."""
    return [topics_only(side.call(0, rq.metadata([side.topic()]), rq.METADATA))]


@scenario("metadata.missing_topic_auto_created", versions=METADATA)
def missing_topic_auto_created(side: Side) -> list[Any]:
    """A missing topic, auto-creation allowed (both clusters run with
    ``auto.create.topics.enable=true``; coordkit's default is false): the first answer, then
    the topic once its leader is elected (``num.partitions`` 1, ``default.replication.factor``
    1)."""
    name = side.topic()
    first = side.call(0, rq.metadata([name], auto_create=True), rq.METADATA).topics[0]
    side.wait_topic_ready(name, 1)
    later = side.call(0, rq.metadata([name]), rq.METADATA).topics[0]
    return [{"error_code": first.error_code, "partitions": len(first.partitions)}, shape(later)]


@scenario("metadata.auto_create_invalid_name", versions=METADATA)
def auto_create_invalid_name(side: Side) -> list[Any]:
    """Auto-creation of a name Kafka refuses (a space, an exclamation mark):
    INVALID_TOPIC_EXCEPTION, nothing created."""
    name = side.topic("bad name!")
    first = side.call(0, rq.metadata([name], auto_create=True), rq.METADATA)
    again = side.call(1, rq.metadata([name]), rq.METADATA)
    return [topics_only(first), topics_only(again)]


@scenario("metadata.all_topics", versions=METADATA)
def all_topics(side: Side) -> list[Any]:
    """Metadata with a null topic list: every topic (the scenario's two kept), each with its
    partitions, leaders, replicas and ISR at the positions the assignment gave."""
    side.create_topic(side.topic("a"), partitions=2, replication=2)
    side.create_topic(side.topic("b"), partitions=1, replication=3)
    return [topics_only(own_topics(side.call(1, rq.metadata(None), rq.METADATA), side))]


@scenario("metadata.no_topics", versions=METADATA)
def no_topics(side: Side) -> list[Any]:
    """Metadata with an empty topic list (v1+): brokers only, no topic."""
    return [side.call(0, rq.metadata([]), rq.METADATA).topics]


@scenario("metadata.topic_partitions", versions=METADATA)
def topic_partitions(side: Side) -> list[Any]:
    """A topic of three partitions, replication factor 2: each partition's leader, leader
    epoch, replicas, ISR and offline replicas, asked of every broker."""
    name = side.topic()
    side.create_topic(name, partitions=3, replication=2)
    return [topics_only(side.call(i, rq.metadata([name]), rq.METADATA)) for i in range(3)]


@scenario("metadata.known_and_missing", versions=METADATA)
def known_and_missing(side: Side) -> list[Any]:
    """One request naming a topic that exists and one that does not."""
    name = side.topic("known")
    side.create_topic(name)
    return [topics_only(side.call(0, rq.metadata([name, side.topic("missing")]), rq.METADATA))]


@scenario("metadata.deleted_topic", versions={**METADATA, **DELETE})
def deleted_topic(side: Side) -> list[Any]:
    """A topic deleted (and gone from every broker's metadata): UNKNOWN_TOPIC_OR_PARTITION."""
    name = side.topic()
    side.create_topic(name)
    deleted = side.call(0, rq.delete_topics(name), rq.DELETE_TOPICS)
    side.wait_topic_gone(name)
    return [deleted, topics_only(side.call(2, rq.metadata([name]), rq.METADATA))]


@scenario("metadata.internal_topic", versions=METADATA)
def internal_topic(side: Side) -> list[Any]:
    """``__consumer_offsets`` (created by the fixture's first coordinator lookup): internal,
    ``offsets.topic.num.partitions`` partitions of ``offsets.topic.replication.factor``."""
    topic = side.call(0, rq.metadata(["__consumer_offsets"]), rq.METADATA).topics[0]
    return [shape(topic), topic.is_internal]


@scenario("metadata.unknown_topic_id", versions=METADATA)
def unknown_topic_id(side: Side) -> list[Any]:
    """Metadata v13 asking for a topic by an id no topic has (name null): UNKNOWN_TOPIC_ID,
    with the id and a null name."""
    Request: Any = messages.MetadataRequest
    request = Request(
        topics=[Request.MetadataRequestTopic(topic_id=UNKNOWN_TOPIC_ID, name=None)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return [topics_only(side.call(0, request, rq.METADATA))]


@scenario("metadata.topic_authorized_operations", versions=METADATA)
def topic_authorized_operations(side: Side) -> list[Any]:
    """Metadata asking for each topic's authorized operations: with no authorizer configured,
    every topic operation (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
    ALTER_CONFIGS: 3576)."""
    name = side.topic()
    side.create_topic(name)
    request = rq.metadata([name])
    request.include_topic_authorized_operations = True
    return [[t.topic_authorized_operations for t in side.call(0, request, rq.METADATA).topics]]


@scenario("metadata.brokers", versions=METADATA)
def brokers(side: Side) -> list[Any]:
    """The broker list: ids by position, hosts and ports (placeholders), racks (the Kafka
    cluster's brokers have racks a, b, a)."""
    return [side.call(0, rq.metadata([]), rq.METADATA).brokers]


@scenario("metadata.controller_and_cluster_id", versions=METADATA)
def controller_and_cluster_id(side: Side) -> list[Any]:
    """Every broker names a live broker as controller (KRaft brokers name a random live
    broker, so only that is compared) and the same, non-null cluster id."""
    answers = [side.call(i, rq.metadata([]), rq.METADATA) for i in range(3)]
    return [
        [a.controller_id in side.broker_ids for a in answers],
        len({a.cluster_id for a in answers}),
        answers[0].cluster_id is not None,
    ]


# -- CreateTopics ---------------------------------------------------------------------------------


def created(side: Side, *topics: Any, validate_only: bool = False) -> Any:
    """The CreateTopics answer's per-topic results, each topic's configs left out (the
    scenario ``topics.create_configs`` records them)."""
    answer = side.call(0, rq.create_topics(*topics, validate_only=validate_only),
                       rq.CREATE_TOPICS)  # fmt: skip
    for result in answer.topics:
        result.configs = []
    return answer.topics


@scenario("topics.create", versions=CREATE)
def create(side: Side) -> list[Any]:
    """CreateTopics of two partitions, replication factor 3, placed by the broker: the result
    (topic id, counts), then the topic's shape in metadata."""
    name = side.topic()
    results = created(side, rq.creatable(name, 2, 3))
    side.wait_topic_ready(name, 2)
    return [results, shape(side.call(1, rq.metadata([name]), rq.METADATA).topics[0])]


@scenario("topics.create_configs", versions=CREATE)
def create_configs(side: Side) -> list[Any]:
    """CreateTopics v5+ answers the new topic's configs: which names, and the one set by the
    request (``retention.ms``) with its value and source."""
    name = side.topic()
    answer = side.call(0, rq.create_topics(rq.creatable(name, 1, 1,
                                                        configs={"retention.ms": "3600000"})),
                       rq.CREATE_TOPICS)  # fmt: skip
    configs = {c.name: c for c in answer.topics[0].configs}
    retention = configs.get("retention.ms")
    return [
        len(configs) > 0,
        None if retention is None else (retention.value, retention.config_source),
    ]


@scenario("topics.create_existing", versions=CREATE)
def create_existing(side: Side) -> list[Any]:
    """CreateTopics of a topic that exists: TOPIC_ALREADY_EXISTS."""
    name = side.topic()
    side.create_topic(name)
    return [created(side, rq.creatable(name, 1, 1))]


@scenario("topics.create_invalid_characters", versions=CREATE)
def create_invalid_characters(side: Side) -> list[Any]:
    """Names with characters outside ``[a-zA-Z0-9._-]``: INVALID_TOPIC_EXCEPTION."""
    return [created(side, rq.creatable(side.topic("a b")), rq.creatable(side.topic("a/b")),
                    rq.creatable(side.topic("a!")))]  # fmt: skip


@scenario("topics.create_dot_names", versions=CREATE)
def create_dot_names(side: Side) -> list[Any]:
    """``.`` and ``..``: INVALID_TOPIC_EXCEPTION."""
    return [created(side, rq.creatable("."), rq.creatable(".."))]


@scenario("topics.create_long_name", versions=CREATE)
def create_long_name(side: Side) -> list[Any]:
    """A name of 250 characters (Kafka allows 249): INVALID_TOPIC_EXCEPTION; 249 is fine
    (validated only)."""
    long = side.topic("x").ljust(250, "x")
    answer = created(side, rq.creatable(long))
    fits = created(side, rq.creatable(long[:249]), validate_only=True)
    return [answer, fits]


@scenario("topics.create_empty_name", versions=CREATE)
def create_empty_name(side: Side) -> list[Any]:
    """An empty name: INVALID_TOPIC_EXCEPTION."""
    return [created(side, rq.creatable(""))]


@scenario("topics.create_colliding_name", versions=CREATE)
def create_colliding_name(side: Side) -> list[Any]:
    """A name that differs from an existing topic's only by ``.`` against ``_`` (they collide
    in metric names): Kafka refuses it with INVALID_TOPIC_EXCEPTION."""
    side.create_topic(side.topic("a.b"))
    return [created(side, rq.creatable(side.topic("a_b")))]


@scenario("topics.create_replication_above_brokers", versions=CREATE)
def create_replication_above_brokers(side: Side) -> list[Any]:
    """Replication factor 4 on three brokers: INVALID_REPLICATION_FACTOR."""
    return [created(side, rq.creatable(side.topic(), 1, 4))]


@scenario("topics.create_zero_replication", versions=CREATE)
def create_zero_replication(side: Side) -> list[Any]:
    """Replication factor 0, and -2: INVALID_REPLICATION_FACTOR."""
    return [created(side, rq.creatable(side.topic("zero"), 1, 0),
                    rq.creatable(side.topic("negative"), 1, -2))]  # fmt: skip


@scenario("topics.create_zero_partitions", versions=CREATE)
def create_zero_partitions(side: Side) -> list[Any]:
    """Zero partitions: INVALID_PARTITIONS."""
    return [created(side, rq.creatable(side.topic(), 0, 1))]


@scenario("topics.create_negative_partitions", versions=CREATE)
def create_negative_partitions(side: Side) -> list[Any]:
    """-2 partitions (-1 means the broker's default): INVALID_PARTITIONS."""
    return [created(side, rq.creatable(side.topic(), -2, 1))]


@scenario("topics.create_broker_defaults", versions=CREATE)
def create_broker_defaults(side: Side) -> list[Any]:
    """Partitions and replication factor -1: the broker's ``num.partitions`` and
    ``default.replication.factor`` (1 and 1 on both clusters)."""
    name = side.topic()
    results = created(side, rq.creatable(name, -1, -1))
    side.wait_topic_ready(name, 1)
    return [results, shape(side.call(0, rq.metadata([name]), rq.METADATA).topics[0])]


@scenario("topics.create_validate_only", versions=CREATE)
def create_validate_only(side: Side) -> list[Any]:
    """validate_only: the answer a creation would get, and no topic afterwards."""
    name = side.topic()
    results = created(side, rq.creatable(name, 3, 2), validate_only=True)
    return [results, topics_only(side.call(1, rq.metadata([name]), rq.METADATA))]


@scenario("topics.create_validate_only_invalid", versions=CREATE)
def create_validate_only_invalid(side: Side) -> list[Any]:
    """validate_only with an existing topic, a bad name and a bad replication factor: the
    same errors a creation gets."""
    name = side.topic()
    side.create_topic(name)
    return [created(side, rq.creatable(name), rq.creatable(side.topic("a b")),
                    rq.creatable(side.topic("rf"), 1, 4), validate_only=True)]  # fmt: skip


@scenario("topics.create_assignment", versions=CREATE)
def create_assignment(side: Side) -> list[Any]:
    """An explicit assignment: the replicas, in the order given, and the first one leads."""
    name = side.topic()
    b = side.broker_id
    results = created(
        side, rq.creatable(name, -1, -1, assignment={0: [b(2), b(0)], 1: [b(1), b(2)]})
    )
    side.wait_topic_ready(name, 2)
    return [results, topics_only(side.call(0, rq.metadata([name]), rq.METADATA))]


@scenario("topics.create_assignment_gap", versions=CREATE)
def create_assignment_gap(side: Side) -> list[Any]:
    """An assignment of partitions 0 and 2 (no 1): INVALID_REPLICA_ASSIGNMENT."""
    b = side.broker_id
    return [created(side, rq.creatable(side.topic(), -1, -1,
                                       assignment={0: [b(0)], 2: [b(1)]}))]  # fmt: skip


@scenario("topics.create_assignment_uneven", versions=CREATE)
def create_assignment_uneven(side: Side) -> list[Any]:
    """Partitions with different replica counts: INVALID_REPLICA_ASSIGNMENT."""
    b = side.broker_id
    return [created(side, rq.creatable(side.topic(), -1, -1,
                                       assignment={0: [b(0), b(1)], 1: [b(1)]}))]  # fmt: skip


@scenario("topics.create_assignment_duplicate_broker", versions=CREATE)
def create_assignment_duplicate_broker(side: Side) -> list[Any]:
    """A broker named twice in one partition's replicas: INVALID_REPLICA_ASSIGNMENT."""
    b = side.broker_id
    return [created(side, rq.creatable(side.topic(), -1, -1,
                                       assignment={0: [b(0), b(0)]}))]  # fmt: skip


@scenario("topics.create_assignment_unknown_broker", versions=CREATE)
def create_assignment_unknown_broker(side: Side) -> list[Any]:
    """A replica on a broker id that is not registered: INVALID_REPLICA_ASSIGNMENT."""
    b = side.broker_id
    return [created(side, rq.creatable(side.topic(), -1, -1,
                                       assignment={0: [b(0), 99]}))]  # fmt: skip


@scenario("topics.create_assignment_and_count", versions=CREATE)
def create_assignment_and_count(side: Side) -> list[Any]:
    """An assignment together with a partition count: INVALID_REQUEST."""
    b = side.broker_id
    return [created(side, rq.creatable(side.topic(), 1, -1, assignment={0: [b(0)]}))]


@scenario("topics.create_twice_in_one_request", versions=CREATE, compare_messages=True)
def create_twice_in_one_request(side: Side) -> list[Any]:
    """One name twice in one request: refused once, INVALID_REQUEST with Kafka's message, and
    no topic."""
    name = side.topic()
    results = created(side, rq.creatable(name), rq.creatable(name))
    return [results, topics_only(side.call(0, rq.metadata([name]), rq.METADATA))]


@scenario("topics.create_unknown_config", versions=CREATE)
def create_unknown_config(side: Side) -> list[Any]:
    """A config name Kafka does not know: INVALID_CONFIG, and no topic."""
    name = side.topic()
    results = created(side, rq.creatable(name, configs={"no.such.config": "1"}))
    return [results, topics_only(side.call(0, rq.metadata([name]), rq.METADATA))]


@scenario("topics.create_invalid_config_value", versions=CREATE)
def create_invalid_config_value(side: Side) -> list[Any]:
    """A known config with a value of the wrong type (``retention.ms=soon``):
    INVALID_CONFIG."""
    return [created(side, rq.creatable(side.topic(), configs={"retention.ms": "soon"}))]


@scenario("topics.create_mixed", versions=CREATE)
def create_mixed(side: Side) -> list[Any]:
    """One request, three topics: one created, one with a bad name, one with too many
    replicas; each gets its own answer."""
    name = side.topic("good")
    results = created(
        side, rq.creatable(name, 1, 1), rq.creatable(side.topic("a b")),
        rq.creatable(side.topic("rf"), 1, 5),
    )  # fmt: skip
    side.wait_topic_ready(name, 1)
    return [results]


# -- DeleteTopics ------------------------------------------------------------------------------


@scenario("topics.delete", versions=DELETE)
def delete(side: Side) -> list[Any]:
    """DeleteTopics of an existing topic: NONE."""
    name = side.topic()
    side.create_topic(name)
    return [side.call(0, rq.delete_topics(name), rq.DELETE_TOPICS).responses]


@scenario("topics.delete_missing", versions=DELETE)
def delete_missing(side: Side) -> list[Any]:
    """DeleteTopics of a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION."""
    return [side.call(0, rq.delete_topics(side.topic()), rq.DELETE_TOPICS).responses]


@scenario("topics.delete_twice_in_one_request", versions=DELETE, compare_messages=True)
def delete_twice_in_one_request(side: Side) -> list[Any]:
    """One name twice in one DeleteTopics request: refused once, INVALID_REQUEST with
    Kafka's message, and not deleted."""
    name = side.topic()
    side.create_topic(name)
    return [side.call(0, rq.delete_topics(name, name), rq.DELETE_TOPICS).responses]


@scenario("topics.delete_then_create", versions={**DELETE, **CREATE})
def delete_then_create(side: Side) -> list[Any]:
    """A topic deleted and created again under the same name: a new topic id, an empty log."""
    name = side.topic()
    side.create_topic(name)
    before = side.call(0, rq.metadata([name]), rq.METADATA).topics[0].topic_id
    side.call(0, rq.delete_topics(name), rq.DELETE_TOPICS)
    side.wait_topic_gone(name)
    side.create_topic(name)
    after = side.call(0, rq.metadata([name]), rq.METADATA).topics[0].topic_id
    return [before != after, side.latest_offset(name, 0)]


# -- CreatePartitions -------------------------------------------------------------------------


def partitions_result(side: Side, request: Any) -> Any:
    return side.call(0, request, rq.CREATE_PARTITIONS).results


@scenario("topics.create_partitions", versions=PARTITIONS)
def create_partitions(side: Side) -> list[Any]:
    """One partition grown to three (placed by the broker): NONE, and three in metadata."""
    name = side.topic()
    side.create_topic(name, partitions=1, replication=2)
    results = partitions_result(side, rq.create_partitions(name, 3))
    side.wait_topic_ready(name, 3)
    return [results, shape(side.call(0, rq.metadata([name]), rq.METADATA).topics[0])]


@scenario("topics.create_partitions_assigned", versions=PARTITIONS)
def create_partitions_assigned(side: Side) -> list[Any]:
    """Two partitions added with an explicit assignment: the replicas as given."""
    name = side.topic()
    side.create_topic(name, partitions=1, replication=2)
    b = side.broker_id
    results = partitions_result(side, rq.create_partitions(name, 3, [[b(2), b(1)], [b(1), b(0)]]))
    side.wait_topic_ready(name, 3)
    return [results, topics_only(side.call(0, rq.metadata([name]), rq.METADATA))]


@scenario("topics.create_partitions_decrease", versions=PARTITIONS)
def create_partitions_decrease(side: Side) -> list[Any]:
    """Three partitions asked down to two: INVALID_PARTITIONS."""
    name = side.topic()
    side.create_topic(name, partitions=3, replication=1)
    return [partitions_result(side, rq.create_partitions(name, 2))]


@scenario("topics.create_partitions_same_count", versions=PARTITIONS)
def create_partitions_same_count(side: Side) -> list[Any]:
    """Two partitions asked to be two: INVALID_PARTITIONS."""
    name = side.topic()
    side.create_topic(name, partitions=2, replication=1)
    return [partitions_result(side, rq.create_partitions(name, 2))]


@scenario("topics.create_partitions_missing_topic", versions=PARTITIONS)
def create_partitions_missing_topic(side: Side) -> list[Any]:
    """A topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION."""
    return [partitions_result(side, rq.create_partitions(side.topic(), 3))]


@scenario("topics.create_partitions_wrong_assignment_count", versions=PARTITIONS)
def create_partitions_wrong_assignment_count(side: Side) -> list[Any]:
    """Two partitions added but one assignment given: INVALID_REPLICA_ASSIGNMENT."""
    name = side.topic()
    side.create_topic(name, partitions=1, replication=1)
    b = side.broker_id
    return [partitions_result(side, rq.create_partitions(name, 3, [[b(0)]]))]


@scenario("topics.create_partitions_unknown_broker", versions=PARTITIONS)
def create_partitions_unknown_broker(side: Side) -> list[Any]:
    """A new partition assigned to a broker id that is not registered:
    INVALID_REPLICA_ASSIGNMENT."""
    name = side.topic()
    side.create_topic(name, partitions=1, replication=1)
    return [partitions_result(side, rq.create_partitions(name, 2, [[99]]))]


@scenario("topics.create_partitions_validate_only", versions=PARTITIONS)
def create_partitions_validate_only(side: Side) -> list[Any]:
    """validate_only: NONE, and the topic keeps its partitions."""
    name = side.topic()
    side.create_topic(name, partitions=1, replication=1)
    results = partitions_result(side, rq.create_partitions(name, 4, validate_only=True))
    return [results, shape(side.call(0, rq.metadata([name]), rq.METADATA).topics[0])]
