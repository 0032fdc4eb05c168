"""What the engine tells observers: in-process listeners plus the plugin hooks.

Every event goes to the process-wide plugin manager's observer hooks (``coordkit_broker_registered``,
``coordkit_controller_changed``, ``coordkit_leader_elected``) and to the :class:`EngineObserver`
objects registered on the engine instance (the replication model, the lab, tests). Observer
failures are logged, never raised into the engine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import attrs

from coordkit.engine.states import TP, LeaderIsr
from coordkit.engine.strategies import NO_PLUGIN_EVENTS, PluginEvents
from coordkit.kafka.model import BrokerInfo
from coordkit.strategies.elections import ElectionReason

log = logging.getLogger("coordkit.engine")


@attrs.frozen
class StateChange:
    """One partition state written to the store.

    :param previous: the state it replaced (``None`` for a new partition).
    :param reason: the election that chose the leader, ``None`` for an ISR-only change (shrink
        after a broker loss, expansion by the leader) or for a partition left without a leader.
    :param writer: the broker whose session wrote it.
    :param replicas: the partition's replica assignment, when the writer knows it.
    """

    tp: TP
    previous: LeaderIsr | None
    current: LeaderIsr
    reason: ElectionReason | None
    writer: int
    replicas: tuple[int, ...] = ()

    @property
    def leader_changed(self) -> bool:
        return self.previous is None or self.previous.leader != self.current.leader

    @property
    def unclean(self) -> bool:
        return self.reason is ElectionReason.UNCLEAN


class EngineObserver:
    """Base class for in-process observers; override what you need."""

    def broker_registered(self, broker_id: int, info: BrokerInfo, session_id: int) -> None:
        """A broker (re-)registered ``/brokers/ids/N``."""

    def broker_stopped(self, broker_id: int, controlled: bool) -> None:
        """A broker process stopped (``controlled``: after a controlled shutdown)."""

    def controller_changed(self, broker_id: int | None, epoch: int) -> None:
        """A broker won the controller epoch ``epoch``, or (``None``) a controller's term ended."""

    def controller_ready(self, broker_id: int, epoch: int, seconds: float) -> None:
        """A new controller loaded the cluster and re-elected what needed it in ``seconds``."""

    def partition_states_changed(self, changes: Sequence[StateChange]) -> None:
        """Partition states were written (a batch of one multi-op or more)."""

    def partition_states_known(self, states: Sequence[StateChange]) -> None:
        """A new controller loaded these states; nothing was written (Kafka's LeaderAndIsr to
        every broker on failover). ``previous`` and ``current`` are the same state."""

    def topic_deleted(self, topic: str) -> None:
        """A topic's nodes were removed."""

    def replicas_removed(self, tp: TP, replicas: tuple[int, ...], leader_epoch: int) -> None:
        """A finished reassignment took ``replicas`` off ``tp`` (at ``leader_epoch``): they stop
        and delete their logs (Kafka's StopReplica with ``deletePartition``)."""


class Observers(EngineObserver):
    """Fans events out to registered observers and to ``events`` (the plugins' event hooks)."""

    def __init__(self, *observers: EngineObserver, events: PluginEvents = NO_PLUGIN_EVENTS):
        self._observers: list[EngineObserver] = list(observers)
        self.events = events
        self._lock = threading.Lock()

    def add(self, observer: EngineObserver) -> None:
        with self._lock:
            self._observers.append(observer)

    def remove(self, observer: EngineObserver) -> None:
        with self._lock:
            if observer in self._observers:
                self._observers.remove(observer)

    def _each(self) -> list[EngineObserver]:
        with self._lock:
            return list(self._observers)

    def broker_registered(self, broker_id: int, info: BrokerInfo, session_id: int) -> None:
        _safely(self.events.notify_broker_registered, broker_id, info.host, info.port)
        for observer in self._each():
            _safely(observer.broker_registered, broker_id, info, session_id)

    def broker_stopped(self, broker_id: int, controlled: bool) -> None:
        for observer in self._each():
            _safely(observer.broker_stopped, broker_id, controlled)

    def controller_changed(self, broker_id: int | None, epoch: int) -> None:
        _safely(self.events.notify_controller_changed, broker_id, epoch)
        for observer in self._each():
            _safely(observer.controller_changed, broker_id, epoch)

    def controller_ready(self, broker_id: int, epoch: int, seconds: float) -> None:
        for observer in self._each():
            _safely(observer.controller_ready, broker_id, epoch, seconds)

    def partition_states_changed(self, changes: Sequence[StateChange]) -> None:
        if not changes:
            return
        events = self.events
        # Skip building hook arguments for 100,000s of partitions when no plugin listens.
        if events.wants_leader_elections():
            for change in changes:
                if change.reason is not None and change.current.has_leader:
                    _safely(
                        events.notify_leader_elected,
                        change.tp[0],
                        change.tp[1],
                        change.current.leader,
                        change.current.leader_epoch,
                        list(change.current.isr),
                        change.reason.value,
                    )
        for observer in self._each():
            _safely(observer.partition_states_changed, changes)

    def partition_states_known(self, states: Sequence[StateChange]) -> None:
        if not states:
            return
        for observer in self._each():
            _safely(observer.partition_states_known, states)

    def topic_deleted(self, topic: str) -> None:
        for observer in self._each():
            _safely(observer.topic_deleted, topic)

    def replicas_removed(self, tp: TP, replicas: tuple[int, ...], leader_epoch: int) -> None:
        for observer in self._each():
            _safely(observer.replicas_removed, tp, replicas, leader_epoch)


def _safely(fn: object, *args: object) -> None:
    try:
        fn(*args)  # type: ignore[operator]
    except Exception:
        log.exception("engine observer %r failed", fn)
