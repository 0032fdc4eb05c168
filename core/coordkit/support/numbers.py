"""Numbers and durations from users — command-line options, step arguments, store URL parameters —
parsed in one place by one set of rules.

* Plain ASCII decimal notation only: ``12``, ``0.5``, ``1e-3``. Python's ``int`` and ``float``
  also take ``nan``, ``inf``, ``1_000``, padding and other scripts' digits (``١٢``); none of these
  is a count or a number of seconds here.
* Every value has bounds, checked before anything starts; a refusal names the value and the bounds
  (click adds the option: ``Invalid value for '--watch': ...``).

:func:`parse_integer` and :func:`parse_seconds` read text; the command line's click types
(:mod:`coordkit.cli.numbers`) and the store URL parameters (:mod:`coordkit.store.urls`) call them.
"""

from __future__ import annotations

import math
import re

#: The longest wait any option or step accepts: a day.
MAX_SECONDS = 86_400.0
#: 2**63 - 1: the largest seed, offset or count a 64-bit field (Kafka's, Spark's) holds.
MAX_INT64 = 2**63 - 1

#: What a whole number or a decimal may look like: ASCII digits only, no ``_``, no padding.
INTEGER = re.compile(r"-?[0-9]{1,30}", re.ASCII)
DECIMAL = re.compile(
    r"-?(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})(?:[eE][+-]?[0-9]{1,3})?", re.ASCII
)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _number(value: float) -> str:
    """A bound written out in full: ``86,400``, ``9,223,372,036,854,775,807``, ``0.5``."""
    if isinstance(value, int) or value.is_integer():
        return f"{int(value):,}"
    return repr(value)


def _range(minimum: float, maximum: float, *, above: bool = False) -> str:
    return f"{_number(minimum)} {'<' if above else '<='} x <= {_number(maximum)}"


def parse_integer(text: str, minimum: int = 0, maximum: int = MAX_INT64) -> int:
    """``text`` as a whole number in ``[minimum, maximum]``.

    :raises ValueError: not written in ASCII digits (an optional leading ``-``), or out of range;
        the message quotes the value and the range.
    """
    if not INTEGER.fullmatch(text):
        raise ValueError(f"{_shown(text)} is not a whole number (ASCII digits)")
    value = int(text)
    if not minimum <= value <= maximum:
        raise ValueError(f"{value:,} is not in the range {_range(minimum, maximum)}")
    return value


def parse_seconds(
    text: str, minimum: float = 0.0, maximum: float = MAX_SECONDS, *, above_minimum: bool = False
) -> float:
    """``text`` as a finite number of seconds in ``[minimum, maximum]`` (``(minimum, maximum]``
    with ``above_minimum``).

    :raises ValueError: ``nan``, ``inf`` or anything but ASCII decimal notation, or out of range;
        the message quotes the value and the range.
    """
    if not DECIMAL.fullmatch(text):
        raise ValueError(f"{_shown(text)} is not a number of seconds (e.g. 2, 0.5, 1e-3)")
    value = float(text)
    low = value <= minimum if above_minimum else value < minimum
    if not math.isfinite(value) or low or value > maximum:
        raise ValueError(
            f"{text} seconds is not in the range {_range(minimum, maximum, above=above_minimum)}"
        )
    return value + 0.0  # -0 is 0
