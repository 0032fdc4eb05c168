"""Topic deletion (Kafka's ``TopicDeletionManager``), driven by what ``/admin/delete_topics`` holds.

Each pass that looks at deletions lists the queue again. A request for an unknown topic, or any
request while ``delete.topic.enable`` is off, is dropped (as Kafka does). A topic with a replica on
an offline broker is *ineligible*: every replica must stop and delete its log first, so the
deletion waits and resumes when the brokers are back. Otherwise the topic's state and partition
nodes go in fenced batches, then its assignment, config and the request itself. A topic whose
assignment the controller cannot read is deleted too: the request is the operator's explicit
word, and its nodes are removed exactly as found.
"""

from __future__ import annotations

import logging

from coordkit.engine import states
from coordkit.engine.config import EngineConfig
from coordkit.engine.controller.broker_requests import RequestBatch
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.partition_state import PartitionStateMachine
from coordkit.engine.controller.replica_state import commit_ignoring_missing
from coordkit.engine.events import Observers
from coordkit.engine.fencing import FencedWriter
from coordkit.errors import NoNodeError, NotEmptyError, StoreError
from coordkit.kafka import layout
from coordkit.store import Delete, Op

log = logging.getLogger("coordkit.engine.controller")


class TopicDeletionManager:
    def __init__(
        self,
        context: ControllerContext,
        partitions: PartitionStateMachine,
        writer: FencedWriter,
        *,
        config: EngineConfig,
        observers: Observers,
        broker_id: int,
        requests: RequestBatch | None = None,
    ):
        self.context = context
        #: Brokers elsewhere hear of a deletion by StopReplica and UpdateMetadata.
        self.requests = requests
        self.partitions = partitions
        self.writer = writer
        self.config = config
        self.observers = observers
        self.broker_id = broker_id
        #: Topics queued for deletion that wait for a replica's broker to come back.
        self.ineligible: set[str] = set()

    def process(self) -> list[str]:
        """Act on every queued request; returns the topics deleted."""
        queued = sorted(self.context.children(layout.DELETE_TOPICS))
        self.context.deleting = set(queued)
        self.ineligible &= self.context.deleting
        deleted: list[str] = []
        for topic in queued:
            marker = f"{layout.DELETE_TOPICS}/{topic}"
            known = topic in self.context.topics or topic in self.context.ignored_topics
            if not self.config.delete_topic_enable or not known:
                if not self.config.delete_topic_enable:
                    log.warning("topic deletion is disabled; dropping request for %s", topic)
                commit_ignoring_missing(self.writer, [Delete(marker)])
                self.context.deleting.discard(topic)
                continue
            offline = self._offline_replicas(topic)
            if offline:
                if topic not in self.ineligible:
                    log.info(
                        "controller %s: deletion of %s waits for brokers %s (replicas offline)",
                        self.broker_id,
                        topic,
                        sorted(offline),
                    )
                self.ineligible.add(topic)
                continue
            self.ineligible.discard(topic)
            self._delete_topic_nodes(topic)
            deleted.append(topic)
        return deleted

    def _offline_replicas(self, topic: str) -> set[int]:
        live = self.context.live
        return {
            replica
            for replicas in self.context.topics.get(topic, {}).values()
            for replica in replicas
            if replica not in live
        }

    def _delete_topic_nodes(self, topic: str) -> None:
        ops: list[Op] = []
        context = self.context
        if self.requests is not None and topic in context.topics:
            assignment = context.topics[topic]
            found = {p: (part.state if (part := context.parts.get((topic, p))) else None)
                     for p in assignment}  # fmt: skip
            self.requests.topic_deleting(assignment, topic, found)
        for partition in sorted(context.topics.get(topic, {})):
            tp = (topic, partition)
            part = context.parts.get(tp)
            if part is not None and part.state is not None and tp not in context.unreadable_states:
                ops.append(Delete(states.state_path(tp)))
                ops.append(Delete(states.partition_path(tp)))
        step = self.config.write_batch_ops
        try:
            if topic not in context.topics:
                raise NotEmptyError("assignment unreadable: walk the topic's nodes")
            for start in range(0, len(ops), step):
                self.writer.commit(ops[start : start + step])
            self.writer.commit(self._tail_ops(topic))
        except (NoNodeError, NotEmptyError):
            # The cache missed something: delete exactly what is there.
            self._delete_by_walk(topic)
        context.forget_topic(topic)
        context.ignored_topics = context.ignored_topics - {topic}
        context.deleting.discard(topic)
        self.partitions.forget_topic(topic)
        self.observers.topic_deleted(topic)
        log.info("controller %s: deleted topic %s", self.broker_id, topic)

    def _tail_ops(self, topic: str) -> list[Op]:
        paths = [
            states.partitions_path(topic),
            f"{layout.BROKER_TOPICS}/{topic}",
            f"{layout.CONFIG_TOPICS}/{topic}",
            f"{layout.DELETE_TOPICS}/{topic}",
        ]
        return [
            Delete(path)
            for path, result in zip(paths, self.context.get_many(paths), strict=True)
            if not isinstance(result, StoreError)
        ]

    def _delete_by_walk(self, topic: str) -> None:
        root = f"{layout.BROKER_TOPICS}/{topic}"
        deepest_first: list[str] = []
        level = [root]
        while level:
            deepest_first[:0] = level
            following: list[str] = []
            for path in level:
                following.extend(f"{path}/{c}" for c in self.context.children(path))
            level = following
        present = self.context.get_many(deepest_first)
        ops: list[Op] = [
            Delete(path)
            for path, result in zip(deepest_first, present, strict=True)
            if not isinstance(result, StoreError) and path != root
        ]
        step = self.config.write_batch_ops
        for start in range(0, len(ops), step):
            self.writer.commit(ops[start : start + step])
        self.writer.commit(
            [op for op in self._tail_ops(topic) if op.path != states.partitions_path(topic)]
        )
