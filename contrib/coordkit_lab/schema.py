"""The shape of ``summary.json`` (format 2), checked before ``coordkit lab show`` reads it.

A summary comes from a file anyone may have edited: every field the report reads is checked here,
and a wrong one is named with its path (``analysis.verdicts[2].strategies[0]: expected a string,
got a number``), so the terminal code can trust what it is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from coordkit.lab import SCALE_AXES, TRADEOFFS, LabError
from coordkit.support import jsontext

#: The summary format this lab writes and reads. Format 1 (before intervals and trade-offs)
#: had no ``analysis`` section.
FORMAT_VERSION = 2

Check = Callable[[str, Any, Mapping[str, Any]], None]


def _fail(field: str, value: object, what: str) -> LabError:
    return LabError(f"{field}: expected {what}, got {jsontext.kind_of(value)}")


def _is_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and (not isinstance(value, float) or math.isfinite(value))
    )


def _simple(ok: Callable[[Any], bool], what: str) -> Check:
    def check(field: str, value: Any, data: Mapping[str, Any]) -> None:
        if not ok(value):
            raise _fail(field, value, what)

    return check


STR = _simple(lambda v: isinstance(v, str), "a string")
STR_OR_NULL = _simple(lambda v: v is None or isinstance(v, str), "a string or null")
NUM = _simple(_is_number, "a number")
NUM_OR_NULL = _simple(lambda v: v is None or _is_number(v), "a number or null")
BOOL = _simple(lambda v: isinstance(v, bool), "true or false")
COUNT = _simple(
    lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number >= 0"
)
COUNT_OR_NULL = _simple(
    lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "a whole number >= 0 or null",
)
TRADEOFF = _simple(lambda v: v is None or v in TRADEOFFS, f"one of {', '.join(TRADEOFFS)} or null")
SCALE_AXIS = _simple(
    lambda v: v is None or v in SCALE_AXES, f"one of {', '.join(SCALE_AXES)} or null"
)


def METRIC(field: str, value: Any, data: Mapping[str, Any]) -> None:
    STR(field, value, data)
    if value not in data["metrics"]:
        raise LabError(f"{field}: {value!r} is not described under metrics")


def listof(item: Check) -> Check:
    def check(field: str, value: Any, data: Mapping[str, Any]) -> None:
        if not isinstance(value, list):
            raise _fail(field, value, "a list")
        for i, entry in enumerate(value):
            item(f"{field}[{i}]", entry, data)

    return check


def mapping(item: Check) -> Check:
    def check(field: str, value: Any, data: Mapping[str, Any]) -> None:
        if not isinstance(value, dict):
            raise _fail(field, value, "an object")
        for key, entry in value.items():
            item(f"{field}.{key}", entry, data)

    return check


def obj(fields: Mapping[str, Check], *, nullable: bool = False) -> Check:
    """An object with (at least) ``fields``, each checked."""

    def check(field: str, value: Any, data: Mapping[str, Any]) -> None:
        if value is None and nullable:
            return
        if not isinstance(value, dict):
            raise _fail(field, value, "an object or null" if nullable else "an object")
        for name, inner in fields.items():
            if name not in value:
                raise LabError(f"{field}.{name}: missing")
            inner(f"{field}.{name}", value[name], data)

    return check


STRS = listof(STR)

#: Rows of the aggregated tables the report reads.
TABLES: dict[str, Check] = {
    "summary": listof(
        obj({"workload": STR, "strategy": STR, "metric": METRIC, "mean": NUM_OR_NULL})
    ),
    "scaling": listof(
        obj(
            {
                "workload": STR,
                "strategy": STR,
                "metric": METRIC,
                "partitions": COUNT_OR_NULL,
                "mean": NUM_OR_NULL,
            }
        )
    ),
    "cases": listof(
        obj({"workload": STR, "strategy": STR, "params": STR, "metric": STR, "mean": NUM_OR_NULL})
    ),
    "steps": listof(
        obj({"workload": STR, "strategy": STR, "step": COUNT, "metric": STR, "mean": NUM_OR_NULL})
    ),
    "errors": listof(obj({"workload": STR, "strategy": STR, "params": STR, "error": STR})),
    "totals": listof(obj({})),
}

METRICS = mapping(
    obj(
        {
            "description": STR_OR_NULL,
            "unit": STR,
            "better": _simple(lambda v: v in ("lower", "higher"), "'lower' or 'higher'"),
            "headline": STR_OR_NULL,
        }
    )
)
_OPTIONAL_METRIC_FIELDS: dict[str, Check] = {
    "measured": STR_OR_NULL,
    "resolution": NUM_OR_NULL,
    "tradeoff": TRADEOFF,
    "scales_with": SCALE_AXIS,
}

COMPARISON = {
    "strategy": STR,
    "difference": NUM,
    "difference_low": NUM_OR_NULL,
    "difference_high": NUM_OR_NULL,
    "relative": NUM_OR_NULL,
    "relative_low": NUM_OR_NULL,
    "relative_high": NUM_OR_NULL,
}

ANALYSIS = obj(
    {
        "method": obj(
            {
                "unit": STR,
                "confidence": NUM,
                "resamples": COUNT,
                "timing_margin": NUM,
                "exponent_margin": NUM,
            }
        ),
        "estimates": listof(
            obj(
                {
                    "workload": STR,
                    "strategy": STR,
                    "metric": METRIC,
                    "n": COUNT,
                    "mean": NUM,
                    "low": NUM_OR_NULL,
                    "high": NUM_OR_NULL,
                    "best": BOOL,
                }
            )
        ),
        "comparisons": listof(
            obj(
                {
                    "workload": STR,
                    "metric": METRIC,
                    "reference": STR,
                    "n": COUNT,
                    "worse": BOOL,
                    **COMPARISON,
                }
            )
        ),
        "verdicts": listof(
            obj(
                {
                    "workload": STR,
                    "metric": METRIC,
                    "question": STR,
                    "best": STR,
                    "strategies": STRS,
                    "tied": BOOL,
                    "effect": obj(COMPARISON, nullable=True),
                    "gate": obj(
                        {
                            "metric": STR,
                            "within": NUM,
                            "relative": BOOL,
                            "balanced": STRS,
                            "excluded": STRS,
                        },
                        nullable=True,
                    ),
                }
            )
        ),
        "overall": listof(
            obj(
                {
                    "metric": METRIC,
                    "question": STR,
                    "strategies": STRS,
                    "tied": BOOL,
                    "wins": mapping(COUNT),
                    "workloads": COUNT,
                }
            )
        ),
        "scaling": listof(
            obj(
                {
                    "workload": STR,
                    "metric": METRIC,
                    "smallest": COUNT,
                    "fitted_from": COUNT,
                    "largest": COUNT,
                    "best": STR_OR_NULL,
                    "winners": STRS,
                    "effect": obj(
                        {
                            "strategy": STR,
                            "difference": NUM,
                            "low": NUM_OR_NULL,
                            "high": NUM_OR_NULL,
                        },
                        nullable=True,
                    ),
                    "fastest": STRS,
                    "growth": listof(
                        obj(
                            {
                                "strategy": STR,
                                "exponent": NUM_OR_NULL,
                                "low": NUM_OR_NULL,
                                "high": NUM_OR_NULL,
                                "points": listof(
                                    obj(
                                        {
                                            "partitions": COUNT,
                                            "n": COUNT,
                                            "mean": NUM,
                                            "low": NUM_OR_NULL,
                                            "high": NUM_OR_NULL,
                                        }
                                    )
                                ),
                            }
                        )
                    ),
                }
            )
        ),
        "pareto": listof(
            obj(
                {
                    "workload": STR,
                    "dimensions": listof(METRIC),
                    "points": listof(
                        obj(
                            {
                                "strategy": STR,
                                "values": mapping(NUM),
                                "dominated_by": STRS,
                                "clearly_dominated_by": STRS,
                            }
                        )
                    ),
                }
            )
        ),
    }
)


def check_report_data(data: Any, where: str = "summary.json") -> dict[str, Any]:
    """``data`` if it has the shape of a lab summary this lab reads (every field the report and
    ``coordkit lab show`` use), else :class:`LabError` naming ``where`` and the field."""
    try:
        _check(data)
    except LabError as exc:
        raise LabError(f"{where}: {exc}") from None
    checked: dict[str, Any] = data
    return checked


def _check(data: Any) -> None:
    if not isinstance(data, dict):
        raise _fail("the document", data, "an object")
    if "format" not in data:
        raise LabError("format: missing (not a lab summary)")
    version = data["format"]
    if version == 1 and not isinstance(version, bool):
        raise LabError(
            "format: 1 is a report of an older coordkit lab (no intervals or trade-offs); "
            "run `coordkit lab run` again to get one this version reads"
        )
    if version != FORMAT_VERSION or isinstance(version, bool):
        raise LabError(f"format: {version!r} is not a summary format this lab reads")
    for key in ("metrics", "tables", "analysis"):
        if key not in data:
            raise LabError(f"{key}: missing (not a lab summary)")
    if not isinstance(data.get("run", {}), dict):
        raise _fail("run", data["run"], "an object")
    METRICS("metrics", data["metrics"], data)
    for name, info in data["metrics"].items():
        for optional, check in _OPTIONAL_METRIC_FIELDS.items():
            check(f"metrics.{name}.{optional}", info.get(optional), data)
    tables = data["tables"]
    if not isinstance(tables, dict):
        raise _fail("tables", tables, "an object")
    for table, rows in tables.items():
        TABLES.get(table, listof(obj({})))(f"tables.{table}", rows, data)
    ANALYSIS("analysis", data["analysis"], data)
