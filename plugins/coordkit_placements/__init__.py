"""Replica placement strategies (kind ``placement``): ``kafka`` and ``kafka-rack-aware`` (Kafka's
AdminUtils), ``balanced`` (minimal-movement rebalancing, Cruise Control's distribution goals) and
``rendezvous`` (CRUSH's straw2 hashing). Look one up with ``get_plugin_manager().placement(name)``.

The lab compares them with the ``broker-scaling`` workload (:mod:`coordkit_placements.lab`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit import hookimpl
from coordkit_placements.balanced import BalancedPlacement
from coordkit_placements.kafka import KAFKA, KAFKA_RACK_AWARE
from coordkit_placements.rendezvous import RendezvousPlacement


@hookimpl
def coordkit_register_placements(register: Callable[[Any], None]) -> None:
    register(KAFKA)
    register(KAFKA_RACK_AWARE)
    register(BalancedPlacement())
    register(RendezvousPlacement())


@hookimpl
def coordkit_register_workloads(register: Callable[[Any], None]) -> None:
    from coordkit_placements.lab import BROKER_SCALING

    register(BROKER_SCALING)


@hookimpl
def coordkit_register_metrics(register: Callable[[Any], None]) -> None:
    from coordkit_placements.lab import PLACEMENT_METRICS

    for metric in PLACEMENT_METRICS:
        register(metric)
