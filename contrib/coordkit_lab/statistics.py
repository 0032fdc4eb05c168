"""Intervals and paired comparisons: what lets a verdict be trusted.

The unit of evidence is a **scenario** (one parameter set, seed and replicate): its value for a
metric is the mean over its steps (Spark computes it: the ``scenarios`` table). Every strategy
meets the same scenarios, so two strategies are compared **paired**: on the scenarios both ran.

* A mean's 95% interval is a percentile bootstrap over the workload's scenarios (parameter sets
  and replicates resampled together), :data:`RESAMPLES` resamples drawn from a seed derived from
  the run's seed: the same run gives the same intervals.
* All statistics of one workload use the same resamples, so a difference between two strategies
  is the difference of their means on each resample (the paired bootstrap).
* A strategy is **worse** than the best when the 95% interval of its paired difference excludes
  0 and the difference exceeds a practical-equivalence margin: none for deterministic metrics
  (any real difference counts), :data:`~coordkit_lab.metricinfo.TIMING_MARGIN` of the best's
  mean for measured ones (timings), so the noise of timings on a shared machine cannot turn a
  small difference into a verdict. A timing seen on fewer than :data:`MIN_MEASURED_UNITS`
  scenarios has no interval (the measurement's noise cannot be told from a difference), so it
  shows nothing worse. Whatever is not worse is tied with the best, and said so.

  (Holding the interval's near end to the margin instead of the point was tried on five quick
  runs with the same seed: it moved the flips to other comparisons, whose interval ends sit at
  the margin, and flipped more often.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from attrs import field, frozen

from coordkit_lab.metricinfo import direction_of, margin_of
from coordkit_lab.scenarios import derive_seed

#: The intervals' confidence level.
CONFIDENCE = 0.95
#: Bootstrap resamples per workload.
RESAMPLES = 2000
#: Per-scenario values are rounded to this many significant digits first, so that sums Spark
#: adds up in any order compare equal when the steps were equal (a tie stays a tie).
DIGITS = 12
#: A measured metric needs this many scenarios before a strategy can be shown worse on it.
MIN_MEASURED_UNITS = 2
#: Resample rows per chunk of weights held at once (memory stays small for big runs).
_CHUNK_CELLS = 2_000_000


def bootstrap_seed(run_seed: Any, workload: str) -> int:
    return derive_seed("bootstrap", run_seed, workload)


def rounded(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def percentile_interval(draws: np.ndarray) -> tuple[float | None, float | None]:
    """The central :data:`CONFIDENCE` interval of ``draws`` (NaN draws ignored)."""
    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return None, None
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


class Resampler:
    """Bootstrap resamples of ``n`` units, drawn from ``seed``: every call sees the same ones.

    With ``strata`` (a label per unit), units are resampled within their stratum (the design,
    e.g. one stratum per partition count, stays fixed).
    """

    def __init__(
        self, n: int, seed: int, *, strata: Sequence[Any] | None = None, resamples: int = RESAMPLES
    ):
        self.n = n
        self.seed = seed
        self.resamples = resamples
        labels = list(strata) if strata is not None else [0] * n
        self._members = [
            np.flatnonzero(np.array([lab == s for lab in labels], dtype=bool))
            for s in dict.fromkeys(labels)
        ]

    def weights(self) -> Iterator[tuple[int, np.ndarray]]:
        """``(first row, counts)``: how often each unit is drawn in each resample, in chunks."""
        rng = np.random.default_rng(self.seed)
        rows = max(1, _CHUNK_CELLS // max(1, self.n))
        for start in range(0, self.resamples, rows):
            count = min(rows, self.resamples - start)
            flat = np.zeros(count * self.n, dtype=np.int64)
            offsets = (np.arange(count) * self.n)[:, None]
            for members in self._members:
                drawn = members[rng.integers(0, members.size, size=(count, members.size))]
                flat += np.bincount((drawn + offsets).ravel(), minlength=count * self.n)
            yield start, flat.reshape(count, self.n).astype(np.float64)

    def means(self, values: np.ndarray) -> np.ndarray:
        """``values`` (units × columns, NaN where missing) → resampled column means
        (resamples × columns; NaN where a resample drew no value)."""
        present = ~np.isnan(values)
        filled = np.where(present, values, 0.0)
        out = np.empty((self.resamples, values.shape[1]))
        for start, weights in self.weights():
            sums = weights @ filled
            counts = weights @ present.astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[start : start + len(weights)] = np.where(counts > 0, sums / counts, np.nan)
        return out


@frozen
class Sample:
    """One workload's per-scenario values: ``values[unit, column]`` for ``columns[(strategy,
    metric)]``, NaN where a scenario has no value (failed, or the metric does not apply)."""

    workload: str
    units: tuple[str, ...]
    partitions: tuple[int, ...]
    columns: dict[tuple[str, str], int]
    values: np.ndarray = field(eq=False)
    seed: int

    @property
    def strategies(self) -> list[str]:
        return sorted({s for s, _ in self.columns})

    @property
    def metrics(self) -> list[str]:
        return sorted({m for _, m in self.columns})

    def column(self, strategy: str, metric: str) -> np.ndarray | None:
        index = self.columns.get((strategy, metric))
        return None if index is None else self.values[:, index]

    def resampler(self, *, strata: Sequence[Any] | None = None) -> Resampler:
        return Resampler(len(self.units), self.seed, strata=strata)


#: A per-scenario value: (workload, strategy, metric, unit key, partitions, value).
UnitRow = tuple[str, str, str, str, int, float]


def samples(rows: Iterable[UnitRow], run_seed: Any) -> dict[str, Sample]:
    """The unit rows grouped into one :class:`Sample` per workload (units and columns sorted)."""
    grouped: dict[str, list[UnitRow]] = {}
    for row in rows:
        if row[5] is not None and math.isfinite(row[5]):
            grouped.setdefault(row[0], []).append(row)
    out = {}
    for workload, found in sorted(grouped.items()):
        units = sorted({r[3] for r in found})
        unit_index = {u: i for i, u in enumerate(units)}
        columns = {c: i for i, c in enumerate(sorted({(r[1], r[2]) for r in found}))}
        values = np.full((len(units), len(columns)), np.nan)
        partitions = [0] * len(units)
        for _, strategy, metric, unit, size, value in found:
            i = unit_index[unit]
            values[i, columns[(strategy, metric)]] = rounded(value)
            partitions[i] = max(partitions[i], int(size or 0))
        out[workload] = Sample(
            workload,
            tuple(units),
            tuple(partitions),
            columns,
            values,
            bootstrap_seed(run_seed, workload),
        )
    return out


@frozen
class Estimate:
    """A strategy's mean of a metric on a workload with its interval (``n`` scenarios)."""

    workload: str
    strategy: str
    metric: str
    n: int
    mean: float
    low: float | None
    high: float | None


def estimates(sample: Sample) -> list[Estimate]:
    """Every (strategy, metric) column's mean over scenarios and bootstrap interval."""
    draws = sample.resampler().means(sample.values)
    out = []
    for (strategy, metric), index in sorted(sample.columns.items()):
        column = sample.values[:, index]
        present = column[~np.isnan(column)]
        low, high = percentile_interval(draws[:, index])
        out.append(
            Estimate(
                sample.workload,
                strategy,
                metric,
                int(present.size),
                float(present.mean()),
                low,
                high,
            )
        )
    return out


@frozen
class Comparison:
    """``strategy`` against ``reference`` on the scenarios both ran, paired.

    ``difference`` is ``strategy - reference`` (in the metric's unit), ``relative`` that over the
    reference's mean (``None`` where the reference's mean is 0 in some resample), each with its
    interval. ``worse``: see :func:`is_worse`.
    """

    workload: str
    metric: str
    strategy: str
    reference: str
    n: int
    difference: float
    difference_low: float | None
    difference_high: float | None
    relative: float | None
    relative_low: float | None
    relative_high: float | None
    worse: bool


def compare(
    sample: Sample,
    pairs: Sequence[tuple[str, str, str]],
    infos: Mapping[str, Mapping[str, Any]],
) -> list[Comparison]:
    """Paired comparisons ``(metric, strategy, reference)``, all from the workload's resamples."""
    if not pairs:
        return []
    n = len(sample.units)
    matrix = np.full((n, 2 * len(pairs)), np.nan)
    for i, (metric, strategy, reference) in enumerate(pairs):
        a, b = sample.column(strategy, metric), sample.column(reference, metric)
        if a is None or b is None:
            continue
        both = ~np.isnan(a) & ~np.isnan(b)
        matrix[both, 2 * i] = a[both]
        matrix[both, 2 * i + 1] = b[both]
    draws = sample.resampler().means(matrix)
    out = []
    for i, (metric, strategy, reference) in enumerate(pairs):
        both = ~np.isnan(matrix[:, 2 * i])
        count = int(both.sum())
        if count == 0:
            continue
        info = infos.get(metric, {})
        point_a, point_b = matrix[both, 2 * i].mean(), matrix[both, 2 * i + 1].mean()
        diff_draws = draws[:, 2 * i] - draws[:, 2 * i + 1]
        ref_draws = draws[:, 2 * i + 1]
        low, high = percentile_interval(diff_draws)
        relative = relative_low = relative_high = None
        finite_refs = ref_draws[np.isfinite(ref_draws)]
        if point_b != 0 and finite_refs.size and np.all(finite_refs != 0):
            with np.errstate(invalid="ignore", divide="ignore"):
                relative_low, relative_high = percentile_interval(diff_draws / np.abs(ref_draws))
            relative = float((point_a - point_b) / abs(point_b))
        out.append(
            Comparison(
                sample.workload,
                metric,
                strategy,
                reference,
                count,
                float(point_a - point_b),
                low,
                high,
                relative,
                relative_low,
                relative_high,
                is_worse(
                    info,
                    low,
                    high,
                    relative,
                    float(point_a - point_b),
                    n=count,
                ),
            )
        )
    return out


def is_worse(
    info: Mapping[str, Any],
    low: float | None,
    high: float | None,
    relative: float | None,
    difference: float | None = None,
    *,
    n: int | None = None,
) -> bool:
    """Worse: the interval of the difference excludes 0 on the worse side, and the relative
    difference (the point estimate) exceeds the metric's margin (none for deterministic
    metrics). Without a relative difference (the best's mean is 0) the interval decides. A
    measured metric (one with a margin) also needs at least :data:`MIN_MEASURED_UNITS` units
    (``n``, when given). A metric that declares a ``resolution`` (the smallest difference its
    measurement can tell, in its unit) also needs ``difference`` to exceed it."""
    if low is None or high is None:
        return False
    resolution = info.get("resolution")
    if resolution and difference is not None and abs(difference) <= float(resolution):
        return False
    sign = direction_of(info)
    if sign < 0:  # higher is better: worse means lower
        low, high = -high, -low
    if low <= 0:
        return False
    margin = margin_of(info)
    if margin and n is not None and n < MIN_MEASURED_UNITS:
        return False
    if margin and relative is not None:
        return sign * relative > margin
    return True


def best_point(values: Mapping[str, float], info: Mapping[str, Any]) -> str | None:
    """The strategy with the best mean (the first name among equals)."""
    if not values:
        return None
    sign = direction_of(info)
    return min(sorted(values), key=lambda s: sign * values[s])


@frozen
class Ranking:
    """The best strategy on a metric, those tied with it, and the comparisons behind it.

    ``effect``: the closest strategy found worse (the winners' lead), ``None`` when all tie.
    """

    best: str
    winners: tuple[str, ...]
    comparisons: tuple[Comparison, ...]
    effect: Comparison | None

    @property
    def tied(self) -> bool:
        return len(self.winners) > 1


def rank(
    sample: Sample,
    metric: str,
    strategies: Sequence[str],
    means: Mapping[str, float],
    infos: Mapping[str, Mapping[str, Any]],
) -> Ranking | None:
    """The best of ``strategies`` on ``metric`` and every one not worse than it."""
    candidates = {s: means[s] for s in strategies if s in means}
    best = best_point(candidates, infos.get(metric, {}))
    if best is None:
        return None
    found = compare(sample, [(metric, s, best) for s in sorted(candidates) if s != best], infos)
    worse = [c for c in found if c.worse]
    winners = tuple(sorted({best} | {c.strategy for c in found if not c.worse}))
    sign = direction_of(infos.get(metric, {}))
    effect = min(worse, key=lambda c: (sign * c.difference, c.strategy)) if worse else None
    return Ranking(best, winners, tuple(found), effect)
