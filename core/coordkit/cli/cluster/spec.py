"""The demo's input language: ``--topic NAME:PARTITIONS:REPLICATION_FACTOR`` and the
``--step`` actions, parsed and bounded before anything starts."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import click

from coordkit.cli.numbers import (
    MAX_SECONDS,
    parse_integer,
    parse_seconds,
)
from coordkit.kafka.model import validate_topic_name
from coordkit.store.urls import StoreURL

DEFAULT_STORE = "memory://coordkit-cluster"
#: Brokers one process runs (each has its own sessions and threads).
MAX_BROKERS = 64
#: Partitions of one topic created from the command line (every one is a few store nodes).
MAX_TOPIC_PARTITIONS = 10_000
#: Records one produce step or option appends to each partition.
MAX_RECORDS = 1_000_000_000


@attrs.frozen
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int


@attrs.frozen
class Step:
    """A step of the plan; ``option`` is where it was given (``--step``, ``--kill``, ...)."""

    action: str
    args: tuple[str, ...] = ()
    option: str = "--step"

    def __str__(self) -> str:
        return ":".join((self.action, *self.args))


STEP_HELP = {
    "kill:N": "crash broker N (its session ends, no controlled shutdown)",
    "stop:N": "stop broker N after a controlled shutdown",
    "restart:N": "start broker N again on a new session",
    "shutdown:N": "controlled shutdown of broker N (it stays registered)",
    "create:T:P:R": "create topic T with P partitions and replication factor R",
    "delete:T": "delete topic T",
    "grow:T:P": "increase topic T to P partitions",
    "produce:N": "append N records to every partition (acks=all)",
    "replicate": "one replication round (leaders add caught-up followers to the ISR)",
    "rebalance": "run the preferred-leader rebalance check now",
    "sleep:S": "wait S seconds",
}
_ARITY = {
    "kill": 1,
    "stop": 1,
    "restart": 1,
    "shutdown": 1,
    "create": 3,
    "delete": 1,
    "grow": 2,
    "produce": 1,
    "replicate": 0,
    "rebalance": 0,
    "sleep": 1,
}


TOPIC_FORMAT = "NAME:PARTITIONS:REPLICATION_FACTOR"


def parse_topic(text: str) -> TopicSpec:
    """``NAME:PARTITIONS:REPLICATION_FACTOR`` of ``--topic``; every refusal names ``--topic``,
    the value and what is wrong with it."""
    parts = text.split(":")
    if len(parts) != 3:
        raise click.BadParameter(f"{text!r}: expected {TOPIC_FORMAT}", param_hint="--topic")
    name, partitions, factor = parts
    try:
        return TopicSpec(
            validate_topic_name(name),
            _labelled("partitions", parse_integer, partitions, 1, MAX_TOPIC_PARTITIONS),
            _labelled("replication factor", parse_integer, factor, 1, MAX_BROKERS),
        )
    except ValueError as exc:
        raise click.BadParameter(
            f"{text!r}: {exc} (expected {TOPIC_FORMAT})", param_hint="--topic"
        ) from None


def _labelled(label: str, parse: Callable[[str, int, int], int], text: str, *bounds: int) -> int:
    """``parse(text, *bounds)``, its refusal starting with what the number is."""
    try:
        return parse(text, *bounds)
    except ValueError as exc:
        raise ValueError(f"{label}: {exc}") from None


def check_replication(specs: Sequence[TopicSpec], brokers: int) -> None:
    """Refuse a topic whose replication factor is above the number of brokers."""
    for spec in specs:
        if spec.replication_factor > brokers:
            raise click.BadParameter(
                f"topic {spec.name!r}: replication factor {spec.replication_factor} needs at "
                f"least as many brokers (--brokers is {brokers})",
                param_hint="--topic",
            )


def _step_error(text: str, problem: str) -> click.BadParameter:
    return click.BadParameter(f"step {text!r}: {problem}", param_hint="--step")


def parse_step(text: str) -> Step:
    action, *args = text.split(":")
    if action not in _ARITY:
        raise click.BadParameter(
            f"unknown step {text!r}; steps: " + ", ".join(STEP_HELP), param_hint="--step"
        )
    usage = next(k for k in STEP_HELP if k.split(":")[0] == action)
    if len(args) != _ARITY[action]:
        raise _step_error(text, f"expected {usage}")
    try:
        match action:
            case "kill" | "stop" | "restart" | "shutdown":
                _labelled("broker", parse_integer, args[0], 0, MAX_BROKERS - 1)
            case "produce":
                _labelled("records", parse_integer, args[0], 1, MAX_RECORDS)
            case "create":
                validate_topic_name(args[0])
                _labelled("partitions", parse_integer, args[1], 1, MAX_TOPIC_PARTITIONS)
                _labelled("replication factor", parse_integer, args[2], 1, MAX_BROKERS)
            case "delete":
                validate_topic_name(args[0])
            case "grow":
                validate_topic_name(args[0])
                _labelled("partitions", parse_integer, args[1], 1, MAX_TOPIC_PARTITIONS)
            case "sleep":
                parse_seconds(args[0], 0.0, MAX_SECONDS)
    except ValueError as exc:
        raise _step_error(text, f"{exc} (expected {usage})") from None
    return Step(action, tuple(args))


def check_plan(plan: Sequence[Step], brokers: int) -> None:
    """Refuse, before anything starts, a step naming a broker the cluster does not have at that
    point (``restart:N`` adds broker N), or creating a topic that needs more brokers; the error
    names the option the step came from."""
    known = set(range(brokers))
    for position, step in enumerate(plan, start=1):
        problem = None
        if step.action in ("kill", "stop", "shutdown") and int(step.args[0]) not in known:
            listing = ", ".join(map(str, sorted(known)))
            problem = f"there is no broker {step.args[0]} (step {position}); brokers: {listing}"
        if step.action == "restart":
            known.add(int(step.args[0]))
        if step.action == "create" and int(step.args[2]) > len(known):
            problem = (
                f"replication factor {step.args[2]} needs as many brokers; the cluster has "
                f"{len(known)} (step {position})"
            )
        if problem is not None:
            if step.option == "--step":
                raise _step_error(str(step), problem)
            raise click.BadParameter(
                f"{step.args[0]}: {problem} (--{step.action} runs after every --step)",
                param_hint=step.option,
            )


def shared_store(url: str) -> str:
    parsed = StoreURL.parse(url)
    if parsed.scheme == "memory" and not (parsed.host_string or parsed.path.strip("/")):
        return DEFAULT_STORE
    return url
