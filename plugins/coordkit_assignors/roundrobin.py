"""Kafka's ``roundrobin`` assignor.

All partitions of all subscribed topics, topics in name order then partition number, are dealt by a
circular cursor over the members in member order; for each partition the cursor advances to the
next member subscribed to its topic, which takes it, and moves one past. The cursor is never reset
between topics, so with identical subscriptions counts differ by at most one.

Columnar form: within one topic the cursor simply cycles through that topic's subscribers, so a
topic costs one bisect (where the cursor enters its subscriber list) and one vectorised gather.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import ClassVar

import numpy as np

from coordkit.strategies.assignment import GroupAssignment, GroupSubscription, RebalanceProtocol
from coordkit_assignors.ordering import GroupLayout, IntArray


class RoundRobinAssignor:
    name: ClassVar[str] = "roundrobin"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        layout = GroupLayout(group)
        size = layout.size
        space = layout.space
        cursor = 0  # position of the member the circular iterator points at
        index_chunks: list[IntArray] = []
        owner_chunks: list[IntArray] = []
        subscriber_arrays: dict[int, IntArray] = {}
        for topic in layout.topics_in_java_order():
            subscribers = layout.subscribers[topic]
            array = subscriber_arrays.get(id(subscribers))
            if array is None:
                array = subscriber_arrays[id(subscribers)] = np.asarray(subscribers, dtype=np.int64)
            count = space.count(topic)
            base = space.base(topic)
            first = bisect_left(subscribers, cursor)  # the next subscriber at or after the cursor
            if first == len(subscribers):
                first = 0  # wrapped around
            picks = (first + np.arange(count, dtype=np.int64)) % len(subscribers)
            owner_chunks.append(array[picks])
            index_chunks.append(np.arange(base, base + count, dtype=np.int64))
            last = subscribers[(first + count - 1) % len(subscribers)]
            cursor = (last + 1) % size
        if not index_chunks:
            return layout.result_from_owners(np.empty(0, np.int64), np.empty(0, np.int64))
        return layout.result_from_owners(np.concatenate(index_chunks), np.concatenate(owner_chunks))
