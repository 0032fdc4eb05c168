"""The generated message classes' nested structs (attributes set at import time, which a type
checker cannot see)."""

from __future__ import annotations

from typing import Any

from coordkit.protocol import Struct


def nested(message: type[Struct], name: str) -> Any:
    """``message.<name>``: the struct class Kafka's definitions call ``name`` within ``message``
    (typed ``Any``, as the generated fields are: handlers fill them in by name)."""
    return getattr(message, name)
