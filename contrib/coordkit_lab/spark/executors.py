"""What the driver knows of its executors: which registered, with how many cores, which were lost
and why; waiting (bounded) for slow registrations before the task count is chosen.

Read from Spark's status store over py4j (``SparkContext.statusStore().executorList``, the data
behind the UI's Executors tab and the ``/executors`` REST endpoint), which keeps removed executors
with their removal reason; polling it needs no listener and no py4j callback server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from attrs import frozen

from coordkit_lab.spark.session import is_local_master

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: How long the lab waits at most for executors to register, and for how long their number must
#: stay the same when Spark does not say how many to expect (a standalone cluster).
REGISTRATION_TIMEOUT = 30.0
REGISTRATION_SETTLE = 2.0
#: Removal reasons of executors the driver let go on purpose (dynamic allocation, shutdown):
#: these are not losses.
_DELIBERATE = ("Executor killed by driver", "Executor decommission")


@frozen
class ExecutorState:
    """One executor of the application (never the driver)."""

    id: str
    host: str
    cores: int
    active: bool
    removed_because: str | None = None

    @property
    def lost(self) -> bool:
        """Gone without the driver asking for it (a worker died, a container was killed, ...)."""
        return not self.active and not (self.removed_because or "").startswith(_DELIBERATE)


def _java_list(spark: SparkSession, seq: Any) -> list[Any]:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:  # Scala 2.13 (Spark 4)
        return list(jvm.scala.jdk.javaapi.CollectionConverters.asJava(seq))
    except Exception:  # Scala 2.12 (Spark 3.5)
        return [seq.apply(i) for i in range(seq.size())]


def _status_store(spark: SparkSession) -> Any:
    return spark.sparkContext._jsc.sc().statusStore()


def executor_counts(spark: SparkSession) -> tuple[int, int]:
    """``(every executor the application has had, those still registered)``, the driver
    included in both: two cheap calls, so a poller can tell whether anything changed."""
    store = _status_store(spark)
    return int(store.executorList(False).size()), int(store.executorList(True).size())


def executors(spark: SparkSession) -> list[ExecutorState]:
    """Every executor the application has had, registered or removed."""
    states = []
    for summary in _java_list(spark, _status_store(spark).executorList(False)):
        ident = str(summary.id())
        if ident == "driver":
            continue
        reason = summary.removeReason()
        host, _, _ = str(summary.hostPort()).rpartition(":")
        states.append(
            ExecutorState(
                id=ident,
                host=host or str(summary.hostPort()),
                cores=int(summary.totalCores()),
                active=bool(summary.isActive()),
                removed_because=str(reason.get()) if reason.isDefined() else None,
            )
        )
    return states


def expected_executors(conf: Mapping[str, str]) -> int | None:
    """How many executors the configuration asks for, when it says (YARN, Kubernetes: a fixed
    ``spark.executor.instances``, or dynamic allocation's initial/minimum number); ``None`` when
    it does not (a standalone cluster gives whatever its workers offer)."""

    def number(key: str) -> int | None:
        value = conf.get(key)
        return int(value) if value is not None and value.strip().isdigit() else None

    if conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true":
        wanted = [
            number(k)
            for k in (
                "spark.dynamicAllocation.initialExecutors",
                "spark.dynamicAllocation.minExecutors",
                "spark.executor.instances",
            )
        ]
        return max((w for w in wanted if w is not None), default=0)
    return number("spark.executor.instances")


def wait_for_executors(
    spark: SparkSession,
    *,
    timeout: float = REGISTRATION_TIMEOUT,
    settle: float = REGISTRATION_SETTLE,
    on_phase: Callable[[str], None] | None = None,
    poll: float = 0.25,
) -> list[ExecutorState]:
    """Wait until the executors a cluster will give have registered, at most ``timeout`` seconds:
    as many as the configuration asks for, or (when it does not say) at least one and no new one
    for ``settle`` seconds. Local masters return at once (the driver is the executor); so does
    dynamic allocation asking for none up front (it adds executors once tasks wait).

    Spark itself waits for 80% of the requested executors on YARN and Kubernetes
    (``spark.scheduler.minRegisteredResourcesRatio``), for none on a standalone cluster.
    """
    sc = spark.sparkContext
    if is_local_master(sc.master):
        return []
    expected = expected_executors(dict(sc.getConf().getAll()))
    if expected == 0:
        return [e for e in executors(spark) if e.active]
    started = time.monotonic()
    changed, seen = started, -1
    while True:
        active = [e for e in executors(spark) if e.active]
        now = time.monotonic()
        if len(active) != seen:
            changed, seen = now, len(active)
        enough = len(active) >= expected if expected is not None else bool(active)
        if enough and (expected is not None or now - changed >= settle):
            return active
        if now - started >= timeout:
            return active
        if on_phase is not None:
            target = f" of {expected}" if expected is not None else ""
            cores = sum(e.cores for e in active)
            on_phase(
                f"waiting for executors: {len(active)}{target} registered ({cores} cores), "
                f"{timeout - (now - started):.0f} s left"
            )
        time.sleep(poll)
