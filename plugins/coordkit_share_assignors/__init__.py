"""Share-partition assignors (KIP-932), registered through ``coordkit_register_share_assignors``:
what the broker config ``group.share.assignors`` names.

* ``simple`` (:mod:`.simple`): Kafka 4.4's default ``SimpleAssignor``, reproduced exactly (the
  Java hash orders it depends on in :mod:`.java_hash`);
* ``load-balanced`` (:mod:`.load_balanced`): evens out partition load (the describer's loads);
* ``rack-aware`` (:mod:`.rack_aware`): partitions to members on their replicas' racks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit import hookimpl


@hookimpl
def coordkit_register_share_assignors(register: Callable[[Any], None]) -> None:
    from coordkit_share_assignors.load_balanced import LoadBalancedShareAssignor
    from coordkit_share_assignors.rack_aware import RackAwareShareAssignor
    from coordkit_share_assignors.simple import SimpleShareAssignor

    register(SimpleShareAssignor())
    register(LoadBalancedShareAssignor())
    register(RackAwareShareAssignor())


@hookimpl
def coordkit_register_workloads(register: Callable[[Any], None]) -> None:
    from coordkit_share_assignors.lab.workload import SHARE_GROUPS

    register(SHARE_GROUPS)


@hookimpl
def coordkit_register_metrics(register: Callable[[Any], None]) -> None:
    from coordkit_share_assignors.lab.workload import SHARE_METRICS

    for metric in SHARE_METRICS:
        register(metric)
