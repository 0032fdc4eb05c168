"""What the controller tells brokers after each pass (Kafka's ``ControllerBrokerRequestBatch``),
and the channel it is sent through (Kafka's ``ControllerChannelManager``, handed in).

In one process the brokers hear every state the controller writes through the engine's observers.
Brokers elsewhere — ``coordkit serve --broker-id`` processes, Kafka 3.9 brokers — hear it as Kafka's
brokers do, from the controller's requests: LeaderAndIsr to a partition's replicas when its leader
or ISR was decided, UpdateMetadata to every live broker with the changed partitions and the live
brokers, StopReplica to the replicas of a deleted topic. This module decides *what* each broker
is told, per pass, in Kafka's order (LeaderAndIsr, then UpdateMetadata, then StopReplica); the
channel (:class:`BrokerRequestChannel`, given by whoever runs the controller) decides *how*: over
the wire to the brokers it can reach, nothing for the brokers of its own process.

Full announcements follow Kafka: a new controller tells every live broker everything (full
UpdateMetadata, LeaderAndIsr of the partitions it replicates); a broker that registered (again)
is told the same; everyone else hears of the new live broker set.

Nothing is collected while the channel has no broker to reach (:meth:`BrokerRequestChannel.targets`
is empty): a cluster in one process pays nothing, and a warm failover stays flat.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import attrs

from coordkit.engine.controller.partition_map import PartitionMap
from coordkit.engine.events import EngineObserver, StateChange
from coordkit.engine.states import TP, LeaderIsr
from coordkit.kafka.model import BrokerInfo

#: Kafka's ``LeaderAndIsr.EpochDuringDelete``: the leader epoch StopReplica carries for a topic
#: being deleted (and ``LeaderDuringDelete``, the leader UpdateMetadata names for it).
EPOCH_DURING_DELETE = -2
LEADER_DURING_DELETE = -2


@attrs.frozen
class LiveBroker:
    """A registered broker as the controller knows it: its registration and broker epoch (the
    czxid of its registration node, KIP-380)."""

    broker_id: int
    epoch: int
    info: BrokerInfo


@attrs.frozen
class PartitionState:
    """A partition's state as a request carries it."""

    tp: TP
    state: LeaderIsr
    replicas: tuple[int, ...]


@attrs.frozen
class StoppedReplica:
    """A replica to stop (StopReplica): ``delete`` its log too."""

    tp: TP
    leader_epoch: int
    delete: bool


@attrs.define
class BrokerRequests:
    """What one broker is told after a pass, in the order it is sent."""

    leader_and_isr: list[PartitionState] = attrs.field(factory=list)
    update_metadata: list[PartitionState] = attrs.field(factory=list)
    #: Partitions of topics being deleted: UpdateMetadata names them with the deletion leader.
    deleting: list[PartitionState] = attrs.field(factory=list)
    stop_replica: list[StoppedReplica] = attrs.field(factory=list)
    #: An UpdateMetadata goes even with no partition (the live brokers changed).
    update_brokers: bool = False

    def __bool__(self) -> bool:
        return bool(self.leader_and_isr or self.update_metadata or self.deleting
                    or self.stop_replica or self.update_brokers)  # fmt: skip


@attrs.frozen
class ControllerRequests:
    """One pass's requests: from controller ``controller_id`` in ``controller_epoch``."""

    controller_id: int
    controller_epoch: int
    live: Mapping[int, LiveBroker]
    to: Mapping[int, BrokerRequests]


class BrokerRequestChannel(Protocol):
    """How a controller's requests reach brokers (Kafka's ``ControllerChannelManager``)."""

    def targets(self, live: Iterable[int]) -> set[int]:
        """The brokers of ``live`` this channel sends to (the others hear in-process)."""
        ...

    def send(self, requests: ControllerRequests) -> None:
        """Queue ``requests`` for their brokers (never blocks the controller on a broker)."""
        ...

    def term_ended(self, controller_epoch: int) -> None:
        """The controller of ``controller_epoch`` stopped: drop what it queued."""
        ...


class RequestBatch(EngineObserver):
    """The requests of one pass, collected as the controller writes (Kafka's
    ``ControllerBrokerRequestBatch``): an observer of the controller's own writes, plus explicit
    additions for what is not a write (a broker's start, a deletion, a failover)."""

    def __init__(self, channel: BrokerRequestChannel, controller_id: int, epoch: int) -> None:
        self.channel = channel
        self.controller_id = controller_id
        self.epoch = epoch
        self._targets: set[int] = set()
        self._live: dict[int, LiveBroker] = {}
        self._changed: dict[TP, PartitionState] = {}
        self._deleting: dict[TP, PartitionState] = {}
        self._to: dict[int, BrokerRequests] = {}
        # Writes in flight may tell their changes from other threads.
        self._lock = threading.Lock()

    # -- the pass ------------------------------------------------------------------------------

    def begin(self, live: Mapping[int, tuple[BrokerInfo, int]]) -> bool:
        """Start a pass with the live brokers; whether anyone is to be told anything."""
        with self._lock:
            self._changed, self._deleting, self._to = {}, {}, {}
        return self.live_changed(live)

    def live_changed(self, live: Mapping[int, tuple[BrokerInfo, int]]) -> bool:
        """The live brokers as the pass read them again; whether anyone is to be told."""
        with self._lock:
            self._live = {b: LiveBroker(b, epoch, info) for b, (info, epoch) in live.items()}
            self._targets = self.channel.targets(self._live)
            return bool(self._targets)

    def _for(self, broker: int) -> BrokerRequests:
        found = self._to.get(broker)
        if found is None:
            found = self._to[broker] = BrokerRequests()
        return found

    def partition_states_changed(self, changes: Sequence[StateChange]) -> None:
        if not self._targets:
            return
        with self._lock:
            self._written(changes)

    def _written(self, changes: Sequence[StateChange]) -> None:
        for change in changes:
            replicas = change.replicas
            state = PartitionState(change.tp, change.current, replicas)
            self._changed[change.tp] = state
            # A new leader epoch is a leadership decision (a new leader, or an ISR shrunk by
            # the controller): the replicas hear it by LeaderAndIsr; any change by UpdateMetadata.
            previous = change.previous
            if previous is None or previous.leader_epoch != change.current.leader_epoch:
                for broker in replicas:
                    if broker in self._targets:
                        self._for(broker).leader_and_isr.append(state)

    def partition_states_known(self, states: Sequence[StateChange]) -> None:
        """States read, not written (ISR changes leaders wrote): UpdateMetadata only."""
        if not self._targets:
            return
        with self._lock:
            for change in states:
                self._changed[change.tp] = PartitionState(change.tp, change.current,
                                                          change.replicas)  # fmt: skip

    def topic_deleting(self, partitions: Mapping[int, tuple[int, ...]], topic: str,
                       states: Mapping[int, LeaderIsr | None]) -> None:  # fmt: skip
        """``topic`` is being deleted: every broker learns it (UpdateMetadata with the deletion
        leader), its replicas stop and delete their logs (StopReplica)."""
        if not self._targets:
            return
        for partition, replicas in partitions.items():
            tp = (topic, partition)
            found = states.get(partition)
            epoch = found.controller_epoch if found is not None else self.epoch
            deleting = LeaderIsr(LEADER_DURING_DELETE, EPOCH_DURING_DELETE, tuple(replicas), epoch)
            self._deleting[tp] = PartitionState(tp, deleting, tuple(replicas))
            self._changed.pop(tp, None)
            for broker in replicas:
                if broker in self._targets:
                    self._for(broker).stop_replica.append(
                        StoppedReplica(tp, EPOCH_DURING_DELETE, delete=True)
                    )

    def replicas_removed(self, tp: TP, replicas: tuple[int, ...], leader_epoch: int) -> None:
        """A finished reassignment's removed replicas stop and delete their logs."""
        if not self._targets:
            return
        with self._lock:
            for broker in replicas:
                if broker in self._targets:
                    self._for(broker).stop_replica.append(
                        StoppedReplica(tp, leader_epoch, delete=True)
                    )

    def states_read(self, parts: PartitionMap, tps: Iterable[TP]) -> None:
        """The states of ``tps`` as the controller just read them (ISR changes that leaders
        wrote and notified): every broker hears them by UpdateMetadata."""
        if not self._targets:
            return
        with self._lock:
            for tp in tps:
                part = parts.get(tp)
                if part is not None and part.state is not None:
                    self._changed[tp] = PartitionState(tp, part.state, tuple(part.replicas))

    def brokers_started(self, started: Iterable[int], parts: PartitionMap) -> None:
        """The live broker set changed: every broker hears it; those of ``started`` (registered
        again, or all of them when the controller is new) are told every partition (full
        UpdateMetadata) and the leaderships of those they replicate (Kafka's
        ``onBrokerStartup`` and ``onControllerFailover``)."""
        with self._lock:
            for broker in self._targets:
                self._for(broker).update_brokers = True
            told = set(started) & self._targets
            if not told:
                return
            everything = [PartitionState(tp, state, tuple(replicas))
                          for tp, replicas, state in parts.states() if state is not None]  # fmt: skip
            for broker in sorted(told):
                requests = self._for(broker)
                requests.leader_and_isr.extend(s for s in everything if broker in s.replicas)
                requests.update_metadata.extend(everything)

    def flush(self) -> None:
        """Hand the pass's requests to the channel."""
        if not self._targets:
            return
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        changed = sorted(self._changed.values(), key=_by_tp)
        deleting = sorted(self._deleting.values(), key=_by_tp)
        if changed or deleting:
            for broker in self._targets:
                requests = self._for(broker)
                seen = {s.tp for s in requests.update_metadata}
                requests.update_metadata.extend(s for s in changed if s.tp not in seen)
                requests.deleting.extend(deleting)
        to = {b: r for b, r in self._to.items() if r}
        if to:
            self.channel.send(ControllerRequests(self.controller_id, self.epoch, self._live, to))
        self._changed, self._deleting, self._to = {}, {}, {}


def _by_tp(state: PartitionState) -> TP:
    return state.tp


class NoChannel:
    """The channel of a cluster whose brokers all hear the controller in-process."""

    def targets(self, live: Iterable[int]) -> set[int]:
        return set()

    def send(self, requests: ControllerRequests) -> None:
        pass

    def term_ended(self, controller_epoch: int) -> None:
        pass


NO_CHANNEL = NoChannel()
