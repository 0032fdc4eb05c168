"""Topic ids for topics whose node has none (Kafka's ``KafkaController.processTopicIds``).

A topic created by a tool older than Kafka 2.8 has a version 1 or 2 assignment node without
``topic_id``. Kafka's ZooKeeper-mode controller gives each such topic a random id when it loads
the topics (on failover) and when it learns of new ones (``zkClient.setTopicIds``): the node is
rewritten as version 3 with the id, its partitions and reassignment state kept.

Kafka's write matches any node version; here each write is conditional on the version read, so a
tool that rewrote the node meanwhile (adding partitions, say) is not undone: the node's watch
brings the controller back and the topic is looked at again.
"""

from __future__ import annotations

import logging

import attrs

from coordkit.engine.cluster_id import new_kafka_uuid
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.fencing import FencedWriter
from coordkit.errors import BadVersionError, LayoutError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.store import SetData, Stat

log = logging.getLogger("coordkit.engine.controller")

#: The assignment node version that carries the topic id (Kafka 2.8+).
TOPIC_ID_NODE_VERSION = 3


class TopicIds:
    """Gives an id to every topic the context saw without one (:attr:`~.context.ControllerContext.
    without_ids`).

    :param write_batch_ops: ops per fenced multi.
    """

    def __init__(
        self, context: ControllerContext, writer: FencedWriter, *, broker_id: int,
        write_batch_ops: int,
    ):  # fmt: skip
        self.context = context
        self.writer = writer
        self.broker_id = broker_id
        self.write_batch_ops = write_batch_ops

    def process(self) -> list[str]:
        """Read the candidates again and give each topic still without an id a new one; returns
        the topics given one. A topic whose node changed or went meanwhile stays a candidate
        or is dropped (its watch, or the topic list's, brings the controller back)."""
        context = self.context
        names = sorted(context.without_ids)
        if not names:
            return []
        paths = [layout.topic_path(t) for t in names]
        writes: list[tuple[str, SetData]] = []
        for topic, path, result in zip(names, paths, context.get_many(paths), strict=True):
            if isinstance(result, NoNodeError):
                context.without_ids.discard(topic)
                continue
            if isinstance(result, StoreError):
                raise result
            data, stat = result
            try:
                assignment = layout.TOPIC.decode(data, path)
            except LayoutError:
                # Recorded and ignored by the context's own read; a readable rewrite is a new
                # topic to it, which brings the candidate back.
                context.without_ids.discard(topic)
                continue
            if assignment.topic_id is not None:
                context.without_ids.discard(topic)
                continue
            given = attrs.evolve(
                assignment,
                version=max(assignment.version, TOPIC_ID_NODE_VERSION),
                topic_id=new_kafka_uuid(),
            )
            writes.append((topic, SetData(path, layout.TOPIC.encode(given), stat.version)))
        done: list[str] = []
        step = self.write_batch_ops
        for start in range(0, len(writes), step):
            batch = writes[start : start + step]
            results: list[Stat | None]
            try:
                results = self.writer.commit([op for _topic, op in batch])
            except (BadVersionError, NoNodeError):
                # One node changed or went since the read: the others go one by one.
                results = [self._write_one(op) for _topic, op in batch]
            for (topic, _op), written in zip(batch, results, strict=True):
                if written is None:
                    continue
                context.without_ids.discard(topic)
                context.assignment_mzxid[topic] = written.mzxid
                done.append(topic)
        if done:
            log.info(
                "controller %s: gave topic ids to %d topics without one: %s",
                self.broker_id,
                len(done),
                ", ".join(done[:10]) + (", ..." if len(done) > 10 else ""),
            )
        return done

    def _write_one(self, op: SetData) -> Stat | None:
        try:
            stat: Stat = self.writer.commit([op])[0]
            return stat
        except NoNodeError:
            self.context.without_ids.discard(op.path.rsplit("/", 1)[1])
            return None
        except BadVersionError:
            return None  # rewritten meanwhile: the node's watch brings the topic back
