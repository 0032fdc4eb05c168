"""The in-process stand-in for the broker network: how a broker reaches the controller.

Kafka's brokers send ControlledShutdown requests to the controller over the wire; brokers of one
process (``coordkit cluster``, tests, the lab) find each other here instead.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coordkit.engine.broker import Broker


class Network:
    """Live brokers of this process by id."""

    def __init__(self) -> None:
        self._brokers: dict[int, Broker] = {}
        self._lock = threading.Lock()

    def add(self, broker: Broker) -> None:
        with self._lock:
            self._brokers[broker.broker_id] = broker

    def remove(self, broker: Broker) -> None:
        with self._lock:
            if self._brokers.get(broker.broker_id) is broker:
                del self._brokers[broker.broker_id]

    def get(self, broker_id: int) -> Broker | None:
        with self._lock:
            return self._brokers.get(broker_id)

    def brokers(self) -> list[Broker]:
        with self._lock:
            return [self._brokers[b] for b in sorted(self._brokers)]
