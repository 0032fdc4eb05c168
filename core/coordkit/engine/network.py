"""The in-process stand-in for the broker network: how a broker reaches the controller.

Kafka's brokers send ControlledShutdown requests to the controller over the wire; brokers of one
process (``coordkit cluster``, tests, the lab) find each other here instead.
"""

from __future__ import annotations

import threading
from typing import Generic, Protocol, TypeVar


class Reachable(Protocol):
    """What the network knows of a broker: its id."""

    @property
    def broker_id(self) -> int: ...


#: The brokers a network holds (the engine's :class:`~coordkit.engine.broker.Broker`); generic so
#: that this module does not import the broker that imports it.
B = TypeVar("B", bound=Reachable)


class Network(Generic[B]):
    """Live brokers of this process by id."""

    def __init__(self) -> None:
        self._brokers: dict[int, B] = {}
        self._lock = threading.Lock()

    def add(self, broker: B) -> None:
        with self._lock:
            self._brokers[broker.broker_id] = broker

    def remove(self, broker: B) -> None:
        with self._lock:
            if self._brokers.get(broker.broker_id) is broker:
                del self._brokers[broker.broker_id]

    def get(self, broker_id: int) -> B | None:
        with self._lock:
            return self._brokers.get(broker_id)

    def brokers(self) -> list[B]:
        with self._lock:
            return [self._brokers[b] for b in sorted(self._brokers)]
