"""The inter-broker apis of ``coordkit serve``: what a controller asks of brokers, and what a
broker asks of the controller (Kafka's ZooKeeper mode, so that coordkit's processes and Kafka 3.9
brokers form one cluster):

* :mod:`.controller_requests` — LeaderAndIsr, UpdateMetadata, StopReplica (a broker's side);
* :mod:`.controlled_shutdown` — ControlledShutdown (the controller's side);
* :mod:`.alter_partition` — AlterPartition, a Kafka 3.9 leader's ISR change (the controller's);
* :mod:`.allocate_producer_ids` — AllocateProducerIds, a Kafka 3.9 broker's producer id block.

The requests this process's controller and brokers send are :mod:`coordkit.serve.control_plane`'s.
:data:`INTER_BROKER_APIS` is what the dispatcher serves: api name → (lowest, highest version,
handler).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from coordkit.protocol import Request
from coordkit.serve.apis.inter_broker import (
    allocate_producer_ids,
    alter_partition,
    controlled_shutdown,
    controller_requests,
)
from coordkit.serve.context import BrokerContext

InterBrokerHandler = Callable[[BrokerContext, Request], Awaitable[Any]]

INTER_BROKER_APIS: dict[str, tuple[int, int, InterBrokerHandler]] = {
    # Kafka 3.9's versions (Kafka 4 removed these from its brokers).
    "LeaderAndIsr": (0, 7, controller_requests.handle_leader_and_isr),
    "UpdateMetadata": (0, 8, controller_requests.handle_update_metadata),
    "StopReplica": (0, 4, controller_requests.handle_stop_replica),
    "ControlledShutdown": (0, 3, controlled_shutdown.handle_controlled_shutdown),
    # The versions a Kafka 3.9 broker of a cluster with topic ids sends.
    "AlterPartition": (2, 3, alter_partition.handle_alter_partition),
    "AllocateProducerIds": (0, 0, allocate_producer_ids.handle_allocate_producer_ids),
}
