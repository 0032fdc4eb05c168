"""Consumer partition assignors, registered through ``coordkit_register_assignors``.

Kafka's client-side assignors (``range`` with its rack-aware mode, ``roundrobin``, ``sticky``,
``cooperative-sticky``), the server-side ``uniform`` assignor of KIP-848, the legacy ZooKeeper
consumer's ceiling split ``range-ceil`` (seed 003), and ``weighted-sticky``, which balances a
per-partition load instead of partition counts.

Server-side (KIP-848) assignors, through ``coordkit_register_server_assignors``
(:mod:`.server`): Kafka 4's ``uniform`` and ``range``, the classic ``sticky``,
``weighted-sticky``, ``range-ceil`` and ``roundrobin`` offered server-side, and ``rack-aware``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit import hookimpl


@hookimpl
def coordkit_register_assignors(register: Callable[[Any], None]) -> None:
    from coordkit_assignors.range import RangeAssignor, RangeCeilAssignor
    from coordkit_assignors.roundrobin import RoundRobinAssignor
    from coordkit_assignors.sticky import CooperativeStickyAssignor, StickyAssignor
    from coordkit_assignors.uniform import UniformAssignor
    from coordkit_assignors.weighted import WeightedStickyAssignor

    for assignor in (
        RangeAssignor(),
        RangeCeilAssignor(),
        RoundRobinAssignor(),
        StickyAssignor(),
        CooperativeStickyAssignor(),
        UniformAssignor(),
        WeightedStickyAssignor(),
    ):
        register(assignor)


@hookimpl
def coordkit_register_server_assignors(register: Callable[[Any], None]) -> None:
    from coordkit_assignors.range import RangeCeilAssignor
    from coordkit_assignors.roundrobin import RoundRobinAssignor
    from coordkit_assignors.server import (
        ClassicAsServerAssignor,
        ServerRackAwareAssignor,
        ServerRangeAssignor,
        ServerUniformAssignor,
    )
    from coordkit_assignors.sticky import StickyAssignor
    from coordkit_assignors.weighted import WeightedStickyAssignor

    register(ServerUniformAssignor())
    register(ServerRangeAssignor())
    register(ServerRackAwareAssignor())
    for classic in (
        StickyAssignor(),
        WeightedStickyAssignor(),
        RangeCeilAssignor(),
        RoundRobinAssignor(),
    ):
        register(ClassicAsServerAssignor(classic))


@hookimpl
def coordkit_register_workloads(register: Callable[[Any], None]) -> None:
    from coordkit_assignors.lab.clients.workload import REAL_CLIENTS
    from coordkit_assignors.lab.groups import CONSUMER_GROUPS
    from coordkit_assignors.lab.study import STUDY
    from coordkit_assignors.lab.workloads import BUILTIN_WORKLOADS

    for workload in BUILTIN_WORKLOADS:
        register(workload)
    register(CONSUMER_GROUPS)
    register(REAL_CLIENTS)
    register(STUDY)


@hookimpl
def coordkit_register_metrics(register: Callable[[Any], None]) -> None:
    from coordkit_assignors.lab.clients.workload import CLIENT_METRICS
    from coordkit_assignors.lab.groups import GROUP_METRICS
    from coordkit_assignors.lab.metrics import BUILTIN_METRICS

    for metric in (*BUILTIN_METRICS, *GROUP_METRICS, *CLIENT_METRICS):
        register(metric)
