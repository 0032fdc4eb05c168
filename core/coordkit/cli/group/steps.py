"""The steps of ``coordkit group run``: parsing, checking a plan before anything starts, and
applying a step to a running group."""

from __future__ import annotations

import time

import click
from attrs import field, frozen, validators

from coordkit.cli.cluster.spec import MAX_RECORDS
from coordkit.cli.group.runs import GroupRun
from coordkit.cli.numbers import MAX_SECONDS, parse_integer, parse_seconds
from coordkit.engine import Cluster
from coordkit.kafka.model import TopicPartition

STEP_HELP = {
    "join[:N]": "start N more consumers (default 1)",
    "leave:I": "consumer I closes: commits and sends LeaveGroup (a static member does not)",
    "crash:I": "consumer I crashes: no commit, no LeaveGroup; detected at the session timeout",
    "restart:I": "stopped consumer I starts again (with --static: the same group.instance.id)",
    "kill-coordinator": "crash the broker coordinating the group",
    "produce:N": "append N records to every partition, then the consumers poll",
    "commit": "every consumer commits its positions",
    "sleep:S": "wait S seconds",
}
#: Step name → the usage shown in errors.
_USAGE = {key.split(":")[0].split("[")[0]: key for key in STEP_HELP}
_CONSUMER_STEPS = ("leave", "crash", "restart")
#: Consumers one run starts in all (each has its own session and threads).
MAX_CONSUMERS = 256


@frozen
class GroupStep:
    """One step of a run; ``amount`` is the count, consumer number or seconds it takes."""

    action: str = field(validator=validators.in_(tuple(_USAGE)))
    amount: float | None = None
    text: str = ""

    @property
    def number(self) -> int:
        return 1 if self.amount is None else int(self.amount)

    def __str__(self) -> str:
        return self.text or self.action


def _step_error(text: str, problem: str) -> click.BadParameter:
    return click.BadParameter(f"step {text!r}: {problem}", param_hint="--step")


def parse_step(text: str) -> GroupStep:
    action, sep, argument = text.partition(":")
    if action not in _USAGE:
        raise click.BadParameter(
            f"unknown step {text!r}; steps: " + ", ".join(STEP_HELP), param_hint="--step"
        )
    takes = _USAGE[action]
    if action in ("kill-coordinator", "commit"):
        if sep:
            raise _step_error(text, f"expected {takes} (it takes no argument)")
        return GroupStep(action, None, text)
    if not sep and action == "join":
        return GroupStep(action, None, text)
    if not argument:
        raise _step_error(text, f"expected {takes}")
    try:
        if action == "sleep":
            return GroupStep(action, parse_seconds(argument, 0.0, MAX_SECONDS), text)
        if action in ("join", "produce"):
            count = parse_integer(argument, 0, MAX_CONSUMERS if action == "join" else MAX_RECORDS)
            if count == 0:
                raise _step_error(text, "the count must be at least 1")
            return GroupStep(action, count, text)
        return GroupStep(action, parse_integer(argument, 0, MAX_CONSUMERS - 1), text)
    except ValueError as exc:
        raise _step_error(text, f"{exc} (expected {takes})") from None


def check_plan(plan: list[GroupStep], consumers: int, brokers: int, *, legacy: bool) -> None:
    """Refuse a plan that names a consumer that does not exist or is not in the state the step
    needs at that point, or that kills the last broker, before anything starts."""
    running = set(range(consumers))
    stopped: set[int] = set()
    started = consumers
    live_brokers = brokers
    for position, step in enumerate(plan, start=1):
        where = f"(step {position})"
        if step.action == "join":
            running |= set(range(started, started + step.number))
            started += step.number
            if started > MAX_CONSUMERS:
                raise _step_error(
                    str(step), f"{started} consumers in all {where}; at most {MAX_CONSUMERS}"
                )
        elif step.action in _CONSUMER_STEPS:
            number = step.number
            if number >= started:
                known = f"consumers 0-{started - 1}" if started else "no consumers"
                raise _step_error(str(step), f"there is no consumer {number} {where}; {known}")
            if step.action == "restart":
                if number not in stopped:
                    raise _step_error(
                        str(step), f"consumer {number} is running {where}; leave or crash it first"
                    )
                stopped.discard(number)
                running.add(number)
            else:
                if number not in running:
                    raise _step_error(str(step), f"consumer {number} already stopped {where}")
                running.discard(number)
                stopped.add(number)
        elif step.action == "kill-coordinator":
            if legacy:
                raise _step_error(str(step), "legacy consumers have no group coordinator")
            if live_brokers <= 1:
                raise _step_error(
                    str(step), f"it would leave no broker to take over {where} (--brokers)"
                )
            live_brokers -= 1


#: How long an append waits for partitions whose leader the brokers do not know yet.
APPEND_TIMEOUT = 30.0


def append(
    cluster: Cluster,
    records: int,
    partitions: list[TopicPartition],
    timeout: float = APPEND_TIMEOUT,
) -> None:
    """Append ``records`` to each partition and replicate them, so that they are acknowledged
    (below the high watermark, where consumers read up to).

    A partition whose leader the brokers have not heard of yet (a loaded machine delays the news
    of a new topic's leaders) refuses the records: it is tried again until ``timeout``, so every
    partition gets its ``records``, as the step says."""
    pending = [(tp.topic, tp.partition) for tp in partitions]
    deadline = time.monotonic() + timeout
    while True:
        pending = [tp for tp in pending if cluster.produce(records, [tp]) == 0]
        if not pending:
            break
        if time.monotonic() > deadline:
            names = ", ".join(f"{t}-{p}" for t, p in pending[:5])
            raise click.ClickException(
                f"could not append to {len(pending)} partition(s) ({names}) within {timeout:g}s: "
                "no live leader"
            )
        time.sleep(0.02)
    cluster.replicate()


def run_step(
    run: GroupRun, cluster: Cluster, step: GroupStep, universe: list[TopicPartition]
) -> None:
    match step.action:
        case "join":
            run.start_consumers(step.number)
        case "leave":
            run.leave(step.number)
        case "crash":
            run.crash(step.number)
        case "restart":
            run.restart(step.number)
        case "kill-coordinator":
            run.kill_coordinator()
        case "produce":
            append(cluster, step.number, universe)
            run.poll()
        case "commit":
            run.commit()
        case "sleep":
            time.sleep(step.amount or 0.0)
