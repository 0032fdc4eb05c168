"""``coordkit serve``'s process: N engine brokers, each with a Kafka listener of its own.

Sockets are bound first (a port in use is refused before anything reaches the store), then the
brokers start and register their real host and port in ``/brokers/ids/N`` — with Kafka's
``endpoints`` (``PLAINTEXT://host:port``) — and then every listener serves on one asyncio loop
until :meth:`KafkaServer.stop` (or SIGINT / SIGTERM in :meth:`KafkaServer.run`).

A process may run some of a cluster's brokers only (``coordkit serve --broker-id N`` runs one):
brokers of several processes on one store form one cluster, whose controller is elected among
them through the store; each process follows the partition states the others write
(:mod:`coordkit.serve.dataplane.follower`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from coordkit.engine import EngineConfig
from coordkit.engine.cluster_id import get_or_create_cluster_id
from coordkit.engine.errors import EngineError
from coordkit.engine.states import TP
from coordkit.engine.strategies import Strategies
from coordkit.engine.topics import TopicAdmin
from coordkit.errors import StoreError
from coordkit.kafka.layout import BROKER_TOPICS
from coordkit.protocol import KafkaCodec
from coordkit.serve.authorization import start_authorizer
from coordkit.serve.binding import ServeError
from coordkit.serve.context import BrokerContext, ServeSettings
from coordkit.serve.control_plane.channel import ControllerChannelManager
from coordkit.serve.control_plane.client import WireControllerClient, shut_down_controlled
from coordkit.serve.control_plane.connector import broker_connector
from coordkit.serve.control_plane.metadata_cache import MetadataCache
from coordkit.serve.dataplane.broker_logs import BrokerLogs
from coordkit.serve.dataplane.follower import TopicsFollower
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.log_config import LogConfig
from coordkit.serve.dataplane.logdir import LogDirectory, broker_log_dir
from coordkit.serve.dataplane.remote_replicas import RemoteFollower
from coordkit.serve.dataplane.replicas import Replicas
from coordkit.serve.dataplane.retention import LogManager
from coordkit.serve.listener import BrokerListener
from coordkit.serve.listeners import SecurityConfigs, parse_security_configs
from coordkit.serve.listeners.bound import bind_listeners
from coordkit.serve.serving_cluster import ServingCluster
from coordkit.serve.topic_configs import MIN_INSYNC_REPLICAS, TOPIC_CONFIGS, TopicConfigs
from coordkit.serve.topic_ids import TopicIds, read_topic_ids
from coordkit.serve.transactions.coordinator import close_coordinators, start_coordinators
from coordkit.serve.transactions.verification import close_verifiers
from coordkit.store.tree import children
from coordkit.strategies.authorization import Authorizer

log = logging.getLogger("coordkit.serve")


class KafkaServer:
    """Brokers ``broker_ids`` on ``store_url``, listening on ``host`` from ``port`` on (broker
    ``i`` of the list on ``port + i``; ``port`` 0: any free port for each); with ``data_dir``,
    broker N keeps its record logs in ``data_dir/broker-N`` (Kafka's ``log.dirs``) and loads
    them at the start; ``strategies``, what the brokers run with (by default the ones ``config``
    names, from the registered plugins)."""

    def __init__(
        self,
        store_url: str,
        broker_ids: Sequence[int],
        *,
        host: str = "127.0.0.1",
        port: int = 9092,
        settings: ServeSettings | None = None,
        config: EngineConfig | None = None,
        data_dir: Path | None = None,
        strategies: Strategies | None = None,
        security: SecurityConfigs | None = None,
    ) -> None:
        self.settings = settings or ServeSettings()
        self.codec = KafkaCodec(max_frame_bytes=self.settings.max_request_bytes)
        # Without Kafka's ``listeners``: one PLAINTEXT listener on host:port.
        security = security or parse_security_configs((), host, port)
        # Log directories before sockets and store: a directory in use is refused first.
        self._log_dirs: dict[int, LogDirectory] = {}
        try:
            if data_dir is not None:
                for broker_id in broker_ids:
                    self._log_dirs[broker_id] = LogDirectory(broker_log_dir(data_dir, broker_id))
        except BaseException:
            self._close_log_dirs()
            raise
        try:
            # How brokers here connect to others (the inter-broker listener's TLS and login).
            self.connector = broker_connector(security)
            # The inter-broker listener first: the address each broker registers and peers use.
            self.bound = bind_listeners(security, broker_ids)
        except BaseException:
            self._close_log_dirs()
            raise
        self._sockets = [sock for bound in self.bound for sock in bound.sockets.values()]
        self.addresses = {broker_id: self.bound[0].address(broker_id) for broker_id in broker_ids}
        endpoints = {b: tuple(bound.endpoint(b) for bound in self.bound) for b in broker_ids}
        #: Topic ids and names, shared by every broker of the process.
        self.topic_ids = TopicIds()
        # A controller elected here tells brokers of other processes over the wire.
        self.controller_channel = ControllerChannelManager(
            broker_ids,
            self.topic_ids.id_of,
            lambda: self.topic_ids.refresh(self.cluster.admin_store),
            self.connector,
        )
        self.cluster = ServingCluster(
            store_url,
            self.addresses,
            config=config,
            strategies=strategies,
            broker_requests=self.controller_channel,
            controller_client=WireControllerClient(
                lambda: self.cluster.admin_store, self.connector
            ),
            endpoints=endpoints,
        )
        #: Each broker's inter-broker listener, and its other listeners (on the same context).
        self.listeners: list[BrokerListener] = []
        self.other_listeners: list[BrokerListener] = []
        self.follower: TopicsFollower | None = None
        self.metadata: MetadataCache | None = None
        self.replicas: Replicas | None = None
        self.remote_followers: list[RemoteFollower] = []
        #: Each broker's log retention and flush tasks (Kafka's LogManager).
        self.log_managers: list[LogManager] = []
        self._stopping: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested = threading.Event()
        #: Topic configs, shared by every broker of the process (read from the start).
        self.topic_configs: TopicConfigs | None = None
        #: The authorizer ``authorizer.class.name`` names, shared by the process's brokers.
        self.authorizer: Authorizer | None = None

    def start_brokers(self) -> None:
        """Start the engine brokers (they register; one becomes the controller).

        :raises LogDirError: a log directory is another broker's or cluster's.
        """
        try:
            self._claim_log_dirs()
            self.cluster.start()
        except BaseException:
            self.close()
            raise
        replication = self.cluster.replication
        replication.min_isr_default = self.settings.topic_defaults.get(
            MIN_INSYNC_REPLICAS, TOPIC_CONFIGS[MIN_INSYNC_REPLICAS].default
        )
        configs = self.topic_configs = TopicConfigs(
            self.cluster.admin_store,
            self.settings.topic_defaults,
            changed=self._configs_read,
            static=self.settings.static_configs,
        )
        configs.start()
        try:
            self.authorizer = start_authorizer(
                self.cluster.strategies, self.cluster.admin_store, self.settings.static_configs
            )
        except BaseException:
            self.close()
            raise
        for broker_id in self.addresses:
            broker = self.cluster.broker(broker_id)
            address = self.addresses[broker_id]
            ctx = BrokerContext(
                broker=broker,
                host=address.host,
                port=address.port,
                replication=self.cluster.replication,
                admin=TopicAdmin(broker.store, placement=self.cluster.strategies.placement),
                settings=self.settings,
                topic_ids=self.topic_ids,
                topic_configs=configs,
                authorizer=self.authorizer,
                connector=self.connector,
            )
            ctx.logs = BrokerLogs(self._log_dirs.get(broker_id), self._log_config)
            first, *others = self.bound
            self.listeners.append(
                BrokerListener(ctx, first.sockets[broker_id], self.codec, first.security)
            )
            self.other_listeners += [
                BrokerListener(ctx, bound.sockets[broker_id], self.codec, bound.security)
                for bound in others
            ]
        self._drop_logs_of_deleted_topics()
        contexts = [listener.ctx for listener in self.listeners]
        self.metadata = MetadataCache(
            self.cluster.replication,
            self.addresses,
            deleted=self._drop_topic,
            topic_ids=self._add_topic_ids,
            replicas_deleted=self._drop_replicas,
        )
        self.cluster.observers.add(self.metadata)
        for ctx in contexts:
            ctx.metadata = self.metadata
        self.replicas = Replicas(self.cluster.replication, contexts, self.cluster.config)
        self.log_managers = [
            LogManager(
                ctx.broker_id,
                ctx.logs,
                self._high_watermark_of(ctx.broker_id),
                retention_check_interval_ms=self.settings.log_retention_check_interval_ms,
                cleaner_backoff_ms=self.settings.log_cleaner_backoff_ms,
                flush_scheduler_interval_ms=self.settings.log_flush_scheduler_interval_ms,
            )
            for ctx in contexts
        ]
        self.follower = TopicsFollower(
            self.cluster.admin_store,
            self.cluster.replication,
            self.addresses,
            self._drop_topic,
            topic_ids=self._note_topic_ids,
            connector=self.connector,
        )
        self.cluster.observers.add(self.follower)
        self.follower.start()
        follower, metadata = self.follower, self.metadata
        self.remote_followers = [
            RemoteFollower(
                ctx,
                self.cluster.replication,
                list(self.addresses),
                lambda: {**metadata.broker_addresses, **follower.broker_addresses},
                self.cluster.config.replica_fetch_wait_max,
            )
            for ctx in contexts
        ]

    def _configs_read(self, topic: str) -> None:
        """``topic``'s configs were read: the replication model holds its high watermark under
        its ``min.insync.replicas``."""
        configs = self.topic_configs
        if configs is not None:
            self.cluster.replication.set_min_isr(topic, configs.value(topic, MIN_INSYNC_REPLICAS))
        loop = self._loop
        if loop is not None and loop.is_running():
            with contextlib.suppress(RuntimeError):  # the loop is closed: so are the logs
                loop.call_soon_threadsafe(self._reconfigure_logs, topic)

    def _reconfigure_logs(self, topic: str) -> None:
        for listener in self.listeners:
            listener.ctx.logs.reconfigure(topic)

    def _log_config(self, topic: str) -> LogConfig:
        """``topic``'s log config (Kafka's ``LogConfig``): its topic configs (over the broker's
        defaults, :mod:`coordkit.serve.topic_configs`) and the broker's index settings."""
        settings = self.settings
        base = LogConfig(index_interval_bytes=settings.log_index_interval_bytes,
                         max_index_size=settings.log_index_size_max_bytes)  # fmt: skip
        configs = self.topic_configs
        if configs is None:
            return base
        return LogConfig.of(lambda name: configs.value(topic, name), base)

    def _high_watermark_of(self, broker_id: int) -> Callable[[TP, PartitionLog], int]:
        """A log's high watermark as broker ``broker_id`` knows it, for its retention: the
        leader's (this process's model), or, for a partition led in another process, the one
        its leader last told (a follower's high watermark, capped by its own log end)."""

        def high_watermark(tp: TP, partition_log: PartitionLog) -> int:
            for remote in self.remote_followers:
                if remote.ctx.broker_id == broker_id and tp in remote.high_watermarks:
                    return min(remote.high_watermarks[tp], partition_log.log_end)
            replicas = self.replicas
            return 0 if replicas is None else replicas.high_watermark(tp, partition_log)

        return high_watermark

    def _claim_log_dirs(self) -> None:
        """Make each log directory its broker's, of the store's cluster (its ``meta.properties``,
        checked or written), before the brokers register, as Kafka checks at its start."""
        if not self._log_dirs:
            return
        session = self.cluster.open_session()
        try:
            cluster_id = get_or_create_cluster_id(session)
        finally:
            session.close()
        for broker_id, log_dir in self._log_dirs.items():
            log_dir.claim(broker_id, cluster_id)

    def _drop_logs_of_deleted_topics(self) -> None:
        """Logs loaded from disk whose topic the store no longer has, or has under another topic
        id (their ``partition.metadata``), belong to topics deleted while the broker was down:
        drop them (Kafka deletes such stray logs too). Logs without a ``partition.metadata``
        get one."""
        stored = set().union(*(lsn.ctx.logs.stored_topics() for lsn in self.listeners))
        if not stored:
            return
        topic_ids = self._read_topic_ids()
        existing = set(children(self.cluster.admin_store, BROKER_TOPICS))
        for topic in sorted(stored - existing):
            log.info("dropping the logs of topic %r: the store no longer has it", topic)
            self._drop_logs(topic)
        for topic in sorted(stored & existing):
            stale = {
                found
                for log_dir in self._log_dirs.values()
                for (name, _), found in log_dir.stored_topic_ids.items()
                if name == topic and found != topic_ids.get(topic, found)
            }
            if stale:
                log.info("dropping the logs of topic %r: they are of topic id %s, the store's "
                         "topic is %s (created again)", topic, ", ".join(sorted(stale)),
                         topic_ids[topic])  # fmt: skip
                self._drop_logs(topic)
        self._note_topic_ids(topic_ids)

    def _read_topic_ids(self) -> dict[str, str]:
        """The id of every topic in the store that has one."""
        return read_topic_ids(self.cluster.admin_store)

    def _note_topic_ids(self, topic_ids: dict[str, str]) -> None:
        """Hand the store's topic ids (every topic's) to the brokers' map and the log
        directories."""
        self.topic_ids.update(topic_ids)
        self._hand_topic_ids(topic_ids)

    def _add_topic_ids(self, topic_ids: dict[str, str]) -> None:
        """Topic ids a controller's request told (some topics, not every one)."""
        for name, text in topic_ids.items():
            try:
                self.topic_ids.add(name, text)
            except ValueError as exc:
                log.warning("topic %r is served without its id: %s", name, exc)
        self._hand_topic_ids(topic_ids)

    def _hand_topic_ids(self, topic_ids: dict[str, str]) -> None:
        """Topic ids to the log directories (their partitions' ``partition.metadata``), on the
        event loop that owns them."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: so are the logs
                loop.call_soon_threadsafe(self._give_topic_ids, topic_ids)
            return
        self._give_topic_ids(topic_ids)

    def _give_topic_ids(self, topic_ids: dict[str, str]) -> None:
        for log_dir in self._log_dirs.values():
            log_dir.topic_ids_known(topic_ids)

    def _complete_partition_metadata(self) -> None:
        """Partitions created since the follower last read the topics get their
        ``partition.metadata`` before the directories close."""
        if not any(log_dir.waiting_for_topic_ids() for log_dir in self._log_dirs.values()):
            return
        try:
            self._give_topic_ids(self._read_topic_ids())
        except (StoreError, EngineError) as exc:
            log.warning("partition.metadata not written for every partition: %s", exc)

    def _write_high_watermarks(self) -> None:
        """Each log directory's ``replication-offset-checkpoint``, as a Kafka broker writes it
        when it stops: the high watermarks this process knows, or, for a partition led in
        another process, the one its leader last told."""
        told = {remote.ctx.broker_id: remote.high_watermarks for remote in self.remote_followers}
        for broker_id, log_dir in self._log_dirs.items():
            marks = dict(told.get(broker_id, {}))
            for tp in log_dir.partitions():
                state = self.cluster.replication.log(tp)
                if state is not None:
                    marks[tp] = max(state.hw, marks.get(tp, 0))
            try:
                log_dir.write_high_watermarks(marks)
            except OSError as exc:
                log.warning("log directory %s: high watermarks not written: %s", log_dir.path,
                            exc.strerror)  # fmt: skip

    def _close_log_dirs(self) -> None:
        for log_dir in self._log_dirs.values():
            log_dir.close()
        self._log_dirs.clear()

    def _drop_topic(self, topic: str) -> None:
        """Drop a deleted topic's served logs, on the event loop that owns them; its id names
        nothing any more."""
        self.topic_ids.forget(topic)
        if self.topic_configs is not None:
            self.topic_configs.forget(topic)
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: so are the logs
                loop.call_soon_threadsafe(self._drop_logs, topic)
            return
        self._drop_logs(topic)

    def _drop_replicas(self, tp: TP, brokers: tuple[int, ...]) -> None:
        """Drop the logs of ``tp`` of this process's ``brokers`` (a reassignment moved them
        away), on the event loop that owns them."""

        def drop() -> None:
            for listener in self.listeners:
                if listener.ctx.broker_id in brokers and listener.ctx.logs.drop_partition(tp):
                    log.info("broker %s: %s-%s moved away by a reassignment: its log deleted",
                             listener.ctx.broker_id, *tp)  # fmt: skip

        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: so are the logs
                loop.call_soon_threadsafe(drop)
            return
        drop()

    def _drop_logs(self, topic: str) -> None:
        for listener in self.listeners:
            listener.ctx.logs.drop_topic(topic)

    async def serve(self, ready: Callable[[], None] | None = None) -> None:
        """Serve every listener until :meth:`stop`, SIGINT or SIGTERM; ``ready`` is called once
        every listener accepts and the signals are handled (so a Ctrl-C from then on stops
        cleanly)."""
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        if self._stop_requested.is_set():  # asked before the loop ran: see stop()
            self._stopping.set()
        with contextlib.ExitStack() as stack:
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    self._loop.add_signal_handler(signum, self._stopping.set)
                    stack.callback(self._loop.remove_signal_handler, signum)
            for listener in [*self.listeners, *self.other_listeners]:
                await listener.start()
            if self.replicas is not None:
                self.replicas.start()
            for remote in self.remote_followers:
                remote.start()
            for manager in self.log_managers:
                manager.start()
            start_coordinators(listener.ctx for listener in self.listeners)
            if ready is not None:
                ready()
            try:
                await self._stopping.wait()
                # While the listeners still serve: leaders move, followers keep fetching.
                await asyncio.to_thread(shut_down_controlled, self.cluster, list(self.addresses))
            finally:
                for listener in [*self.listeners, *self.other_listeners]:
                    await listener.close()
                if self.replicas is not None:
                    await self.replicas.close()
                for remote in self.remote_followers:
                    await remote.close()
                for manager in self.log_managers:
                    await manager.close()
                await close_coordinators(listener.ctx for listener in self.listeners)
                close_verifiers(listener.ctx for listener in self.listeners)

    def stop_broker(self, broker_id: int, timeout: float = 30.0) -> None:
        """Crash broker ``broker_id`` while :meth:`serve` runs (from another thread): its
        listener closes and its session ends without a controlled shutdown, so the controller
        moves its leaderships (a failover test's broker failure)."""
        loop = self._loop
        if loop is None:
            raise ServeError("the server is not serving")
        for listener in [*self.listeners, *self.other_listeners]:
            if listener.ctx.broker_id == broker_id:
                asyncio.run_coroutine_threadsafe(listener.close(), loop).result(timeout)
        self.cluster.kill(broker_id)

    def stop(self) -> None:
        """Ask :meth:`serve` to return (from any thread, before or while it runs)."""
        self._stop_requested.set()
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            loop.call_soon_threadsafe(stopping.set)

    def run(self) -> None:
        """Start the brokers, serve until SIGINT / SIGTERM, stop everything."""
        with self.running():
            asyncio.run(self.serve())

    @contextlib.contextmanager
    def running(self) -> Iterator[KafkaServer]:
        self.start_brokers()
        try:
            yield self
        finally:
            self.close()

    def close(self) -> None:
        if self.authorizer is not None:
            self.authorizer.close()
            self.authorizer = None
        if self.topic_configs is not None:
            self.topic_configs.stop()
        if self.follower is not None:
            self.follower.stop()
            self.cluster.observers.remove(self.follower)
        if self.metadata is not None:
            self.cluster.observers.remove(self.metadata)
        for sock in self._sockets:
            sock.close()
        self._complete_partition_metadata()
        self.cluster.close()
        self.controller_channel.close()
        self._write_high_watermarks()
        self._close_log_dirs()
