"""How produce requests reach brokers: the engine's replication model plays the brokers' logs.

A broker accepts a produce request for a partition only while it runs and leads the partition,
as Kafka's brokers answer ``NOT_LEADER_OR_FOLLOWER`` otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from coordkit.engine.producer.errors import (
    BrokerUnavailableError,
    LeaderNotAvailableError,
    NotLeaderError,
    UnknownTopicOrPartitionError,
)
from coordkit.engine.replication import ReplicationModel
from coordkit.engine.states import TP
from coordkit.kafka.model import NO_LEADER

if TYPE_CHECKING:
    from coordkit.engine.broker import Broker
    from coordkit.engine.cluster import Cluster
    from coordkit.engine.network import Network


@runtime_checkable
class ProduceTransport(Protocol):
    def reachable(self, broker_id: int) -> bool:
        """A connection to ``broker_id`` can be made (the broker runs)."""
        ...

    def append(self, broker_id: int, tp: TP, records: int) -> int:
        """Send ``records`` of partition ``tp`` to ``broker_id``; returns the base offset.

        :raises NotLeaderError, LeaderNotAvailableError, UnknownTopicOrPartitionError,
            BrokerUnavailableError: as the broker (or the connection) answers.
        """
        ...


class ReplicationTransport:
    """Produce requests appended to a :class:`ReplicationModel`.

    :param network: the process's live brokers (a broker outside it is unreachable); ``None``
        treats every broker the model does not know as down as reachable.
    """

    def __init__(self, replication: ReplicationModel, network: Network[Broker] | None = None):
        self.replication = replication
        self.network = network

    @classmethod
    def of(cls, cluster: Cluster) -> ReplicationTransport:
        return cls(cluster.replication, cluster.network)

    def reachable(self, broker_id: int) -> bool:
        if self.network is None:
            return True
        broker = self.network.get(broker_id)
        return broker is not None and broker.alive

    def append(self, broker_id: int, tp: TP, records: int) -> int:
        if not self.reachable(broker_id):
            raise BrokerUnavailableError(
                f"broker {broker_id} is down: cannot send {records} records of {tp[0]}-{tp[1]}"
            )
        offset = self.replication.append(tp, records, leader=broker_id)
        if offset is not None:
            return offset
        log = self.replication.log(tp)
        where = f"{tp[0]}-{tp[1]}"
        if log is None:
            raise UnknownTopicOrPartitionError(
                f"broker {broker_id} does not know partition {where}"
            )
        if log.leader == NO_LEADER or (log.leader != broker_id and not self.reachable(log.leader)):
            raise LeaderNotAvailableError(f"partition {where} has no live leader")
        raise NotLeaderError(
            f"broker {broker_id} is not the leader of {where} (leader: broker {log.leader})"
        )
