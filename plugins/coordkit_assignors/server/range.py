"""Kafka 4's server-side ``range`` assignor (the group coordinator's ``RangeAssignor``).

Members in Kafka's order (static members first by instance id, then the rest by member id, Java
string order); each topic's partitions are cut into contiguous ranges over its subscribers in that
order, the first ``N % S`` subscribers taking one more. With identical subscriptions every topic's
``k``-th range goes to the same member, so co-partitioned topics line up. Kafka 4.4's range reads
neither the current target (it is not sticky) nor racks.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

import numpy as np

from coordkit.strategies.assignment import java_string_key
from coordkit.strategies.partition_columns import split_runs
from coordkit.strategies.target_assignment import (
    GroupSpec,
    MemberAssignment,
    PartitionAssignorError,
    TargetAssignment,
    TopicDescriber,
)


class ServerRangeAssignor:
    name: ClassVar[str] = "range"
    #: Balanced per topic, not overall: with identical subscriptions the first members take the
    #: extra partition of every topic.
    balanced: ClassVar[bool] = False
    sticky: ClassVar[bool] = False

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
        members = group.members
        if not members:
            return TargetAssignment({})

        def order(member: str) -> tuple[int, bytes, bytes]:
            instance = members[member].instance_id
            if instance is not None:
                return 0, java_string_key(instance), b""
            return 1, java_string_key(member), b""

        # Java's sort is stable: static members with equal instance ids keep memberIds() order.
        sorted_members = sorted(members, key=order)
        topic_ids = list(topics.topics)
        counts = np.array([topics.topics[t].partitions for t in topic_ids], dtype=np.int64)
        indexer = _SubscriptionIndexer(topic_ids)
        subscriptions = [indexer.positions(members[m].subscribed_topic_ids) for m in sorted_members]
        # One row per (member, subscribed topic), member by member in the sorted order; each row's
        # rank among its topic's subscribers, and its topic's quota and extra partitions.
        if all(s is subscriptions[0] for s in subscriptions):
            rows = _same_subscription(subscriptions[0], len(subscriptions), counts)
        else:
            rows = _rows(subscriptions, counts)
        row_members, row_topics, rank, quota, extra = rows
        # The first count % subscribers subscribers take one partition more.
        start = (rank * quota + np.minimum(rank, extra)).ravel()
        lengths_given = (quota + (rank < extra)).ravel()
        given = lengths_given > 0
        if not given.all():  # more subscribers than partitions: some get none of the topic
            row_members, row_topics = row_members[given], row_topics[given]
            start, lengths_given = start[given], lengths_given[given]
        bounds = np.zeros(row_topics.size + 1, dtype=np.int64)
        np.cumsum(lengths_given, out=bounds[1:])
        if int(bounds[-1]) == row_topics.size:
            partitions = start  # every run is one partition: its start
        else:
            # Each run start, start + 1, ...: one arange shifted run by run.
            partitions = np.arange(int(bounds[-1]), dtype=np.int64) + np.repeat(
                start - bounds[:-1], lengths_given
            )
        targets = split_runs(
            len(sorted_members), topic_ids, row_members, row_topics, bounds, partitions
        )
        position = {m: i for i, m in enumerate(sorted_members)}
        return TargetAssignment({m: MemberAssignment(targets[position[m]]) for m in members})


_Rows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _same_subscription(subscription: np.ndarray, member_count: int, counts: np.ndarray) -> _Rows:
    """The rows when every member subscribes to the same topics: a member's rank is its own,
    and rank, quota and extra broadcast (members × topics) instead of being gathered per row."""
    quota, extra = np.divmod(counts[subscription], max(member_count, 1))
    return (
        np.repeat(np.arange(member_count, dtype=np.int64), subscription.size),
        np.tile(subscription, member_count),
        np.arange(member_count, dtype=np.int64)[:, np.newaxis],
        quota[np.newaxis, :],
        extra[np.newaxis, :],
    )


def _rows(subscriptions: list[np.ndarray], counts: np.ndarray) -> _Rows:
    lengths = [s.size for s in subscriptions]
    row_members = np.repeat(np.arange(len(subscriptions), dtype=np.int64), lengths)
    row_topics = np.concatenate([np.zeros(0, dtype=np.int64), *subscriptions])
    subscribers = np.bincount(row_topics, minlength=counts.size)
    # A row's rank among its topic's subscribers: a stable sort by topic keeps the members' order.
    by_topic = np.argsort(row_topics.astype(_narrow(counts.size)), kind="stable")
    first_row = np.cumsum(subscribers) - subscribers
    rank = np.empty_like(row_topics)
    rank[by_topic] = np.arange(row_topics.size) - np.repeat(first_row, subscribers)
    topic_quota, topic_extra = np.divmod(counts, np.maximum(subscribers, 1))
    return row_members, row_topics, rank, topic_quota[row_topics], topic_extra[row_topics]


def _narrow(topic_count: int) -> type[np.integer[Any]]:
    """The narrowest type for topic positions: numpy sorts 16-bit integers by radix."""
    return np.uint16 if topic_count <= 2**16 else np.int64


class _SubscriptionIndexer:
    """Members' subscriptions as topic positions; equal subscriptions (the common case) mapped
    once: comparing two tuples of the same ids is far cheaper than hashing every id."""

    def __init__(self, topic_ids: list[uuid.UUID]):
        self._position = {t: i for i, t in enumerate(topic_ids)}
        self._last: tuple[tuple[uuid.UUID, ...], np.ndarray] | None = None
        self._seen: dict[tuple[uuid.UUID, ...], np.ndarray] = {}

    def positions(self, subscription: tuple[uuid.UUID, ...]) -> np.ndarray:
        if self._last is not None and self._last[0] == subscription:
            return self._last[1]
        column = self._seen.get(subscription)
        if column is None:
            if any(t not in self._position for t in subscription):
                raise PartitionAssignorError("Member is subscribed to a non-existent topic")
            column = np.array([self._position[t] for t in subscription], dtype=np.int64)
            self._seen[subscription] = column
        self._last = (subscription, column)
        return column
