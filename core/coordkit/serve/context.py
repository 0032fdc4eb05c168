"""What every request handler of one served broker needs: the engine broker, its logs, its
settings and where it listens."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from coordkit.engine.broker import Broker
from coordkit.engine.replication import ReplicationModel
from coordkit.engine.states import TP
from coordkit.engine.topics import TopicAdmin
from coordkit.errors import StoreError
from coordkit.kafka.model import NO_LEADER
from coordkit.protocol.codec import DEFAULT_MAX_FRAME_BYTES
from coordkit.serve import errors
from coordkit.serve.control_plane.connector import BrokerConnector
from coordkit.serve.control_plane.metadata_cache import MetadataCache
from coordkit.serve.dataplane.broker_logs import BrokerLogs
from coordkit.serve.dataplane.cleaner_manager import DEFAULT_CLEANER_BACKOFF_MS
from coordkit.serve.dataplane.index import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_MAX_INDEX_SIZE
from coordkit.serve.dataplane.retention import (
    DEFAULT_FLUSH_SCHEDULER_INTERVAL_MS,
    DEFAULT_RETENTION_CHECK_INTERVAL_MS,
)
from coordkit.serve.dataplane.share.partition_manager import ShareSettings
from coordkit.serve.dataplane.share.share_partition import (
    DEFAULT_DELIVERY_COUNT_LIMIT,
    DEFAULT_MAX_RECORD_LOCKS,
    DEFAULT_RECORD_LOCK_DURATION_MS,
    SharePartitionConfig,
)
from coordkit.serve.dataplane.share.share_session import DEFAULT_MAX_SESSIONS
from coordkit.serve.topic_configs import TopicConfigs
from coordkit.serve.topic_ids import TopicIds
from coordkit.serve.transactions.config import TransactionSettings
from coordkit.strategies.authorization import Authorizer

T = TypeVar("T")

log = logging.getLogger("coordkit.serve")

#: Kafka's ``num.partitions`` and ``default.replication.factor`` defaults, used by topic
#: auto-creation and by CreateTopics requests that leave them to the broker (-1).
DEFAULT_PARTITIONS = 1
DEFAULT_REPLICATION_FACTOR = 1


@attrs.define
class ServeSettings:
    """Broker-wide settings of ``coordkit serve``."""

    #: Kafka's ``auto.create.topics.enable`` (off by default here; Kafka's default is on).
    auto_create_topics: bool = False
    default_partitions: int = DEFAULT_PARTITIONS
    default_replication_factor: int = DEFAULT_REPLICATION_FACTOR
    #: Kafka's ``socket.request.max.bytes``: a larger request frame closes the connection.
    max_request_bytes: int = DEFAULT_MAX_FRAME_BYTES
    #: Topic config → the default the broker's configs give it (``min.insync.replicas``,
    #: ``log.retention.ms`` for ``retention.ms``, ...); the others take Kafka's defaults
    #: (:mod:`coordkit.serve.topic_configs`).
    topic_defaults: Mapping[str, Any] = attrs.field(factory=dict)
    #: The broker configs set at the start (``--config``), by Kafka's names, as text: what
    #: DescribeConfigs reports as STATIC_BROKER_CONFIG.
    static_configs: Mapping[str, str] = attrs.field(factory=dict)
    #: Kafka's ``log.index.interval.bytes`` and ``log.index.size.max.bytes`` (every log's).
    log_index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    log_index_size_max_bytes: int = DEFAULT_MAX_INDEX_SIZE
    #: Kafka's ``log.retention.check.interval.ms`` and ``log.flush.scheduler.interval.ms``.
    log_retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS
    #: Kafka's ``log.cleaner.backoff.ms``: between two passes of each broker's log cleaner.
    log_cleaner_backoff_ms: int = DEFAULT_CLEANER_BACKOFF_MS
    log_flush_scheduler_interval_ms: int = DEFAULT_FLUSH_SCHEDULER_INTERVAL_MS
    #: Share groups (KIP-932): Kafka's ``group.share.delivery.count.limit``,
    #: ``group.share.record.lock.duration.ms``, ``group.share.partition.max.record.locks`` and
    #: ``group.share.max.share.sessions`` (a group's own configs override the first three).
    share_delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    share_record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS
    share_partition_max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS
    share_max_share_sessions: int = DEFAULT_MAX_SESSIONS
    #: The transaction coordinator (issue 38): Kafka's ``transaction.max.timeout.ms``,
    #: ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` and
    #: ``transaction.state.log.{num.partitions,replication.factor,min.isr}``.
    transaction_max_timeout_ms: int = 900_000
    transaction_abort_timed_out_cleanup_interval_ms: int = 10_000
    transaction_state_num_partitions: int = 50
    transaction_state_replication_factor: int = 3
    transaction_state_min_isr: int = 2
    #: Kafka's ``transaction.partition.verification.enable``: a leader verifies a transactional
    #: batch opening a transaction with its coordinator before appending it (KIP-890 part 1).
    transaction_partition_verification_enable: bool = True

    @property
    def share(self) -> ShareSettings:
        """The share partitions' settings."""
        partition = SharePartitionConfig(
            self.share_delivery_count_limit,
            self.share_record_lock_duration_ms,
            self.share_partition_max_record_locks,
        )
        return ShareSettings(partition, max_share_sessions=self.share_max_share_sessions)

    @property
    def transactions(self) -> TransactionSettings:
        """The transaction coordinator's settings."""
        return TransactionSettings(
            max_timeout_ms=self.transaction_max_timeout_ms,
            abort_timed_out_cleanup_interval_ms=self.transaction_abort_timed_out_cleanup_interval_ms,
            num_partitions=self.transaction_state_num_partitions,
            replication_factor=self.transaction_state_replication_factor,
            min_isr=self.transaction_state_min_isr,
        )


@attrs.define(eq=False)
class BrokerContext:
    """One served broker: engine broker ``broker``, reachable at ``host:port``."""

    broker: Broker
    host: str
    port: int
    replication: ReplicationModel
    admin: TopicAdmin
    settings: ServeSettings
    logs: BrokerLogs = attrs.field(factory=BrokerLogs)
    #: The process's topic ids (one object shared by its brokers).
    topic_ids: TopicIds = attrs.field(factory=TopicIds)
    #: Each topic's configs over the broker's defaults (one object shared by the process's
    #: brokers, following the store's config changes).
    topic_configs: TopicConfigs = attrs.field(
        default=attrs.Factory(
            lambda self: TopicConfigs(
                self.broker.store, self.settings.topic_defaults, static=self.settings.static_configs
            ),
            takes_self=True,
        )
    )
    #: What the controller's requests told the process's brokers (``None``: not served).
    metadata: MetadataCache | None = None
    #: The process's authorizer (``authorizer.class.name``; ``None``: none, all allowed).
    authorizer: Authorizer | None = None
    #: How the broker connects to other brokers (the inter-broker listener's TLS and SASL).
    connector: BrokerConnector = attrs.field(factory=BrokerConnector)

    @property
    def broker_id(self) -> int:
        return self.broker.broker_id

    def leadership(self, tp: TP) -> tuple[int, int] | None:
        """``(leader, leader_epoch)`` of ``tp`` as the engine last saw it written, or ``None``
        when the engine knows no such partition."""
        return self.replication.leadership(tp)

    def leader_error(self, tp: TP) -> tuple[int, tuple[int, int] | None]:
        """What a produce, fetch or offsets request for ``tp`` gets from this broker: an error
        code (0 when it leads ``tp``) and ``tp``'s leadership, as :meth:`leadership`."""
        found = self.leadership(tp)
        if found is None:
            return errors.UNKNOWN_TOPIC_OR_PARTITION, None
        if found[0] != self.broker_id:
            return errors.NOT_LEADER_OR_FOLLOWER, found
        return errors.NONE, found

    def leads(self, tp: TP) -> bool:
        found = self.leadership(tp)
        return found is not None and found[0] == self.broker_id and found[0] != NO_LEADER

    async def topic_names(self, topic_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The names of the topics ``topic_ids`` name that exist; an id not known here makes
        one read of the store first (see :mod:`coordkit.serve.topic_ids`)."""
        wanted = list(topic_ids)
        known = self.topic_ids
        if known.missing(wanted):
            try:
                await self.blocking(lambda: known.refresh(self.broker.store))
            except StoreError as exc:
                log.warning("broker %s: topic ids not read again: %s", self.broker_id, exc)
        return {i: name for i in wanted if (name := known.name_of(i)) is not None}

    async def blocking(self, call: Callable[[], T]) -> T:
        """Run store work off the event loop, so that other clients are served meanwhile."""
        return await asyncio.to_thread(call)
