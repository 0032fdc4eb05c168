"""The producer: partition with a partitioner plugin, batch, send each batch to its leader.

Per record (Kafka's ``KafkaProducer.doSend`` sequence): the partitioner chooses a partition from
the cached metadata; if the record would open a new batch there, the partitioner hears
``on_new_batch`` and chooses again (KIP-480); the record joins the partition's open batch and the
partitioner hears ``on_append`` (KIP-794). Ready batches go to the leader the metadata names,
one batch per partition per :meth:`Producer.poll`, through a :class:`ProduceTransport`.

A send refused as ``NOT_LEADER``, ``LEADER_NOT_AVAILABLE`` or ``UNKNOWN_TOPIC_OR_PARTITION``
marks the metadata stale; it is read again from the store and the batch retried (up to
``retries`` times). Batches waiting for a leader are not attempts: they wait, as Kafka's do until
``delivery.timeout.ms``, and :meth:`Producer.flush` gives up on them after ``retries`` rounds.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

import attrs
from attrs import validators

from coordkit.engine.producer.accumulator import Batch, RecordAccumulator, RecordMetadata
from coordkit.engine.producer.discovery import BrokerDiscovery, open_discovery
from coordkit.engine.producer.errors import (
    BrokerUnavailableError,
    LeaderNotAvailableError,
    ProducerClosedError,
    ProducerError,
    RetriableSendError,
    UnknownTopicOrPartitionError,
)
from coordkit.engine.producer.metadata import MetadataSource, StoreMetadata
from coordkit.engine.producer.stats import ProducerStats, ProducerTotals
from coordkit.engine.producer.transport import ProduceTransport, ReplicationTransport
from coordkit.engine.states import TP
from coordkit.engine.strategies import Strategies
from coordkit.kafka.model import NO_LEADER
from coordkit.store import MetadataStore, SessionState
from coordkit.strategies.partitioning import (
    DEFAULT_BATCH_SIZE,
    ClusterMetadata,
    Partitioner,
    PartitionerFactory,
    PartitionerOptions,
    PartitionLoad,
    ProducerRecord,
    UnknownTopicMetadataError,
)
from coordkit.support.clock import Clock, SystemClock

if TYPE_CHECKING:
    from coordkit.engine.cluster import Cluster


@attrs.frozen
class ProducerConfig:
    """Producer settings, named after the Java client's.

    :param partitioner: a registered partitioner name (Kafka 3.3+'s built-in is uniform-sticky).
    :param batch_size: ``batch.size`` in bytes.
    :param adaptive_partitioning: ``partitioner.adaptive.partitioning.enable``.
    :param availability_timeout: ``partitioner.availability.timeout.ms``, in seconds (0: off):
        partitions whose leader has had batches ready but not drained for longer are skipped.
    :param ignore_keys: ``partitioner.ignore.keys``.
    :param retries: retries of a batch after retriable errors; also the flush rounds spent
        waiting for a leader.
    :param retry_backoff: ``retry.backoff.ms``, in seconds, between flush rounds.
    :param linger: ``linger.ms``, in seconds: an open batch this old is sent at the next poll
        (0: whatever is open goes out with the next poll).
    :param drain_on_send: send batches as soon as a send fills one (open batches wait for the
        next :meth:`Producer.poll` or flush); the lab turns it off and drains with
        :meth:`Producer.poll` at its own pace.
    :param seed: seeds the partitioner.
    """

    partitioner: str = "uniform-sticky"
    batch_size: int = attrs.field(default=DEFAULT_BATCH_SIZE, validator=validators.ge(1))
    adaptive_partitioning: bool = True
    availability_timeout: float = attrs.field(default=0.0, validator=validators.ge(0))
    ignore_keys: bool = False
    retries: int = attrs.field(default=5, validator=validators.ge(0))
    retry_backoff: float = attrs.field(default=0.05, validator=validators.ge(0))
    linger: float = attrs.field(default=0.0, validator=validators.ge(0))
    drain_on_send: bool = True
    seed: int | None = None

    def partitioner_options(self) -> PartitionerOptions:
        return PartitionerOptions(
            seed=self.seed,
            batch_size=self.batch_size,
            adaptive=self.adaptive_partitioning,
            ignore_keys=self.ignore_keys,
        )


class Producer:
    """Sends records to partition leaders.

    :param metadata: where metadata comes from (:class:`StoreMetadata` on a store session).
    :param transport: how batches reach brokers (:class:`ReplicationTransport` on an engine).
    :param discovery: the broker discovery deciding which brokers are reachable (static mapping
        or ``/brokers/ids``); ``None``: reachability comes from ``metadata`` alone.
    :param partitioner: the partitioner factory (by default the one ``config.partitioner`` names,
        from the registered plugins).
    :param owned_store: a store session the producer closes with itself.
    """

    def __init__(
        self,
        metadata: MetadataSource,
        transport: ProduceTransport,
        config: ProducerConfig | None = None,
        *,
        discovery: BrokerDiscovery | None = None,
        clock: Clock | None = None,
        partitioner: PartitionerFactory | None = None,
        owned_store: MetadataStore | None = None,
    ):
        self.config = config or ProducerConfig()
        self.metadata = metadata
        self.transport = transport
        self.discovery = discovery
        self.clock: Clock = clock or SystemClock()
        if partitioner is None:
            partitioner = Strategies.from_plugins().partitioner(self.config.partitioner)
        self.partitioner: Partitioner = partitioner(self.config.partitioner_options())
        self.stats = ProducerStats()
        self._accumulator = RecordAccumulator(self.config.batch_size)
        self._topics: set[str] = set()
        self._cluster = ClusterMetadata({})
        self._stale = True
        self._ready_since: dict[int, float] = {}
        self._drained_at: dict[int, float] = {}
        self._owned_store = owned_store
        self._closed = False
        self._lock = threading.RLock()

    # -- construction ----------------------------------------------------------------------------

    @classmethod
    def on_store(
        cls,
        store: MetadataStore,
        transport: ProduceTransport,
        config: ProducerConfig | None = None,
        *,
        discovery: str = "zookeeper",
        address: str = "",
        bootstrap: Sequence[int] = (),
        clock: Clock | None = None,
        owned_store: MetadataStore | None = None,
    ) -> Producer:
        """A producer reading metadata from ``store``, with broker discovery ``discovery``
        (``static``: ``address`` → one of ``bootstrap``; ``zookeeper``: ``/brokers/ids``)."""
        chosen = open_discovery(discovery, store, address=address, bootstrap=bootstrap)
        return cls(
            StoreMetadata(store, chosen),
            transport,
            config,
            discovery=chosen,
            clock=clock,
            owned_store=owned_store,
        )

    @classmethod
    def for_cluster(
        cls,
        cluster: Cluster,
        config: ProducerConfig | None = None,
        *,
        store: MetadataStore | None = None,
        discovery: str = "zookeeper",
        address: str = "",
        bootstrap: Sequence[int] | None = None,
    ) -> Producer:
        """A producer of ``cluster``'s brokers, on ``store`` or on a session of its own (closed
        with the producer). ``bootstrap`` defaults to the cluster's broker ids at this moment."""
        own = store is None
        session = cluster.open_session() if store is None else store
        try:
            return cls.on_store(
                session,
                ReplicationTransport.of(cluster),
                config,
                discovery=discovery,
                address=address,
                bootstrap=list(cluster.broker_ids) if bootstrap is None else bootstrap,
                clock=cluster.clock,
                owned_store=session if own else None,
            )
        except Exception:
            if own:
                session.close()
            raise

    # -- metadata --------------------------------------------------------------------------------

    def refresh_metadata(self) -> ClusterMetadata:
        """Read the metadata of every topic sent to so far again."""
        with self._lock:
            self._cluster = self.metadata.fetch(self._topics)
            self.stats.metadata_refreshes += 1
            self._stale = False
            return self._cluster

    def _current(self) -> ClusterMetadata:
        if self._stale:
            return self.refresh_metadata()
        reachable = self.metadata.reachable()
        known = self._cluster.reachable
        if reachable is not known and reachable != known:
            # Discovery saw brokers come or go: partitions they lead change availability.
            self._cluster = attrs.evolve(self._cluster, reachable=reachable)
        return self._cluster

    def _metadata_for(self, topic: str) -> ClusterMetadata:
        if topic not in self._topics:
            self._topics.add(topic)
            self._stale = True
        cluster = self._current()
        if topic not in cluster.leaders:
            cluster = self.refresh_metadata()
            if topic not in cluster.leaders:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} does not exist (no /brokers/topics/{topic})"
                )
        return cluster

    @property
    def cluster(self) -> ClusterMetadata:
        """The metadata the producer uses now."""
        return self._cluster

    # -- sending ---------------------------------------------------------------------------------

    def send(self, record: ProducerRecord) -> Future[RecordMetadata]:
        """Queue ``record``; the future resolves when its batch is acknowledged (or fails).

        :raises InvalidPartitionError: an explicit partition is out of range.
        :raises UnknownTopicOrPartitionError: the topic does not exist.
        """
        with self._lock:
            self._check_open()
            topic = record.topic
            cluster = self._metadata_for(topic)
            partitioner = self.partitioner
            partition = partitioner.partition(record, cluster)
            new_batch = self._accumulator.needs_new_batch((topic, partition), record.size)
            if new_batch:
                partitioner.on_new_batch(topic, cluster, partition)
                partition = partitioner.partition(record, cluster)
            tp = (topic, partition)
            self.stats.placed[tp] += 1
            if not cluster.is_available(topic, partition):
                self.stats.unavailable_sends += 1
            future: Future[RecordMetadata] = Future()
            closed = self._accumulator.append(tp, record.size, future, self.clock.monotonic())
            partitioner.on_append(record, partition, cluster, self._accumulator.last_batch_full(tp))
            if (closed or new_batch) and self.config.drain_on_send:
                self._poll(None, linger=False)
        return future

    def produce(self, record: ProducerRecord) -> RecordMetadata:
        """Send ``record`` and wait for it (a flush): its metadata, or its error raised."""
        future = self.send(record)
        self.flush()
        return future.result(timeout=0)

    def poll(self, capacity: Mapping[int, int] | int | None = None) -> int:
        """Send the oldest ready batch of every partition whose leader is reachable.

        :param capacity: batches each broker takes in this round (a mapping per broker or one
            number for all; ``None``: no limit). The lab uses it to model slow brokers.
        :returns: the number of batches delivered.
        """
        with self._lock:
            self._check_open()
            return self._poll(capacity)

    def flush(self) -> None:
        """Close every open batch and send until nothing is left; batches that still cannot be
        sent after ``retries`` rounds (with metadata refreshed between) fail."""
        with self._lock:
            self._check_open()
            self._flush()

    def _flush(self) -> None:
        self._accumulator.close_all()
        for round_ in range(self.config.retries + 1):
            while self._poll(None) and self._accumulator.pending_batches():
                pass
            if not self._accumulator.pending_batches():
                return
            if round_ < self.config.retries:
                if self.config.retry_backoff:
                    time.sleep(self.config.retry_backoff)
                self.refresh_metadata()
        for batch in self._accumulator.drain_all():
            self._fail(
                batch,
                batch.last_error
                or LeaderNotAvailableError(
                    f"no leader for {batch.tp[0]}-{batch.tp[1]} after {self.config.retries} retries"
                ),
                remove=False,
            )

    def _poll(self, capacity: Mapping[int, int] | int | None, *, linger: bool = True) -> int:
        now = self.clock.monotonic()
        if linger:
            self._accumulator.close_lingered(now - self.config.linger)
        cluster = self._current()
        dynamic = self.discovery is None or self.discovery.follows_changes
        sent: Counter[int] = Counter()
        delivered = 0
        for batch in list(self._accumulator.heads()):
            topic, partition = batch.tp
            try:
                leader = cluster.leader(topic, partition)
            except UnknownTopicMetadataError:
                self._retry(batch, UnknownTopicOrPartitionError(f"no metadata for {topic!r}"))
                continue
            if leader == NO_LEADER:
                batch.last_error = LeaderNotAvailableError(
                    f"partition {topic}-{partition} has no leader (its state says -1)"
                )
                self._stale = True  # wait for one: not an attempt
                continue
            self._ready_since.setdefault(leader, now)
            self._drained_at.setdefault(leader, now)
            if cluster.reachable is not None and leader not in cluster.reachable:
                error = self._unreachable(topic, partition, leader)
                if dynamic:
                    batch.last_error = LeaderNotAvailableError(str(error))
                    self._stale = True
                else:
                    self._fail(batch, error)
                continue
            limit = (
                capacity if capacity is None or isinstance(capacity, int) else capacity.get(leader)
            )
            if limit is not None and sent[leader] >= limit:
                continue
            try:
                offset = self.transport.append(leader, batch.tp, batch.records)
            except RetriableSendError as exc:
                self._retry(batch, exc)
                continue
            except BrokerUnavailableError as exc:
                if dynamic:
                    self._retry(batch, exc)
                else:
                    self._fail(batch, self._unreachable(topic, partition, leader, str(exc)))
                continue
            sent[leader] += 1
            delivered += 1
            self._drained_at[leader] = now
            self._accumulator.remove(batch)
            self.stats.delivered(batch.tp, leader, batch.records)
            for index, future in enumerate(batch.futures):
                future.set_result(RecordMetadata(topic, partition, offset + index, leader))
        for leader in {b for b, _ in self._ready_leaders(cluster)}:
            self._ready_since[leader] = now
        if self._stale:
            self.refresh_metadata()
        if self.config.adaptive_partitioning:
            self._update_load(now)
        return delivered

    def _ready_leaders(self, cluster: ClusterMetadata) -> list[tuple[int, TP]]:
        out = []
        for batch in self._accumulator.heads():
            try:
                leader = cluster.leader(*batch.tp)
            except UnknownTopicMetadataError:
                continue
            if leader != NO_LEADER:
                out.append((leader, batch.tp))
        return out

    def _unreachable(
        self, topic: str, partition: int, leader: int, detail: str = ""
    ) -> BrokerUnavailableError:
        who = self.discovery.describe() if self.discovery is not None else "this producer"
        extra = f" ({detail})" if detail else ""
        return BrokerUnavailableError(
            f"partition {topic}-{partition} is led by broker {leader}, which {who} cannot "
            f"reach{extra}"
        )

    def _retry(self, batch: Batch, error: ProducerError) -> None:
        self._stale = True
        batch.attempts += 1
        batch.last_error = error
        if batch.attempts > self.config.retries:
            self._fail(batch, error)
        else:
            self.stats.retries += 1

    def _fail(self, batch: Batch, error: Exception, *, remove: bool = True) -> None:
        if remove:
            self._accumulator.remove(batch)
        self.stats.records_failed += batch.records
        for future in batch.futures:
            future.set_exception(error)

    def _update_load(self, now: float) -> None:
        """KIP-794: tell the partitioner each topic's queue sizes, leaving out partitions without
        a reachable leader and, with an availability timeout, those whose leader has had ready
        batches that it did not drain for longer than the timeout."""
        cluster = self._cluster
        timeout = self.config.availability_timeout
        for topic in self._topics:
            if topic not in cluster.leaders:
                continue
            partitions: list[int] = []
            sizes: list[int] = []
            for partition in cluster.available_partitions(topic):
                leader = cluster.leaders[topic][partition]
                if timeout > 0:
                    ready = self._ready_since.get(leader)
                    drained = self._drained_at.get(leader)
                    if ready is not None and drained is not None and ready - drained > timeout:
                        continue
                partitions.append(partition)
                sizes.append(self._accumulator.queue_size((topic, partition)))
            load = PartitionLoad(partitions, sizes, cluster.partition_count(topic))
            self.partitioner.update_load(topic, load)

    # -- reading ---------------------------------------------------------------------------------

    def totals(self) -> ProducerTotals:
        with self._lock:
            return self.stats.totals()

    def pending_batches(self) -> int:
        with self._lock:
            return self._accumulator.pending_batches()

    # -- lifecycle -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ProducerClosedError("the producer is closed")

    def close(self, *, flush: bool = True) -> None:
        """Flush (unless ``flush=False``), fail what is left, stop discovery, end an owned
        session."""
        with self._lock:
            if self._closed:
                return
            try:
                if flush:
                    self._flush()
            finally:
                self._closed = True
                for batch in self._accumulator.drain_all():
                    self._fail(batch, ProducerClosedError("the producer was closed"), remove=False)
                if self.discovery is not None:
                    self.discovery.close()
                store = self._owned_store
                if store is not None and store.state is not SessionState.CLOSED:
                    store.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Producer partitioner={self.config.partitioner!r} topics={sorted(self._topics)}>"
