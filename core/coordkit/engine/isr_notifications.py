"""ISR change notifications (Kafka's ``/isr_change_notification``).

A partition leader that changes its ISR writes the new state itself, conditional on the state
node's version, and in the same multi creates a sequential node
``/isr_change_notification/isr_change_NNNNNNNNNN`` holding
``{"version":1,"partitions":[{"topic":"t","partition":0}]}``. The controller watches the folder,
re-reads the listed partitions' states into its cache and deletes the notifications, so its later
decisions start from the ISR the leaders wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from coordkit.engine.states import TP
from coordkit.errors import LayoutError
from coordkit.support import jsontext

ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
PREFIX = "isr_change_"


def notification_prefix() -> str:
    """The path to create (sequentially) for a new notification."""
    return f"{ISR_CHANGE_NOTIFICATION}/{PREFIX}"


def encode(partitions: Iterable[TP]) -> bytes:
    entries = [{"topic": topic, "partition": partition} for topic, partition in partitions]
    return json.dumps({"version": 1, "partitions": entries}, separators=(",", ":")).encode()


def decode(path: str, data: bytes) -> list[TP]:
    """The partitions a notification lists; :class:`LayoutError` names the path otherwise."""
    try:
        obj = jsontext.loads(data)
        entries = obj["partitions"]
        out = [(str(e["topic"]), _partition(e["partition"])) for e in entries]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise LayoutError(path, f"not an ISR change notification ({exc})") from None
    return out


def _partition(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"partition {value!r} is not a partition number")
    return value
