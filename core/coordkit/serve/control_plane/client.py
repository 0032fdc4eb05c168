"""A broker's ControlledShutdown request to a controller in another process (Kafka's
``KafkaServer.controlledShutdown``), the engine's
:class:`~coordkit.engine.controller.shutdown.ControllerClient` over the wire.

The controller is found where its registration says (its inter-broker listener's endpoint, reached
through the process's connector); an answer other than
success (the controller moved, does not know the broker as live, or knows a newer registration of
it) is a :class:`ControllerUnavailableError`, and the broker asks again, reading ``/controller``
anew, until its controlled-shutdown time is up — as Kafka's broker retries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from coordkit.engine.errors import ControllerUnavailableError, EngineError
from coordkit.engine.snapshot import registered_brokers
from coordkit.engine.states import TP
from coordkit.errors import CoordkitError, StoreError
from coordkit.kafka import layout
from coordkit.protocol import messages
from coordkit.protocol.errors import ProtocolError
from coordkit.serve.control_plane.connection import BrokerConnection, UnservedVersionError
from coordkit.serve.control_plane.connector import BrokerConnector
from coordkit.store import MetadataStore

if TYPE_CHECKING:
    from coordkit.engine import Cluster

log = logging.getLogger("coordkit.serve")

#: Kafka 3.9's versions (v2 adds the broker epoch, v3 is flexible).
VERSIONS = {"ControlledShutdown": (2, 3)}
CLIENT_ID = "coordkit-broker"


class WireControllerClient:
    """Asks the controller over Kafka's protocol; ``store`` (a callable: the process's session is
    opened after this client) gives the controller's registration."""

    def __init__(self, store: Callable[[], MetadataStore],
                 connector: BrokerConnector | None = None) -> None:  # fmt: skip
        self._store = store
        self._connector = connector or BrokerConnector()

    def controlled_shutdown(
        self, controller_id: int, broker_id: int, broker_epoch: int, timeout: float
    ) -> list[TP]:
        address = self._address(controller_id)
        try:
            connection = BrokerConnection(address, CLIENT_ID, timeout=max(timeout, 1.0),
                                          connector=self._connector)  # fmt: skip
        except (OSError, ProtocolError) as exc:
            raise ControllerUnavailableError(
                f"broker {broker_id}: controller {controller_id} at {address[0]}:{address[1]} "
                f"not reached: {exc}"
            ) from None
        try:
            version = connection.versions(VERSIONS)["ControlledShutdown"]
            answer = connection.call(
                messages.ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch),
                version,
            )
        except (OSError, ProtocolError, UnservedVersionError) as exc:
            raise ControllerUnavailableError(
                f"broker {broker_id}: controlled shutdown by controller {controller_id}: {exc}"
            ) from None
        finally:
            connection.close()
        if answer.error_code:
            raise ControllerUnavailableError(
                f"broker {broker_id}: controller {controller_id} answered the controlled "
                f"shutdown with error {answer.error_code}"
            )
        return sorted((p.topic_name, p.partition_index) for p in answer.remaining_partitions)

    def _address(self, controller_id: int) -> tuple[str, int]:
        path = layout.broker_path(controller_id)
        try:
            data, _ = self._store().get(path)
            info = layout.BROKER.decode(data, path)
        except CoordkitError as exc:
            raise ControllerUnavailableError(
                f"controller {controller_id}: its registration is not readable: {exc}"
            ) from None
        return self._connector.address_of(info)


def shut_down_controlled(cluster: Cluster, own: Sequence[int]) -> None:
    """Kafka's controlled shutdown of each broker ``own`` of a process that stops, while its
    listeners still serve, when brokers of other processes are registered to take over its
    leaderships (alone, there is nobody to hand them to)."""
    try:
        registered = set(registered_brokers(cluster.admin_store))
    except (StoreError, EngineError):
        return
    if registered <= set(own):
        return
    for broker_id in own:
        broker = cluster.brokers.get(broker_id)
        if broker is None or not broker.alive:
            continue
        try:
            remaining = broker.controlled_shutdown()
        except (EngineError, StoreError) as exc:
            # Kafka's broker also stops after its retries.
            log.warning("broker %s: controlled shutdown failed: %s", broker_id, exc)
            continue
        log.info("broker %s: controlled shutdown done (%d partitions still led here)",
                 broker_id, len(remaining))  # fmt: skip
