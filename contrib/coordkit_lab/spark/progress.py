"""Progress of a running lab job, from Spark's status tracker."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class TaskProgress:
    """Polls Spark's status tracker on a thread and reports ``(done, total)`` tasks of a job group.

    Use as a context manager around the action that runs the job group.
    """

    def __init__(
        self,
        spark: SparkSession,
        group: str,
        on_update: Callable[[int, int], None],
        interval: float = 0.25,
    ):
        self._sc = spark.sparkContext
        self._group = group
        self._on_update = on_update
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="coordkit-lab-progress", daemon=True)
        self._seen: dict[int, tuple[int, int]] = {}

    def _poll(self) -> None:
        tracker = self._sc.statusTracker()
        for job in tracker.getJobIdsForGroup(self._group):
            info = tracker.getJobInfo(job)
            if info is None:
                continue
            for stage in info.stageIds:
                stage_info = tracker.getStageInfo(stage)
                if stage_info is not None:
                    self._seen[stage] = (stage_info.numCompletedTasks, stage_info.numTasks)
        if self._seen:
            done = sum(d for d, _ in self._seen.values())
            total = sum(t for _, t in self._seen.values())
            self._on_update(done, total)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with contextlib.suppress(Exception):  # the context may be shutting down
                self._poll()

    def __enter__(self) -> TaskProgress:
        self._sc.setJobGroup(self._group, "coordkit lab scenarios")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(Exception):
            self._poll()
        self._sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
