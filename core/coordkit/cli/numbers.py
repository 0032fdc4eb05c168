"""The command line's number options: click types over :mod:`coordkit.support.numbers`' rules (plain
ASCII decimals, every value bounded, refusals naming the value and the bounds; click adds the
option: ``Invalid value for '--watch': ...``)."""

from __future__ import annotations

from typing import Any

import click

from coordkit.support.numbers import MAX_INT64, MAX_SECONDS, parse_integer, parse_seconds

__all__ = ["MAX_INT64", "MAX_SECONDS", "Integer", "Seconds", "parse_integer", "parse_seconds"]


class Integer(click.IntRange):
    """A whole-number option in ``[minimum, maximum]`` (see :func:`parse_integer`); its help
    shows the range."""

    def __init__(self, minimum: int = 0, maximum: int = MAX_INT64):
        super().__init__(min=minimum, max=maximum)
        self.minimum = minimum
        self.maximum = maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            return parse_integer(_text(value), self.minimum, self.maximum)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Seconds(click.FloatRange):
    """A duration option in seconds (see :func:`parse_seconds`); its help shows the range."""

    name = "seconds"

    def __init__(
        self, minimum: float = 0.0, maximum: float = MAX_SECONDS, *, above_minimum: bool = False
    ):
        super().__init__(min=minimum, max=maximum, min_open=above_minimum)
        self.minimum = minimum
        self.maximum = maximum
        self.above_minimum = above_minimum

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            return parse_seconds(
                _text(value), self.minimum, self.maximum, above_minimum=self.above_minimum
            )
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _text(value: object) -> str:
    """An option's value as text: what was typed, or a default written as it would be typed."""
    if isinstance(value, float):
        return repr(value)
    return str(value)
