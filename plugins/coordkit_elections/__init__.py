"""Election strategies: controller (``kafka``, ``latch``, ``warm-standby``), partition leader
(``offline``, ``offline-unclean``, ``reassign``, ``preferred``, ``controlled-shutdown``), group
(and transaction) coordinator (``kafka``, ``murmur2``, ``rendezvous``) and group leader, plus the
lab's broker-failure and coordinator-placement workloads and their metrics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit import hookimpl
from coordkit_elections.controller_kafka import KafkaControllerElection
from coordkit_elections.controller_latch import LatchControllerElection
from coordkit_elections.controller_warm import WarmStandbyControllerElection
from coordkit_elections.partition import PARTITION_STRATEGIES

__all__ = ["KafkaControllerElection", "LatchControllerElection", "WarmStandbyControllerElection"]


@hookimpl
def coordkit_register_elections(register: Callable[[Any], None]) -> None:
    register(KafkaControllerElection())
    register(LatchControllerElection())
    register(WarmStandbyControllerElection())
    for strategy in PARTITION_STRATEGIES:
        register(strategy)
    from coordkit_elections.coordinator import GROUP_COORDINATOR_STRATEGIES
    from coordkit_elections.group_leader import GROUP_LEADER_STRATEGIES

    for coordinator_strategy in GROUP_COORDINATOR_STRATEGIES:
        register(coordinator_strategy)
    for leader_strategy in GROUP_LEADER_STRATEGIES:
        register(leader_strategy)


@hookimpl
def coordkit_register_workloads(register: Callable[[Any], None]) -> None:
    from coordkit_elections.coordinator_lab import COORDINATOR_PLACEMENT
    from coordkit_elections.lab import BROKER_FAILURES

    register(BROKER_FAILURES)
    register(COORDINATOR_PLACEMENT)


@hookimpl
def coordkit_register_metrics(register: Callable[[Any], None]) -> None:
    from coordkit_elections.coordinator_lab import COORDINATOR_METRICS
    from coordkit_elections.lab import ELECTION_METRICS

    for metric in (*ELECTION_METRICS, *COORDINATOR_METRICS):
        register(metric)
