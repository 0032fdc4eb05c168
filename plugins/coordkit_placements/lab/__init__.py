"""The placements' lab workload and metrics (see :mod:`coordkit.lab` for the contract and the
README's "Adding workloads and metrics").

* :mod:`~coordkit_placements.lab.workload`: ``broker-scaling``, a racked cluster growing and
  shrinking, rebalanced after each change by the placement under test;
* :mod:`~coordkit_placements.lab.cases`: what one run draws from its seed;
* :mod:`~coordkit_placements.lab.engine`: the plans carried out on an in-process cluster, timed;
* :mod:`~coordkit_placements.lab.metrics`: skew, rack diversity, movement, time, unavailability.
"""

from __future__ import annotations

from coordkit_placements.lab.cases import ScalingCase, ScalingEvent
from coordkit_placements.lab.metrics import PLACEMENT_METRICS
from coordkit_placements.lab.workload import PLACEMENT_KIND, BrokerScalingWorkload, PlacementStep

BROKER_SCALING = BrokerScalingWorkload()

__all__ = [
    "BROKER_SCALING",
    "PLACEMENT_KIND",
    "PLACEMENT_METRICS",
    "BrokerScalingWorkload",
    "PlacementStep",
    "ScalingCase",
    "ScalingEvent",
]
