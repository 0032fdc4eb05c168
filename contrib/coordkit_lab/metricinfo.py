"""What the report knows about a metric: its description from the plugin, where it goes in the
tables, which way is better, and how its differences are judged."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from coordkit.lab import Metric

#: Column order of the built-in metrics (balance, movement, protocol cost, speed); metrics from
#: plugins follow in name order.
PREFERRED_ORDER = (
    "count_balance",
    "topic_balance",
    "load_balance",
    "broker-replica-skew",
    "broker-leader-skew",
    "moved",
    "moved_min",
    "moved_excess",
    "revoked",
    "orphaned",
    "rounds",
    "rack_locality",
    "unassigned",
    "assign_ms",
)
#: The assignors' timing, plotted against partitions before metrics could declare ``scales_with``.
LEGACY_SCALING_METRIC = "assign_ms"
#: Reference values (bounds), shown but never highlighted as "best".
REFERENCE_METRICS = frozenset({"moved_min"})
#: A measured metric (a timing) is worse only when it is worse by more than this fraction of the
#: best's mean: a strategy's ratio to another moves by up to about 23% between two runs of the
#: quick preset on a loaded two-core machine (load 12-17), so a margin of 25% left comparisons
#: measured at +25% to +28% flipping between runs; a third leaves room on both sides (the
#: quick preset's timing ratios sit at +12-20%, +25-28%, +44-46%, +50-54% and above).
TIMING_MARGIN = 1 / 3
#: Units of time: a metric in one of them is measured, like one that declares ``measured``.
TIME_UNITS = frozenset({"ns", "us", "µs", "ms", "s", "seconds", "partition-seconds"})


def metric_info(metrics: Iterable[Metric]) -> dict[str, dict[str, Any]]:
    """What the report needs to know about each metric, in registration (name) order."""
    return {
        m.name: {
            "description": m.description,
            "unit": m.unit,
            "better": m.better,
            "headline": getattr(m, "headline", None),
            "kinds": list(m.kinds),
            "measured": getattr(m, "measured", None),
            "resolution": getattr(m, "resolution", None),
            "tradeoff": getattr(m, "tradeoff", None),
            "scales_with": getattr(m, "scales_with", None),
        }
        for m in metrics
    }


def scales_with(name: str, info: Mapping[str, Any]) -> str | None:
    """What the report plots ``name`` against (``"partitions"``), or ``None``: the metric's own
    ``scales_with``; ``assign_ms``, which predates the attribute, scales with partitions."""
    declared = info.get("scales_with")
    if declared is not None:
        return str(declared)
    return "partitions" if name == LEGACY_SCALING_METRIC else None


def ordered(names: Iterable[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(PREFERRED_ORDER)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def is_measured(info: Mapping[str, Any]) -> bool:
    """A timing (declares ``measured`` or is in a unit of time): noisy, compared with a margin."""
    return bool(info.get("measured")) or str(info.get("unit", "")) in TIME_UNITS


def margin_of(info: Mapping[str, Any]) -> float:
    """The practical-equivalence margin: relative for timings, none for deterministic counts."""
    return TIMING_MARGIN if is_measured(info) else 0.0


def direction_of(info: Mapping[str, Any]) -> float:
    """+1 where lower is better, -1 where higher is: ``direction * (b - a) > 0`` means b is worse."""
    return -1.0 if info.get("better") == "higher" else 1.0
