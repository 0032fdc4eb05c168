"""The control-plane engine: brokers, controller election and fencing, topics, partition
leadership, and a replication model, on any metadata store, in Kafka's znode layout.

* :mod:`~coordkit.engine.broker` — registration, controller candidacy, controlled shutdown;
* :mod:`~coordkit.engine.controller` — a controller term, one module per responsibility;
* :mod:`~coordkit.engine.replica_fetcher` — each broker's replication loop;
* :mod:`~coordkit.engine.controllership` — claiming ``/controller`` + ``/controller_epoch``;
* :mod:`~coordkit.engine.fencing` — epoch-checked writes;
* :mod:`~coordkit.engine.topics` — topic admin, reassignment and preferred-election requests;
* :mod:`~coordkit.engine.replication` — LEO/HW per replica, acks=all, unclean-election loss;
* :mod:`~coordkit.engine.cluster` — N brokers in one process;
* :mod:`~coordkit.engine.snapshot` — the cluster read back from the store;
* :mod:`~coordkit.engine.invariants` — what a converged cluster looks like, checked;
* :mod:`~coordkit.engine.history` — split-brain checks over what reached the store;
* :mod:`~coordkit.engine.instrument` — store operation counting;
* :mod:`~coordkit.engine.groups` — consumer groups: coordinators on brokers, the classic group
  protocol (eager and cooperative), consumers, the group history checks;
* :mod:`~coordkit.engine.legacy` — the legacy ZooKeeper consumer (``/consumers/G/...``);
* :mod:`~coordkit.engine.producer` — producers: partitioners, broker discovery, sends to leaders.
"""

from coordkit.engine.broker import Broker
from coordkit.engine.cluster import Cluster, store_opener
from coordkit.engine.config import EngineConfig
from coordkit.engine.controller import Controller
from coordkit.engine.errors import (
    BrokerIdInUseError,
    ControllerFencedError,
    ControllerUnavailableError,
    EngineError,
    TopicExistsError,
    UnknownTopicError,
)
from coordkit.engine.events import EngineObserver, Observers, StateChange
from coordkit.engine.groups import (
    Consumer,
    GroupDescription,
    GroupHistory,
    GroupObserver,
    GroupState,
)
from coordkit.engine.history import HistoryRecorder
from coordkit.engine.instrument import InstrumentedStore, OpCounts
from coordkit.engine.replication import ReplicationModel
from coordkit.engine.snapshot import ClusterView, PartitionView
from coordkit.engine.topics import TopicAdmin

__all__ = [
    "Broker",
    "BrokerIdInUseError",
    "Cluster",
    "ClusterView",
    "Consumer",
    "Controller",
    "ControllerFencedError",
    "ControllerUnavailableError",
    "EngineConfig",
    "EngineError",
    "EngineObserver",
    "GroupDescription",
    "GroupHistory",
    "GroupObserver",
    "GroupState",
    "HistoryRecorder",
    "InstrumentedStore",
    "Observers",
    "OpCounts",
    "PartitionView",
    "ReplicationModel",
    "StateChange",
    "TopicAdmin",
    "TopicExistsError",
    "UnknownTopicError",
    "store_opener",
]
