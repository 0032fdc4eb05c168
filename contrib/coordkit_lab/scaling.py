"""How a strategy's cost grows with the partition count: a fitted exponent with its interval.

The metrics analysed are those that declare ``scales_with="partitions"``
(:func:`~coordkit_lab.metricinfo.scales_with`: ``assign_ms``, ``failover-seconds``, ...). On a
workload whose scenarios span a decade or more of partition counts (``kafka-grid``, the
``elections`` preset's ``broker-failures``), each strategy's mean per partition count is fitted on
log-log axes; the slope over the largest two decades (where fixed per-call costs no longer hide
the growth) is its exponent: metric ∝ partitions^exponent. Resampling happens within each
partition count (the design stays fixed) and with the same resamples for every strategy, so
exponents are compared paired: a strategy scales worse when the interval of its exponent minus
the best's excludes 0 and the difference exceeds :data:`EXPONENT_MARGIN`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from attrs import frozen

from coordkit_lab.metricinfo import direction_of
from coordkit_lab.statistics import Sample, is_worse, percentile_interval

#: A workload shows scaling when its partition counts span at least this factor (and 3 sizes).
MIN_SCALING_SPAN = 10
#: Exponents closer than this grow alike for practical purposes: over two decades a 0.2
#: difference is a factor 2.5 in time. A strategy's exponent difference to the best moves by up to
#: about 0.09 between runs of the quick preset on a loaded two-core machine (load 5-10): at 0.15,
#: uniform's (0.115-0.17 over six runs) flipped between tied and worse.
EXPONENT_MARGIN = 0.2


@frozen
class Point:
    partitions: int
    n: int
    mean: float
    low: float | None
    high: float | None


@frozen
class Growth:
    """One strategy's points (its mean per partition count) and fitted exponent."""

    strategy: str
    points: tuple[Point, ...]
    exponent: float | None
    low: float | None
    high: float | None


@frozen
class ScalingResult:
    """A scaling workload: every strategy's growth, who scales best (ties included), and who is
    fastest at the largest size (ties included)."""

    workload: str
    metric: str
    fitted_from: int
    growth: tuple[Growth, ...]
    best: str | None
    winners: tuple[str, ...]
    effect: tuple[str, float, float | None, float | None] | None  # strategy, Δ exponent, interval
    largest: int
    fastest: tuple[str, ...]


def fitted_sizes(sizes: list[int]) -> list[int]:
    """The sizes within two decades of the largest, if they span at least a factor 4."""
    fitted = [p for p in sizes if p * 100 >= sizes[-1]]
    return fitted if len(fitted) >= 2 and fitted[-1] >= 4 * fitted[0] else []


def slopes(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Least-squares slopes of ``ys`` (rows × points) against ``xs`` (points); NaN rows stay NaN."""
    centred = xs - xs.mean()
    with np.errstate(invalid="ignore"):
        out: np.ndarray = ((ys - ys.mean(axis=1, keepdims=True)) * centred).sum(axis=1) / (
            centred**2
        ).sum()
    return out


def _log(values: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(values > 0, np.log(np.where(values > 0, values, 1.0)), np.nan)


def scaling(
    sample: Sample, infos: Mapping[str, Mapping[str, Any]], metric: str
) -> ScalingResult | None:
    """The scaling of ``metric`` on ``sample``'s workload, or ``None`` when its partition counts
    do not span :data:`MIN_SCALING_SPAN` or it has no such metric."""
    strategies = [s for s in sample.strategies if (s, metric) in sample.columns]
    sizes = sorted({p for p in sample.partitions if p > 0})
    if not strategies or len(sizes) < 3 or sizes[-1] < MIN_SCALING_SPAN * sizes[0]:
        return None
    partitions = np.array(sample.partitions)
    matrix = np.stack([sample.values[:, sample.columns[(s, metric)]] for s in strategies], axis=1)
    resampler = sample.resampler(strata=sample.partitions)
    # Per size: the mean over that size's scenarios, point and resampled (resamples × strategies).
    points: dict[int, np.ndarray] = {}
    draws: dict[int, np.ndarray] = {}
    for size in sizes:
        inside = (partitions == size)[:, None]
        points[size] = np.array(
            [
                np.nanmean(col) if np.any(~np.isnan(col)) else np.nan
                for col in matrix[inside[:, 0]].T
            ]
        )
        draws[size] = resampler.means(np.where(inside, matrix, np.nan))
    fitted = fitted_sizes(sizes)
    xs = np.log(np.array(fitted, dtype=np.float64))
    exponents = (
        slopes(xs, _log(np.stack([points[p] for p in fitted], axis=1)))
        if fitted
        else np.full(len(strategies), np.nan)
    )
    exponent_draws = (
        np.stack(
            [
                slopes(xs, _log(np.stack([draws[p][:, i] for p in fitted], axis=1)))
                for i in range(len(strategies))
            ],
            axis=1,
        )
        if fitted
        else np.full((resampler.resamples, len(strategies)), np.nan)
    )
    growth = []
    for i, strategy in enumerate(strategies):
        shown = []
        for size in sizes:
            column = matrix[partitions == size, i]
            if np.all(np.isnan(column)):
                continue
            low, high = percentile_interval(draws[size][:, i])
            count = int(np.count_nonzero(~np.isnan(column)))
            shown.append(Point(size, count, float(points[size][i]), low, high))
        low, high = percentile_interval(exponent_draws[:, i])
        value = float(exponents[i]) if np.isfinite(exponents[i]) else None
        growth.append(Growth(strategy, tuple(shown), value, low, high))

    best, winners, effect = _best_growth(strategies, exponents, exponent_draws)
    largest = int(np.count_nonzero(partitions == sizes[-1]))
    fastest = _fastest(
        strategies, points[sizes[-1]], draws[sizes[-1]], infos.get(metric, {}), largest
    )
    return ScalingResult(
        sample.workload,
        metric,
        fitted[0] if fitted else sizes[0],
        tuple(growth),
        best,
        winners,
        effect,
        sizes[-1],
        fastest,
    )


def _best_growth(
    strategies: list[str], exponents: np.ndarray, draws: np.ndarray
) -> tuple[str | None, tuple[str, ...], tuple[str, float, float | None, float | None] | None]:
    known = [i for i in range(len(strategies)) if np.isfinite(exponents[i])]
    if not known:
        return None, (), None
    best = min(known, key=lambda i: (exponents[i], strategies[i]))
    winners = [strategies[best]]
    worse = []
    for i in known:
        if i == best:
            continue
        low, high = percentile_interval(draws[:, i] - draws[:, best])
        difference = float(exponents[i] - exponents[best])
        if low is not None and low > 0 and difference > EXPONENT_MARGIN:
            worse.append((strategies[i], difference, low, high))
        else:
            winners.append(strategies[i])
    effect = min(worse, key=lambda w: (w[1], w[0])) if worse else None
    return strategies[best], tuple(sorted(winners)), effect


def _fastest(
    strategies: list[str],
    points: np.ndarray,
    draws: np.ndarray,
    info: Mapping[str, Any],
    n: int,
) -> tuple[str, ...]:
    """The quickest at the largest size and every one not worse than it (paired, with margin)."""
    known = [i for i in range(len(strategies)) if np.isfinite(points[i])]
    if not known:
        return ()
    sign = direction_of(info)
    best = min(known, key=lambda i: (sign * points[i], strategies[i]))
    out = [strategies[best]]
    for i in known:
        if i == best:
            continue
        low, high = percentile_interval(draws[:, i] - draws[:, best])
        relative = (
            None if points[best] == 0 else float((points[i] - points[best]) / abs(points[best]))
        )
        if not is_worse(info, low, high, relative, n=n):
            out.append(strategies[i])
    return tuple(sorted(out))
