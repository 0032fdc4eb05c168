"""Hypothesis for the kit's properties: the settings every property runs with, and the import
that names the extra to install when hypothesis is missing."""

from __future__ import annotations

try:
    import hypothesis
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "coordkit.testing's suites need hypothesis: pip install 'coordkit[testing]'"
    ) from exc

from hypothesis import HealthCheck, Phase

__all__ = ["kit_settings"]


def kit_settings(max_examples: int, *, shrink: bool = True) -> hypothesis.settings:
    """``max_examples`` per property, no deadline (a loaded machine must not fail a property),
    and no health checks that flag slow generation or fixtures reused across examples;
    ``shrink=False`` reports a failing example as found."""
    phases = [p for p in Phase if shrink or p not in (Phase.shrink, Phase.explain)]
    return hypothesis.settings(
        max_examples=max_examples,
        phases=phases,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
            HealthCheck.filter_too_much,
        ],
    )
