"""The report's statistics on synthetic per-scenario values whose truth is known.

Bootstrap intervals over scenarios, paired comparisons, ties, the timing margin, verdicts that do
not change between two analyses of the same input, and growth exponents with intervals. No Spark:
the analysis reads the ``scenarios`` table as Spark SQL would produce it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from coordkit_lab.analysis import analyse, describe_effect
from coordkit_lab.metricinfo import TIMING_MARGIN
from coordkit_lab.scaling import EXPONENT_MARGIN
from coordkit_lab.statistics import Resampler, estimates, samples

INFOS: dict[str, dict[str, Any]] = {
    "count_balance": {
        "unit": "partitions",
        "better": "lower",
        "headline": "Which balances partition counts best?",
        "tradeoff": "balance",
    },
    "assign_ms": {
        "unit": "ms",
        "better": "lower",
        "headline": "Which is fastest?",
        "measured": "minimum thread CPU time of repeated calls",
    },
    "rack_locality": {"unit": "fraction", "better": "higher", "headline": "Which stays local?"},
}


def scenario_rows(
    workload: str,
    values: Mapping[str, Sequence[float]],
    metric: str,
    *,
    partitions: Sequence[int] | None = None,
) -> list[dict[str, Any]]:
    """``scenarios`` table rows: one per strategy and scenario ``i`` (paired by index)."""
    rows = []
    for strategy, series in values.items():
        for i, value in enumerate(series):
            rows.append(
                {
                    "workload": workload,
                    "params": f'{{"size":{partitions[i] if partitions else 0}}}',
                    "strategy": strategy,
                    "seed": 1000 + i,
                    "replicate": i,
                    "metric": metric,
                    "n": 3,
                    "mean": float(value),
                    "case_partitions": partitions[i] if partitions else 12,
                }
            )
    return rows


def analysed(
    rows: list[dict[str, Any]], infos: Mapping[str, Any] = INFOS, seed: int = 7
) -> dict[str, Any]:
    return analyse({"scenarios": rows}, infos, seed)


def verdict(result: Mapping[str, Any], workload: str, metric: str) -> dict[str, Any]:
    (found,) = [
        v for v in result["verdicts"] if v["workload"] == workload and v["metric"] == metric
    ]
    return dict(found)


def test_the_interval_covers_the_true_mean_at_about_the_nominal_rate() -> None:
    """Normal data, 40 scenarios: the 95% percentile bootstrap covers the mean ~95% of the time."""
    rng = np.random.default_rng(1)
    covered = 0
    trials = 300
    for trial in range(trials):
        data = rng.normal(10.0, 2.0, size=40)
        units = [("w", "a", "count_balance", str(i), 0, float(v)) for i, v in enumerate(data)]
        (estimate,) = estimates(samples(units, trial)["w"])
        assert estimate.low is not None
        assert estimate.high is not None
        assert estimate.low <= estimate.mean <= estimate.high
        covered += estimate.low <= 10.0 <= estimate.high
    assert 0.88 <= covered / trials <= 0.99, covered / trials


def test_the_interval_narrows_with_more_scenarios() -> None:
    rng = np.random.default_rng(2)
    widths = []
    for n in (10, 160):
        rows = scenario_rows("w", {"a": rng.normal(5.0, 1.0, size=n)}, "count_balance")
        (estimate,) = analysed(rows)["estimates"]
        widths.append(estimate["high"] - estimate["low"])
    assert widths[1] < widths[0] / 2.5  # ~ 1 / sqrt(16)


def test_resamples_are_reproducible_and_shared_by_every_column() -> None:
    values = np.arange(12, dtype=float).reshape(6, 2)
    first = Resampler(6, seed=99).means(values)
    again = Resampler(6, seed=99).means(values)
    assert np.array_equal(first, again)
    assert not np.array_equal(first, Resampler(6, seed=100).means(values))
    # Column 1 is column 0 + 1 on every unit: the same resample moves both alike (paired).
    assert np.allclose(first[:, 1] - first[:, 0], 1.0)


def test_identical_per_scenario_values_are_a_tie() -> None:
    rng = np.random.default_rng(3)
    shared = rng.integers(0, 20, size=8).astype(float)
    rows = scenario_rows(
        "w", {"range": shared, "roundrobin": shared.copy(), "sticky": shared + 3}, "count_balance"
    )
    found = verdict(analysed(rows), "w", "count_balance")
    assert found["strategies"] == ["range", "roundrobin"]
    assert found["tied"] is True
    assert found["effect"]["strategy"] == "sticky"
    assert found["effect"]["difference"] == pytest.approx(3.0)


def test_values_summed_in_another_order_still_tie() -> None:
    """Spark may add a scenario's steps in any order: the last bits must not break a tie."""
    base = np.array([0.1 + 0.2, 0.7, 1.3, 2.9])
    rows = scenario_rows("w", {"a": base, "b": base + 1e-16 * base}, "count_balance")
    assert verdict(analysed(rows), "w", "count_balance")["strategies"] == ["a", "b"]


def test_a_strategy_twice_as_slow_on_every_scenario_is_worse() -> None:
    rng = np.random.default_rng(4)
    fast = rng.lognormal(0.0, 0.8, size=12)  # scenarios of very different sizes
    noise = rng.normal(1.0, 0.05, size=12)
    rows = scenario_rows("w", {"fast": fast, "slow": 2 * fast * noise}, "assign_ms")
    result = analysed(rows)
    found = verdict(result, "w", "assign_ms")
    assert found["strategies"] == ["fast"]
    assert found["tied"] is False
    effect = found["effect"]
    assert effect["strategy"] == "slow"
    assert effect["relative_low"] < 1.0 < effect["relative_high"]  # 2x: +100%
    assert effect["difference_low"] > 0
    assert re.fullmatch(r"next: slow \+\d+% \[\+\d+%, \+\d+%\]", describe_effect(effect, "ms"))


def test_timings_within_the_margin_tie_where_counts_do_not() -> None:
    """10% more on every scenario: a real difference for a deterministic count, noise for a
    timing (the practical-equivalence margin)."""
    assert TIMING_MARGIN > 0.10
    base = np.array([10.0, 20.0, 40.0, 80.0, 15.0, 30.0])
    values = {"a": base, "b": base * 1.10}
    rows = scenario_rows("w", values, "assign_ms") + scenario_rows("w", values, "count_balance")
    result = analysed(rows)
    timing = verdict(result, "w", "assign_ms")
    count = verdict(result, "w", "count_balance")
    assert timing["strategies"] == ["a", "b"]
    assert timing["tied"] is True
    assert count["strategies"] == ["a"]
    comparison = next(
        c for c in result["comparisons"] if c["metric"] == "assign_ms" and c["strategy"] == "b"
    )
    assert comparison["difference_low"] > 0  # the interval excludes 0: only the margin ties them
    assert comparison["worse"] is False


def test_a_timing_on_one_scenario_shows_nothing_worse_where_a_count_does() -> None:
    """One scenario gives one measurement per strategy: its noise (up to 30% between runs of a
    0.1 ms call on a loaded machine) cannot be told from a difference, so no timing verdict; a
    deterministic count on the same single scenario is exact and still decides."""
    values = {"a": [0.10], "b": [0.13], "c": [0.40]}
    rows = scenario_rows("w", values, "assign_ms") + scenario_rows("w", values, "count_balance")
    result = analysed(rows)
    timing = verdict(result, "w", "assign_ms")
    assert timing["strategies"] == ["a", "b", "c"]
    assert timing["tied"] is True
    assert timing["effect"] is None
    assert verdict(result, "w", "count_balance")["strategies"] == ["a"]
    assert result["method"]["min_timed_scenarios"] == 2
    # Two scenarios are enough for a clear difference to count.
    twice = {"a": [0.10, 0.11], "b": [0.11, 0.12], "c": [0.40, 0.42]}
    assert verdict(analysed(scenario_rows("w", twice, "assign_ms")), "w", "assign_ms")[
        "strategies"
    ] == ["a", "b"]


def test_higher_is_better_metrics_pick_the_highest() -> None:
    rows = scenario_rows(
        "w", {"local": [0.9, 0.8, 0.95], "remote": [0.3, 0.2, 0.4]}, "rack_locality"
    )
    found = verdict(analysed(rows), "w", "rack_locality")
    assert found["strategies"] == ["local"]
    assert found["effect"]["difference"] < 0


def test_the_same_input_gives_the_same_analysis() -> None:
    rng = np.random.default_rng(5)
    rows = scenario_rows(
        "w",
        {s: rng.lognormal(0, 0.5, size=9) for s in ("a", "b", "c", "d")},
        "assign_ms",
    ) + scenario_rows(
        "v", {s: rng.integers(0, 5, size=9) for s in ("a", "b", "c", "d")}, "count_balance"
    )
    first = analysed(rows)
    assert analysed(list(reversed(rows))) == first  # row order does not matter either
    assert analysed(rows, seed=8)["verdicts"] is not None


def test_overall_counts_wins_and_says_ties() -> None:
    rows = []
    for i, winner in enumerate(("a", "b", "a", "b")):
        values = {s: [5.0, 6.0, 7.0] for s in ("a", "b", "c")}
        values[winner] = [1.0, 2.0, 1.0]
        rows += scenario_rows(f"w{i}", values, "count_balance")
    (overall,) = analysed(rows)["overall"]
    assert overall["strategies"] == ["a", "b"]
    assert overall["tied"] is True
    assert overall["wins"] == {"a": 2, "b": 2}
    assert overall["workloads"] == 4


def test_one_scenario_gives_exact_verdicts_without_an_interval() -> None:
    rows = scenario_rows("w", {"range": [10.0], "roundrobin": [1.0]}, "count_balance")
    result = analysed(rows)
    estimate = {e["strategy"]: e for e in result["estimates"]}
    assert estimate["range"]["low"] == estimate["range"]["high"] == 10.0
    assert verdict(result, "w", "count_balance")["strategies"] == ["roundrobin"]


def test_without_per_scenario_rows_the_workload_means_are_used() -> None:
    """A report built by hand (no ``scenarios`` table): the same verdicts, no intervals."""
    summary = [
        {"workload": "w", "strategy": s, "metric": "count_balance", "mean": v}
        for s, v in (("a", 1.0), ("b", 1.0), ("c", 4.0))
    ]
    result = analyse({"summary": summary}, INFOS, 7)
    assert verdict(result, "w", "count_balance")["strategies"] == ["a", "b"]
    assert "no intervals" in result["method"]["unit"]


# -- scaling ---------------------------------------------------------------------------------------


def growth_rows(
    exponents: Mapping[str, float], noise: float, rng: np.random.Generator
) -> list[dict[str, Any]]:
    sizes = [100, 1000, 10000] * 6
    values = {
        s: [0.01 * p**k * rng.lognormal(0, noise) for p in sizes] for s, k in exponents.items()
    }
    return scenario_rows("grid", values, "assign_ms", partitions=sizes)


def scaling_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    (entry,) = analysed(rows)["scaling"]
    return dict(entry)


def test_the_exponent_interval_covers_the_true_growth() -> None:
    entry = scaling_of(growth_rows({"linear": 1.0, "sqrt": 0.5}, 0.1, np.random.default_rng(6)))
    growth = {g["strategy"]: g for g in entry["growth"]}
    for strategy, truth in (("linear", 1.0), ("sqrt", 0.5)):
        assert growth[strategy]["low"] <= truth <= growth[strategy]["high"], growth[strategy]
    assert entry["best"] == "sqrt"
    assert entry["winners"] == ["sqrt"]
    assert entry["effect"]["strategy"] == "linear"
    assert entry["effect"]["difference"] > EXPONENT_MARGIN
    assert entry["fastest"] == ["sqrt"]
    assert entry["largest"] == 10000


def test_the_same_growth_at_another_speed_is_a_scaling_tie() -> None:
    rng = np.random.default_rng(7)
    rows = growth_rows({"a": 0.7}, 0.05, rng)
    rows += [
        {**r, "strategy": "b", "mean": r["mean"] * 3 * rng.lognormal(0, 0.05)}
        for r in rows
        if r["strategy"] == "a"
    ]
    entry = scaling_of(rows)
    assert entry["winners"] == ["a", "b"]
    assert entry["effect"] is None
    assert entry["fastest"] == ["a"]  # three times faster at every size


def test_a_workload_spanning_less_than_a_decade_has_no_scaling() -> None:
    values = {"a": [1.0, 2.0, 3.0]}
    rows = scenario_rows("w", values, "assign_ms", partitions=[100, 200, 400])
    assert analysed(rows)["scaling"] == []


def test_interval_draws_ignore_empty_resamples() -> None:
    """A metric missing on most scenarios still gets an interval from the resamples that drew
    it (and no warning turns into an error)."""
    values = np.full((10, 1), np.nan)
    values[3, 0] = 4.0
    means = Resampler(10, seed=1).means(values)
    assert np.isnan(means).any()
    assert np.nanmax(means) == 4.0


def test_timing_differences_below_the_measurements_resolution_tie() -> None:
    """Twice as slow, but by 0.1 ms: below what the measurement can tell (its resolution), so a
    tie; the same ratio on calls of 10 ms is a verdict."""
    infos = {**INFOS, "assign_ms": {**INFOS["assign_ms"], "resolution": 0.25}}
    tiny = np.array([0.10, 0.11, 0.09, 0.12])
    large = tiny * 100
    tiny_rows = scenario_rows("tiny", {"a": tiny, "b": 2 * tiny}, "assign_ms")
    large_rows = scenario_rows("large", {"a": large, "b": 2 * large}, "assign_ms")
    result = analysed(tiny_rows + large_rows, infos)
    assert verdict(result, "tiny", "assign_ms")["strategies"] == ["a", "b"]
    assert verdict(result, "tiny", "assign_ms")["tied"] is True
    assert verdict(result, "large", "assign_ms")["strategies"] == ["a"]
