"""Scenarios of topic ids and of what the newest versions add (issue #33 item 1): Fetch and
Produce by topic id, ids no topic has, DeleteTopics by id, Metadata by id, ListOffsets' tiered
storage timestamps, ApiVersions' cluster and node check (KIP-1242), and the current leader a
refusal names (KIP-951).

Versions: ApiVersions v5, Metadata v13, DeleteTopics v6, Produce v13, Fetch v18, ListOffsets v11
— the highest both Kafka 4.4 and coordkit serve answer.
"""

from __future__ import annotations

import uuid
from typing import Any

from coordkit.protocol import messages
from differential import requests as rq
from differential.harness import Side, by_id, scenario

#: A topic id no cluster has (fixed, so both sides are asked the same).
UNKNOWN_TOPIC_ID = uuid.UUID(int=0xFEDCBA9876543210FEDCBA9876543210)
NO_TOPIC_ID = rq.NO_TOPIC_ID
FETCH = {"Fetch": rq.FETCH, "Metadata": rq.METADATA}
PRODUCE = {"Produce": rq.PRODUCE, "Metadata": rq.METADATA}
DELETE = {"DeleteTopics": rq.DELETE_TOPICS, "Metadata": rq.METADATA}
#: ListOffsets' tiered-storage timestamps: earliest local (v8), latest tiered (v9), earliest
#: pending upload (v11).
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6


def with_records(side: Side, count: int = 2, partitions: int = 1) -> str:
    name = side.topic()
    side.create_topic(name, partitions=partitions, replication=3)
    side.produce(name, 0, rq.batch(count))
    return name


def fetch_ids(side: Side, index: int, *ids: uuid.UUID) -> Any:
    """A Fetch of partition 0 of each topic id, as given."""
    request = rq.fetch("unnamed")
    Topic: Any = messages.FetchRequest.FetchTopic
    template = request.topics[0]
    request.topics = [Topic(topic_id=i, partitions=template.partitions) for i in ids]
    return side.call(index, request, rq.FETCH)


# -- Fetch ----------------------------------------------------------------------------------------


@scenario("topic_ids.fetch_by_id", versions=FETCH)
def fetch_by_id(side: Side) -> list[Any]:
    """Fetch v18 of a topic by its id: the records, answered under the same id."""
    name = with_records(side)
    topic_id = side.topic_id(name)
    answer = side.call(side.leader(name), by_id(side, rq.fetch(name)), rq.FETCH)
    return [answer, [t.topic_id == topic_id for t in answer.responses]]


@scenario("topic_ids.fetch_unknown_id", versions=FETCH)
def fetch_unknown_id(side: Side) -> list[Any]:
    """Fetch v18 of an id no topic has: UNKNOWN_TOPIC_ID for its partition, answered under
    that id."""
    return [fetch_ids(side, 0, UNKNOWN_TOPIC_ID)]


@scenario("topic_ids.fetch_known_and_unknown_ids", versions=FETCH)
def fetch_known_and_unknown_ids(side: Side) -> list[Any]:
    """One Fetch naming a topic by its id and an id no topic has: the records of the one,
    UNKNOWN_TOPIC_ID for the other."""
    name = with_records(side)
    return [fetch_ids(side, side.leader(name), side.topic_id(name), UNKNOWN_TOPIC_ID)]


@scenario("topic_ids.fetch_deleted_topic_id", versions={**FETCH, **DELETE})
def fetch_deleted_topic_id(side: Side) -> list[Any]:
    """The id of a topic deleted since: UNKNOWN_TOPIC_ID, on every broker."""
    name = with_records(side)
    topic_id = side.topic_id(name)
    side.call(0, rq.delete_topics(name), rq.DELETE_TOPICS)
    side.wait_topic_gone(name)
    return [fetch_ids(side, index, topic_id) for index in range(side.size)]


@scenario("topic_ids.fetch_not_leader_names_the_leader", versions=FETCH)
def fetch_not_leader_names_the_leader(side: Side) -> list[Any]:
    """Fetch v18 from a broker holding no replica: NOT_LEADER_OR_FOLLOWER, with the current
    leader and its epoch (KIP-951, v16+) and the leader's endpoint."""
    name = side.topic()
    side.create_topic(name, replication=1)
    outsider = (side.leader(name) + 1) % side.size
    return [side.call(outsider, by_id(side, rq.fetch(name)), rq.FETCH)]


@scenario("topic_ids.fetch_as_replica_state", versions=FETCH)
def fetch_as_replica_state(side: Side) -> list[Any]:
    """Fetch v18 whose replica state names no replica (-1, epoch -1, as a consumer sends it):
    read as a consumer's, up to the high watermark."""
    name = with_records(side, 3)
    request = by_id(side, rq.fetch(name))
    request.replica_state = messages.FetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1)
    return [side.call(side.leader(name), request, rq.FETCH)]


# -- Produce --------------------------------------------------------------------------------------


@scenario("topic_ids.produce_by_id", versions={**PRODUCE, **FETCH})
def produce_by_id(side: Side) -> list[Any]:
    """Produce v13 to a topic by its id: appended at offset 0, answered under the id; fetched
    back by id."""
    name = side.topic()
    side.create_topic(name)
    leader = side.leader(name)
    produced = side.call(leader, by_id(side, rq.produce(name, 0, rq.batch(3))), rq.PRODUCE)
    return [produced, side.call(leader, by_id(side, rq.fetch(name)), rq.FETCH)]


@scenario("topic_ids.produce_unknown_id", versions=PRODUCE)
def produce_unknown_id(side: Side) -> list[Any]:
    """Produce v13 to an id no topic has: UNKNOWN_TOPIC_ID, answered under that id."""
    request = rq.produce("unnamed", 0, rq.batch(1))
    request.topic_data[0].topic_id = UNKNOWN_TOPIC_ID
    return [side.call(0, request, rq.PRODUCE)]


@scenario("topic_ids.produce_known_and_unknown_ids", versions=PRODUCE)
def produce_known_and_unknown_ids(side: Side) -> list[Any]:
    """One Produce v13 to a topic by its id and to an id no topic has: appended to the one,
    UNKNOWN_TOPIC_ID for the other."""
    name = side.topic()
    side.create_topic(name)
    request = by_id(side, rq.produce(name, 0, rq.batch(1)))
    unknown = rq.produce("unnamed", 0, rq.batch(1)).topic_data[0]
    unknown.topic_id = UNKNOWN_TOPIC_ID
    request.topic_data.append(unknown)
    answer = side.call(side.leader(name), request, rq.PRODUCE)
    return [sorted(answer.responses, key=lambda t: t.topic_id == UNKNOWN_TOPIC_ID)]


@scenario("topic_ids.produce_not_leader_names_the_leader", versions=PRODUCE)
def produce_not_leader_names_the_leader(side: Side) -> list[Any]:
    """Produce v13 to a broker holding no replica: NOT_LEADER_OR_FOLLOWER with the current
    leader and its epoch and the leader's endpoint (KIP-951, v10+)."""
    name = side.topic()
    side.create_topic(name, replication=1)
    outsider = (side.leader(name) + 1) % side.size
    return [side.call(outsider, by_id(side, rq.produce(name, 0, rq.batch(1))), rq.PRODUCE)]


# -- DeleteTopics v6 --------------------------------------------------------------------------------


def deleted(side: Side, *topics: tuple[str | None, uuid.UUID]) -> list[Any]:
    answer = side.call(0, rq.delete_topics_by(*topics), rq.DELETE_TOPICS)
    return sorted(answer.responses, key=lambda r: (r.name or "", str(r.topic_id)))


@scenario("topic_ids.delete_by_id", versions=DELETE)
def delete_by_id(side: Side) -> list[Any]:
    """DeleteTopics v6 naming a topic by its id alone: NONE, answered with its name and id; the
    topic is gone."""
    name = side.topic()
    side.create_topic(name)
    answer = deleted(side, (None, side.topic_id(name)))
    side.wait_topic_gone(name)
    return [answer]


@scenario("topic_ids.delete_by_name_answers_the_id", versions=DELETE)
def delete_by_name_answers_the_id(side: Side) -> list[Any]:
    """DeleteTopics v6 by name: NONE, answered with the topic's id."""
    name = side.topic()
    side.create_topic(name)
    topic_id = side.topic_id(name)
    answer = deleted(side, (name, NO_TOPIC_ID))
    return [answer, [r.topic_id == topic_id for r in answer]]


@scenario("topic_ids.delete_unknown_id", versions=DELETE)
def delete_unknown_id(side: Side) -> list[Any]:
    """DeleteTopics v6 of an id no topic has: UNKNOWN_TOPIC_ID, a null name."""
    return [deleted(side, (None, UNKNOWN_TOPIC_ID))]


@scenario("topic_ids.delete_refusals", versions=DELETE, compare_messages=True)
def delete_refusals(side: Side) -> list[Any]:
    """DeleteTopics v6 with a name and an id together, neither, and one id twice: each
    INVALID_REQUEST with Kafka's message; nothing is deleted."""
    name, other = side.topic("a"), side.topic("b")
    side.create_topic(name)
    side.create_topic(other)
    topic_id = side.topic_id(name)
    answer = deleted(
        side, (name, topic_id), (None, NO_TOPIC_ID), (None, side.topic_id(other)),
        (None, side.topic_id(other)),
    )  # fmt: skip
    still = side.call(0, rq.metadata([name, other]), rq.METADATA)
    return [answer, [t.error_code for t in still.topics]]


@scenario("topic_ids.delete_id_and_its_name", versions=DELETE, compare_messages=True)
def delete_id_and_its_name(side: Side) -> list[Any]:
    """DeleteTopics v6 naming one topic both by id and (in another entry) by name: refused once,
    under its name (INVALID_REQUEST, Kafka's message), and not deleted."""
    name = side.topic()
    side.create_topic(name)
    answer = deleted(side, (None, side.topic_id(name)), (name, NO_TOPIC_ID))
    return [answer, side.call(0, rq.metadata([name]), rq.METADATA).topics[0].error_code]


# -- Metadata, ListOffsets, ApiVersions ------------------------------------------------------------


@scenario("topic_ids.metadata_by_id_and_name", versions={"Metadata": rq.METADATA})
def metadata_by_id_and_name(side: Side) -> list[Any]:
    """Metadata v13 of a topic by name, then by its id alone: the same topic, with its name,
    id and partitions; the top-level error is NONE."""
    name = side.topic()
    side.create_topic(name, partitions=2)
    by_name = side.call(0, rq.metadata([name]), rq.METADATA)
    Request: Any = messages.MetadataRequest
    request = rq.metadata([])
    request.topics = [Request.MetadataRequestTopic(topic_id=side.topic_id(name), name=None)]
    answer = side.call(1, request, rq.METADATA)
    return [by_name.error_code, by_name.topics, answer.error_code, answer.topics]


@scenario("topic_ids.list_offsets_tiered_timestamps", versions={"ListOffsets": rq.LIST_OFFSETS})
def list_offsets_tiered_timestamps(side: Side) -> list[Any]:
    """ListOffsets v11 of a topic without tiered storage at the earliest local (-4), latest
    tiered (-5) and earliest pending upload (-6) timestamps."""
    name = with_records(side, 3)
    leader = side.leader(name)
    return [
        side.call(leader, rq.list_offsets(name, 0, timestamp), rq.LIST_OFFSETS).topics
        for timestamp in (EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD)
    ]


@scenario("topic_ids.api_versions_cluster_and_node", versions={"ApiVersions": rq.API_VERSIONS,
                                                               "Metadata": rq.METADATA})  # fmt: skip
def api_versions_cluster_and_node(side: Side) -> list[Any]:
    """ApiVersions v5 naming the cluster and node (KIP-1242): the broker's own answer with its
    ranges; another cluster id, or its cluster with another node id, REBOOTSTRAP_REQUIRED and
    no ranges; a node id without a cluster id, or a cluster id without a node id,
    INVALID_REQUEST and no ranges (the two come together)."""
    cluster_id = side.call(0, rq.metadata([]), rq.METADATA).cluster_id
    own = side.broker_id(0)
    other = side.broker_id(1)
    found = []
    for cluster, node in ((cluster_id, own), ("another-cluster-id-xx", own), (cluster_id, other),
                          (None, other), (cluster_id, -1), (None, -1)):  # fmt: skip
        request = messages.ApiVersionsRequest(
            client_software_name="coordkit-differential", client_software_version="1.0",
            cluster_id=cluster, node_id=node,
        )  # fmt: skip
        answer = side.call(0, request, rq.API_VERSIONS)
        found.append([answer.error_code, len(answer.api_keys) > 0])
    return found
