"""``broker-scaling`` on the engine: an in-process cluster on a private memory store carries out
each plan through ``/admin/reassign_partitions``, as ``coordkit reassign --execute`` asks a real
cluster to.

Per change it measures the time from writing the plan until the controller has finished it (the
admin node gone, every partition at its target, the controller idle) and the partition-seconds
without a live leader from the change (a rack crashing, a broker starting) until then, as the
engine's replication model counts them. The model moves log offsets, not bytes, so the time is
that of the coordination (new replicas started, caught up, joined to the ISR, leaders moved, old
replicas dropped), throttled by ``max_moving`` partitions at once; the bytes a plan copies are
counted from the partition sizes instead (``data-moved``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence

from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.errors import EngineError
from coordkit.kafka import layout
from coordkit.strategies.placement import TP
from coordkit_placements.lab.cases import Assignment, ScalingCase

#: Seconds a cluster may take to settle after a change, or a plan to complete.
SETTLE_TIMEOUT = 60.0


class EngineRun:
    """One cluster for one run; :meth:`close` ends it and forgets its store."""

    def __init__(self, seed: int):
        self.seed = seed
        self.name = f"lab-placement-{uuid.uuid4().hex[:12]}"
        self._cluster: Cluster | None = None
        self._racks: Mapping[int, str | None] = {}
        self._records = 0

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            raise EngineError("the lab cluster is not started")
        return self._cluster

    def start(self, case: ScalingCase, assignment: Assignment) -> None:
        config = EngineConfig(
            auto_leader_rebalance=False,  # leaders stay where the plans put them
            replica_fetch_wait_max=0.02,
            replica_lag_time_max=5.0,
            reassignment_max_moving=case.max_moving,
        )
        self._racks = case.racks
        self._records = case.records
        racks = {b: r for b, r in case.racks.items() if r is not None}
        self._cluster = Cluster(
            f"memory://{self.name}?lifetime=sessions",  # forgotten once the cluster closes
            case.initial,
            racks=racks,
            config=config,
            seed=self.seed,
            record_history=False,
        )
        self._cluster.start()
        self._settle()
        for topic, parts in assignment.items():
            self._cluster.create_topic(
                topic, len(parts), case.replication_factor, assignment=dict(parts)
            )
        total = sum(len(parts) for parts in assignment.values())
        self._settle(lambda: self._all_led(total))

    def begin(self) -> float:
        """Produce the change's records; returns the unavailability counter before it."""
        if self._records:
            self.cluster.produce(self._records)
        return self.cluster.replication.unavailability()[1]

    def add_broker(self, broker: int) -> None:
        rack = self._racks.get(broker)
        if rack is not None:
            self.cluster.racks[broker] = rack
        self.cluster.start_broker(broker)
        self._settle(lambda: broker in self.cluster.view().brokers)

    def lose(self, brokers: Sequence[int]) -> None:
        for broker in brokers:
            self.cluster.kill(broker)
        self._settle()

    def remove_broker(self, broker: int) -> None:
        self.cluster.stop(broker)
        self._settle()

    def execute(self, plan: Mapping[TP, Sequence[int]]) -> float:
        """Carry ``plan`` out; returns the seconds until it completed (0 for an empty plan)."""
        if not plan:
            return 0.0
        started = time.perf_counter()
        self.cluster.admin.reassign_partitions(plan)
        self._settle(lambda: self._done(plan), what="the reassignment to complete")
        return time.perf_counter() - started

    def unavailable_since(self, before: float) -> float:
        return max(0.0, self.cluster.replication.unavailability()[1] - before)

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()

    # -- waiting -------------------------------------------------------------------------------

    def _all_led(self, total: int) -> bool:
        view = self.cluster.view()
        return len(view.partitions) == total and not view.offline()

    def _done(self, plan: Mapping[TP, Sequence[int]]) -> bool:
        if self.cluster.admin_store.exists(layout.REASSIGN_PARTITIONS) is not None:
            return False
        current = {p.tp: p.replicas for p in self.cluster.view().partitions}
        return all(current.get(tp) == tuple(replicas) for tp, replicas in plan.items())

    def _settle(self, also: Callable[[], bool] | None = None, what: str = "the cluster") -> None:
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while time.monotonic() < deadline:
            if self.cluster.settled() and (also is None or also()):
                return
            time.sleep(0.005)
        status = self.cluster.settled()
        raise EngineError(
            f"{what} did not settle within {SETTLE_TIMEOUT:.0f}s"
            + (f" (waiting for: {status.waiting_for})" if not status else "")
        )
