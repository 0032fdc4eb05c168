"""The engine's cluster and brokers as ``coordkit serve`` runs them: each broker registers the
address it really listens on (Kafka's ``endpoints``), and the controller's requests and
controlled shutdown go over the wire (:mod:`coordkit.serve.control_plane`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coordkit.engine import Broker, Cluster
from coordkit.engine.controller.broker_requests import BrokerRequestChannel
from coordkit.engine.controller.shutdown import ControllerClient
from coordkit.kafka.model import BrokerInfo
from coordkit.serve.binding import Address
from coordkit.store import MetadataStore


class ServingBroker(Broker):
    """An engine broker whose registration names its real listeners, as Kafka's does."""

    #: Each listener's ``NAME://host:port`` (Kafka's ``endpoints``); none given: PLAINTEXT's.
    endpoints: tuple[str, ...] = ()

    @property
    def info(self) -> BrokerInfo:
        plain = super().info
        # ``endpoints`` goes through attrs' ``tuple`` converter, whose type mypy cannot infer.
        endpoints: Any = self.endpoints or (f"PLAINTEXT://{Address(self.host, self.port)}",)
        return BrokerInfo(
            host=plain.host,
            port=plain.port,
            timestamp=plain.timestamp,
            jmx_port=plain.jmx_port,
            version=plain.version,
            rack=plain.rack,
            endpoints=endpoints,
        )


class ServingCluster(Cluster):
    """A :class:`Cluster` whose brokers register the addresses they listen on."""

    def __init__(
        self,
        store_url: str,
        addresses: Mapping[int, Address],
        *,
        broker_requests: BrokerRequestChannel | None = None,
        controller_client: ControllerClient | None = None,
        endpoints: Mapping[int, tuple[str, ...]] | None = None,
        **options: object,
    ):
        super().__init__(store_url, sorted(addresses), **options)  # type: ignore[arg-type]
        self.addresses = dict(addresses)
        self.endpoints = dict(endpoints or {})
        self.broker_requests = broker_requests
        self.controller_client = controller_client

    def new_broker(self, broker_id: int, store: MetadataStore) -> Broker:
        address = self.addresses[broker_id]
        broker = ServingBroker(
            broker_id,
            store,
            host=address.host,
            port=address.port,
            rack=self.racks.get(broker_id),
            config=self.config,
            clock=self.clock,
            observers=self.observers,
            network=self.network,
            group_observers=self.group_observers,
            strategies=self.strategies,
            broker_requests=self.broker_requests,
            controller_client=self.controller_client,
        )
        broker.endpoints = self.endpoints.get(broker_id, ())
        return broker
