"""FindCoordinator and the topic metadata group leaders read: what any broker's coordinator
answers, whether or not it hosts the group."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from coordkit.engine import states
from coordkit.engine.config import EngineConfig
from coordkit.engine.errors import TopicExistsError
from coordkit.engine.groups import metadata
from coordkit.engine.groups.hosting import PartitionHosting
from coordkit.engine.groups.protocol import ErrorCode, FindCoordinatorResponse
from coordkit.engine.groups.topic_metadata import TopicMetadataWatch
from coordkit.engine.strategies import Strategies
from coordkit.engine.topics import TopicAdmin
from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.coordinators import OFFSETS_TOPIC
from coordkit.store import MetadataStore

log = logging.getLogger("coordkit.engine.groups")
#: The configs Kafka's group coordinator creates the offsets topic with
#: (``GroupCoordinator.offsetsTopicConfigs``: compacted, the producer's compression,
#: ``offsets.topic.segment.bytes``' 100 MiB segments).
OFFSETS_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "compression.type": "producer",
    "segment.bytes": "104857600",
}


class CoordinatorLookup:
    """Broker ``broker_id``'s answers to FindCoordinator, and its reads of topic metadata."""

    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        config: EngineConfig,
        strategies: Strategies,
        hosting: PartitionHosting,
        closed: Callable[[], bool],
    ):
        self.broker_id = broker_id
        self.store = store
        self.config = config
        self.strategies = strategies
        self.hosting = hosting
        self._closed = closed

    def find_coordinator(self, group_id: str) -> FindCoordinatorResponse:
        """The broker leading the group's offsets partition, read from the partition's state;
        creates the offsets topic on first need (Kafka auto-creates it)."""
        if self._closed():
            return FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            metadata.group_path(group_id)
        except ValueError:
            return FindCoordinatorResponse(ErrorCode.INVALID_GROUP_ID)
        path = states.state_path((OFFSETS_TOPIC, self.hosting.partition_for(group_id)))
        try:
            data, stat = self.store.get(path)
        except NoNodeError:
            try:
                self.ensure_offsets_topic()
            except StoreError as exc:
                log.debug("broker %s: offsets topic creation failed: %s", self.broker_id, exc)
            return FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        except StoreError:
            return FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            state = states.decode_state(path, data, stat.version)
        except LayoutError:
            return FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not state.has_leader:
            return FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return FindCoordinatorResponse(ErrorCode.NONE, state.leader)

    def ensure_offsets_topic(self) -> bool:
        """Create the offsets topic unless it exists; ``True`` if this call created it.

        Replication factor: ``offsets.topic.replication.factor`` capped by the live brokers.
        """
        if self.store.exists(layout.topic_path(OFFSETS_TOPIC)) is not None:
            return False
        admin = TopicAdmin(self.store, placement=self.strategies.placement)
        live = len(admin.brokers())
        factor = max(1, min(self.config.offsets_topic_replication_factor, live))
        try:
            admin.create_topic(
                OFFSETS_TOPIC,
                self.config.offsets_topic_num_partitions,
                factor,
                config=OFFSETS_TOPIC_CONFIG,
            )
        except TopicExistsError:
            return False
        log.info(
            "broker %s created %s (replication factor %s)", self.broker_id, OFFSETS_TOPIC, factor
        )
        return True

    def topic_partitions(self, topics: Sequence[str]) -> dict[str, int]:
        """Partition counts of the existing ``topics`` (a Metadata request)."""
        names = sorted(set(topics))
        paths = [layout.topic_path(t) for t in names]
        out: dict[str, int] = {}
        for topic, path, result in zip(names, paths, self.store.get_many(paths), strict=True):
            if not isinstance(result, StoreError):
                out[topic] = len(states.decode_assignment(path, result[0]))
        return out

    def watch_topic_metadata(
        self, topics: Iterable[str], on_change: Callable[[], object]
    ) -> TopicMetadataWatch:
        """Partition counts of ``topics`` kept current by watches on this broker's session (what
        a group leader compares with its assignment's metadata); ``on_change`` runs on the
        session's event thread and must not block.

        :raises StoreError: the session cannot set watches (e.g. the broker has stopped).
        """
        return TopicMetadataWatch(self.store, topics, on_change)
