"""What the Python client programs of the client recordings share (each program imports it from
its own folder; they run as scripts, each in a process of its own): the plan every program plays,
and the way an outcome is written down.

Every program, whatever its client, records the same steps under the same keys (see
``test_client_recordings.py``): the topic ``<prefix>-a`` created with 3 partitions and 2 replicas,
then grown to 4; :data:`COUNTS` records produced to its partitions; a group ``<prefix>-g`` of two
members ``<prefix>-m1`` and ``<prefix>-m2``; the names a program must not find end in ``-unknown``
(a topic described: a client whose metadata requests allow auto-creation has the brokers create
it, so no other step uses that name), ``-missing`` (a topic deleted) and ``-nogroup``.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

#: Records produced to each partition of the topic (its 4 partitions, the third left empty).
COUNTS = (5, 3, 0, 2)
PARTITIONS = len(COUNTS)
#: Seconds any one wait for the cluster (a member's assignment, a rebalance) may take; past it
#: the program fails, printing what it waited for.
WAIT_SECONDS = 60.0
#: How many answers in a row must agree before a program takes the cluster's metadata as settled.
SETTLED = 3
#: The modules whose exceptions are the outcomes a recording expects.
CLIENT_PACKAGES = ("kafka", "aiokafka", "confluent_kafka", "cimpl")


def arguments() -> tuple[str, str]:
    """``<bootstrap servers> <name prefix>`` from the command line (exit status 2 otherwise)."""
    if len(sys.argv) != 3:
        print(f"usage: {sys.argv[0]} <bootstrap servers> <name prefix>", file=sys.stderr)
        sys.exit(2)
    return sys.argv[1], sys.argv[2]


def error_name(exc: BaseException) -> dict[str, str]:
    """What a step that raised records: the exception's name. Standard error gets more, for a
    failure report: a client's error in a line, anything else with its traceback."""
    if type(exc).__module__.split(".")[0] in CLIENT_PACKAGES:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    else:
        traceback.print_exception(exc, file=sys.stderr)
    return {"error": type(exc).__name__}


def outcome(call: Callable[[], Any]) -> Any:
    """What ``call`` returned, or the name of the exception it raised."""
    try:
        return call()
    except Exception as exc:
        return error_name(exc)


def wait_until(
    condition: Callable[[], bool], what: str, step: Callable[[], None] | None = None
) -> None:
    """Call ``step`` (or sleep a little) until ``condition`` holds; past :data:`WAIT_SECONDS`
    raise, naming ``what``."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        if step is None:
            time.sleep(0.05)
        else:
            step()


def wait_settled(condition: Callable[[], bool], what: str) -> None:
    """Wait until ``condition`` holds :data:`SETTLED` times in a row: a Kafka broker learns of a
    topic's new partitions a little after the controller (each answer may come from another
    broker), and one that has not learned of the topic yet answers UNKNOWN_TOPIC_OR_PARTITION: a
    client's error counts as "not yet", as the Java program's ``partitionCount`` has it."""
    streak = [0]

    def settled() -> bool:
        streak[0] = streak[0] + 1 if holds_yet(condition) else 0
        return streak[0] >= SETTLED

    wait_until(settled, what)


def holds_yet(condition: Callable[[], bool]) -> bool:
    """``condition()``, false when it raised a client's error (anything else is raised)."""
    try:
        return condition()
    except Exception as exc:
        if type(exc).__module__.split(".")[0] not in CLIENT_PACKAGES:
            raise
        return False


def value(partition: int, index: int) -> str:
    return f"v{partition}-{index}"


def emit(recording: dict[str, Any]) -> None:
    """The recording, as one line of JSON on standard output."""
    print(json.dumps(recording, sort_keys=False), flush=True)
