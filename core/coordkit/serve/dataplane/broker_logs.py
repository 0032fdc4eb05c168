"""The logs of one broker's partition replicas (:class:`BrokerLogs`, Kafka's ``LogManager``'s
map of logs), each a :class:`~coordkit.serve.dataplane.log.PartitionLog` made on first use with
its topic's log config, loaded from and written through to the broker's log directory when it
has one; and what the process's replication and a served broker are to them.

Every log lives on the event loop's thread (see :mod:`coordkit.serve.listener`), so nothing here
takes a lock. Fetches that found too little wait on :meth:`BrokerLogs.changed` (long polling):
every append, and every move of a high watermark, sets the current event and replaces it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from coordkit.engine.states import TP
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.log_config import LogConfig
from coordkit.serve.dataplane.producer_state import ProducerIds

if TYPE_CHECKING:
    from coordkit.engine.broker import Broker
    from coordkit.serve.dataplane.logdir import LogDirectory


class LocalBroker(Protocol):
    """A broker of this process as replication sees it (``coordkit serve``'s
    :class:`~coordkit.serve.context.BrokerContext` is one)."""

    @property
    def broker_id(self) -> int: ...

    @property
    def broker(self) -> Broker:
        """The engine broker (replication stops with it)."""
        ...

    @property
    def logs(self) -> BrokerLogs: ...


class Replication(Protocol):
    """What a broker's logs tell the process's replication, and ask it
    (:class:`~coordkit.serve.dataplane.replicas.Replicas` keeps this protocol)."""

    def appended(self, host: LocalBroker, tp: TP, partition_log: PartitionLog, count: int) -> None:
        """Leader ``host`` appended ``count`` records to ``tp``."""
        ...

    def follower_fetched(self, host: LocalBroker, follower: int, tp: TP, offset: int) -> None:
        """A follower in another process fetched ``tp`` from leader ``host`` at ``offset``."""
        ...

    def high_watermark(self, tp: TP, partition_log: PartitionLog) -> int:
        """The leader's high watermark of ``tp``."""
        ...

    async def wait_committed(self, host: LocalBroker, tp: TP, offset: int, timeout: float) -> int:
        """Wait until ``tp``'s high watermark reaches ``offset``; an error code."""
        ...


class BrokerLogs:
    """The logs of the partition replicas one broker holds (created on first use); with a
    ``directory``, loaded from it and written through to it. ``config``: each topic's log
    config (a :class:`LogConfig` for every topic, or a lookup by topic name)."""

    def __init__(
        self,
        directory: LogDirectory | None = None,
        config: LogConfig | Callable[[str], LogConfig] | None = None,
    ) -> None:
        self.directory = directory
        if config is None or isinstance(config, LogConfig):
            fixed = config or LogConfig()
            self.config_of: Callable[[str], LogConfig] = lambda _topic: fixed
        else:
            self.config_of = config
        self._logs: dict[TP, PartitionLog] = {}
        if directory is not None:
            for tp, stored in directory.stored().items():
                self._logs[tp] = PartitionLog.loaded(
                    stored, directory.segment(tp), self.config_of(tp[0]),
                    checkpointed_start=directory.checkpointed_log_start(tp),
                )  # fmt: skip
        self._changed = asyncio.Event()
        #: The process's replication (set by :class:`~coordkit.serve.dataplane.replicas.Replicas`).
        self.replicas: Replication | None = None
        #: The producer ids this broker hands out (InitProducerId).
        self.producer_ids = ProducerIds()

    def get(self, tp: TP) -> PartitionLog:
        log = self._logs.get(tp)
        if log is None:
            files = None if self.directory is None else self.directory.segment(tp)
            log = self._logs[tp] = PartitionLog(files, self.config_of(tp[0]))
        return log

    def logs(self) -> list[tuple[TP, PartitionLog]]:
        """Every log this broker holds."""
        return list(self._logs.items())

    def reconfigure(self, topic: str | None = None) -> None:
        """Read the log config of ``topic``'s logs again (every topic's when ``None``): a
        topic config changed."""
        for tp, partition_log in self._logs.items():
            if topic is None or tp[0] == topic:
                partition_log.config = self.config_of(tp[0])

    def find(self, tp: TP) -> PartitionLog | None:
        return self._logs.get(tp)

    def drop_topic(self, topic: str) -> None:
        """Forget every log of ``topic`` (it was deleted: a topic created again under its name
        starts empty)."""
        for tp in [tp for tp in self._logs if tp[0] == topic]:
            del self._logs[tp]
            if self.directory is not None:
                self.directory.remove(tp)

    def drop_partition(self, tp: tuple[str, int]) -> bool:
        """Forget this broker's log of ``tp`` and delete its files (a reassignment moved the
        replica away: Kafka's StopReplica with ``deletePartition``); whether there was one."""
        if self._logs.pop(tp, None) is None:
            return False
        if self.directory is not None:
            self.directory.remove(tp)
        return True

    def stored_topics(self) -> set[str]:
        """The topics this broker holds a log of."""
        return {topic for topic, _ in self._logs}

    def close(self) -> None:
        """Close the log directory (its logs flushed) and files (the logs stay readable in
        memory)."""
        if self.directory is not None:
            self.directory.close()

    def changed(self) -> asyncio.Event:
        """Set at the next append to any of this broker's logs or move of a high watermark."""
        return self._changed

    def appended(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()
