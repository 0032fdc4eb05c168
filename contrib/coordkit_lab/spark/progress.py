"""Progress of a running lab job, from Spark's status tracker: tasks done, and what went wrong on
the way (executors lost, task attempts that failed and ran again)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from attrs import frozen

from coordkit_lab.spark.executors import executor_counts, executors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@frozen
class Incidents:
    """What Spark recovered from during a job: executors that went away without the driver asking
    (a worker died, a container was killed) and task attempts that failed and were run again (a
    lost executor's running tasks among them). Spark's retries keep the results complete; these
    say how bumpy the ride was."""

    executors_lost: int = 0
    tasks_retried: int = 0

    def __bool__(self) -> bool:
        return bool(self.executors_lost or self.tasks_retried)

    def describe(self) -> str:
        """``1 executor lost · 2 tasks retried`` (the parts that are not zero)."""
        parts = []
        if self.executors_lost:
            parts.append(f"{self.executors_lost} executor{'s' * (self.executors_lost != 1)} lost")
        if self.tasks_retried:
            parts.append(f"{self.tasks_retried} task{'s' * (self.tasks_retried != 1)} retried")
        return " · ".join(parts)


class TaskProgress:
    """Polls Spark's status tracker on a thread and reports ``(done, total)`` tasks of a job group,
    and :class:`Incidents` whenever they change.

    Use as a context manager around the action that runs the job group. Executors removed before
    it started are not counted; :attr:`incidents` holds the final count after it exits.
    """

    def __init__(
        self,
        spark: SparkSession,
        group: str,
        on_update: Callable[[int, int], None] | None = None,
        interval: float = 0.25,
        on_incidents: Callable[[Incidents], None] | None = None,
    ):
        self._spark = spark
        self._sc = spark.sparkContext
        self._group = group
        self._on_update = on_update
        self._on_incidents = on_incidents
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="coordkit-lab-progress", daemon=True)
        #: stage → (completed, total, failed attempts); the highest seen (a stage only grows).
        self._seen: dict[int, tuple[int, int, int]] = {}
        self._gone_before: frozenset[str] = frozenset()
        self._counts = (0, 0)
        self._lost: frozenset[str] = frozenset()
        self.incidents = Incidents()

    def _poll_tasks(self) -> None:
        tracker = self._sc.statusTracker()
        for job in tracker.getJobIdsForGroup(self._group):
            info = tracker.getJobInfo(job)
            if info is None:
                continue
            for stage in info.stageIds:
                stage_info = tracker.getStageInfo(stage)
                if stage_info is not None:
                    before = self._seen.get(stage, (0, 0, 0))
                    self._seen[stage] = (
                        max(before[0], stage_info.numCompletedTasks),
                        max(before[1], stage_info.numTasks),
                        max(before[2], stage_info.numFailedTasks),
                    )
        if self._seen and self._on_update is not None:
            total = sum(t for _, t, _ in self._seen.values())
            done = min(total, sum(d for d, _, _ in self._seen.values()))
            self._on_update(done, total)

    def _poll_executors(self) -> None:
        counts = executor_counts(self._spark)
        if counts == self._counts:  # nobody registered or left since the last look
            return
        self._counts = counts
        self._lost = frozenset(
            e.id for e in executors(self._spark) if e.lost and e.id not in self._gone_before
        )

    def _poll(self) -> None:
        self._poll_tasks()
        with contextlib.suppress(Exception):  # the status store is Spark's internal API
            self._poll_executors()
        incidents = Incidents(
            executors_lost=len(self._lost),
            tasks_retried=sum(f for _, _, f in self._seen.values()),
        )
        if incidents != self.incidents:
            self.incidents = incidents
            if self._on_incidents is not None:
                self._on_incidents(incidents)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with contextlib.suppress(Exception):  # the context may be shutting down
                self._poll()

    def __enter__(self) -> TaskProgress:
        with contextlib.suppress(Exception):
            self._gone_before = frozenset(e.id for e in executors(self._spark) if not e.active)
        self._sc.setJobGroup(self._group, "coordkit lab scenarios")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(Exception):
            self._poll()
        self._sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
