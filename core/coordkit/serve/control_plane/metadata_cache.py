"""What the brokers of one ``coordkit serve`` process know from the controller's requests (Kafka's
``ZkMetadataCache`` plus the controller epoch its ``ReplicaManager`` keeps).

A controller in another process — a ``coordkit serve --broker-id`` or a Kafka 3.9 broker — tells
brokers leaderships with LeaderAndIsr, the cluster's live brokers and partition states with
UpdateMetadata, and deletions with StopReplica (:mod:`coordkit.serve.apis.inter_broker.controller_requests`).
This cache fences those requests and hands what they carry to the process's parts: partition
states to the replication model, topic ids to the broker id map and the log directories,
deleted topics to the logs, live brokers' addresses to the followers of remote leaders.

Fencing, as Kafka's broker fences: a request from a controller epoch older than the newest seen is
refused (STALE_CONTROLLER_EPOCH), and so is one meant for an earlier registration of the broker
(its broker epoch below the czxid of the broker's registration: STALE_BROKER_EPOCH, KIP-380).
The newest controller epoch counts the requests accepted and the controllers elected in this
process (an engine observer hears those), so a deposed controller elsewhere cannot undo what the
new one here decided.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence

from coordkit.engine.controller.shutdown import UNKNOWN_BROKER_EPOCH
from coordkit.engine.events import EngineObserver, StateChange
from coordkit.engine.replication import ReplicationModel

log = logging.getLogger("coordkit.serve")


class MetadataCache(EngineObserver):
    """The controller's word, for the brokers ``own`` of this process.

    :param deleted: called with each topic a controller deleted (StopReplica at the deletion
        epoch, or UpdateMetadata naming it with the deletion leader).
    :param topic_ids: called with topic ids (name → id text) the requests carried.
    :param replicas_deleted: called with a partition and the brokers of this process whose
        replica of it a finished reassignment removed (the controller of this process tells
        them in-process, as it tells others StopReplica with ``deletePartition``).
    """

    def __init__(
        self,
        replication: ReplicationModel,
        own: Collection[int],
        *,
        deleted: Callable[[str], None],
        topic_ids: Callable[[dict[str, str]], None],
        replicas_deleted: Callable[[tuple[str, int], tuple[int, ...]], None] | None = None,
    ) -> None:
        self.replication = replication
        self.own = frozenset(own)
        self._deleted = deleted
        self._topic_ids = topic_ids
        self._replicas_deleted = replicas_deleted
        self._lock = threading.Lock()
        #: Kafka's ``ReplicaManager.controllerEpoch`` (its initial value is 0).
        self.controller_epoch = 0
        #: Where each live broker of another process listens, from the last UpdateMetadata.
        self.broker_addresses: dict[int, tuple[str, int]] = {}
        #: Leader epochs only an UpdateMetadata has brought so far, per partition. Kafka keeps
        #: those in its metadata cache, apart from its partitions' epochs (which only LeaderAndIsr
        #: sets): a LeaderAndIsr for such an epoch is applied, not refused as already applied.
        self._told_by_metadata: dict[tuple[str, int], int] = {}

    # -- fencing -------------------------------------------------------------------------------

    def stale_controller(self, controller_id: int, epoch: int, what: str) -> bool:
        """Whether ``epoch`` is older than the newest controller epoch seen (the request is then
        refused and logged); otherwise it becomes the newest."""
        with self._lock:
            if epoch < self.controller_epoch:
                log.warning(
                    "%s from controller %s refused: its controller epoch %s is older than %s "
                    "(STALE_CONTROLLER_EPOCH)",
                    what,
                    controller_id,
                    epoch,
                    self.controller_epoch,
                )
                return True
            self.controller_epoch = epoch
            return False

    def stale_broker_epoch(self, broker_epoch: int, current: int, what: str) -> bool:
        """Kafka's ``isBrokerEpochStale``: a request for an older registration of the broker.
        (A newer epoch than the broker knows is accepted: the controller may have read the new
        registration before the broker learnt its czxid.)"""
        if broker_epoch == UNKNOWN_BROKER_EPOCH or broker_epoch >= current:
            return False
        log.warning("%s refused: broker epoch %s is older than this broker's %s "
                    "(STALE_BROKER_EPOCH)", what, broker_epoch, current)  # fmt: skip
        return True

    def controller_changed(self, broker_id: int | None, epoch: int) -> None:
        # A controller elected in this process: older ones elsewhere are stale from now on, and
        # what they told is not renewed (a controller tells its own process in-process).
        with self._lock:
            if epoch > self.controller_epoch:
                self.controller_epoch = epoch
                if broker_id is not None:
                    self.broker_addresses = {}

    # -- what the requests carry ---------------------------------------------------------------

    def states_known(self, changes: Sequence[StateChange]) -> None:
        """Partition states told by a controller (the model keeps the newest per partition)."""
        if changes:
            self.replication.partition_states_known(changes)

    def metadata_states_known(self, changes: Sequence[StateChange]) -> None:
        """Partition states an UpdateMetadata told: those newer than the model's are marked
        as known from the metadata only, then handed on as :meth:`states_known`."""
        with self._lock:
            for change in changes:
                current = self.replication.leadership(change.tp)
                if current is None or change.current.leader_epoch > current[1]:
                    self._told_by_metadata[change.tp] = change.current.leader_epoch
        self.states_known(changes)

    def told_by_metadata_only(self, tp: tuple[str, int], epoch: int) -> bool:
        """Whether leader epoch ``epoch`` of ``tp`` came from an UpdateMetadata and no
        LeaderAndIsr yet."""
        with self._lock:
            return self._told_by_metadata.get(tp) == epoch

    def partition_states_applied(self, changes: Sequence[StateChange]) -> None:
        """Partition states a LeaderAndIsr applied (their epochs are the partitions' now)."""
        with self._lock:
            for change in changes:
                self._told_by_metadata.pop(change.tp, None)
        self.states_known(changes)

    def topic_ids_known(self, ids: Mapping[str, str]) -> None:
        if ids:
            self._topic_ids(dict(ids))

    def forget_topic(self, topic: str) -> None:
        """``topic`` is being deleted by the controller: forget it and drop its logs."""
        with self._lock:
            for tp in [tp for tp in self._told_by_metadata if tp[0] == topic]:
                del self._told_by_metadata[tp]
        self.replication.topic_deleted(topic)
        self._deleted(topic)

    def replicas_removed(
        self, tp: tuple[str, int], replicas: tuple[int, ...], leader_epoch: int
    ) -> None:
        own = tuple(b for b in replicas if b in self.own)
        if own and self._replicas_deleted is not None:
            self._replicas_deleted(tp, own)

    def brokers_live(self, addresses: Mapping[int, tuple[str, int]]) -> None:
        with self._lock:
            self.broker_addresses = {
                b: address for b, address in addresses.items() if b not in self.own
            }
