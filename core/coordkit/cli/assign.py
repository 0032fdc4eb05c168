"""``coordkit assign``: run an assignor on a group described in JSON and show the result."""

from __future__ import annotations

import json
import sys
import time
from typing import IO

import click
from rich.text import Text

from coordkit.cli.errors import CommandError
from coordkit.cli.filenames import LocalPath
from coordkit.cli.numbers import Integer
from coordkit.cli.tables import Column, FittedTable, Kind, output_console
from coordkit.errors import AssignmentInputError, UnknownNameError
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import GroupAssignment, GroupSubscription
from coordkit.strategies.assignment_io import (
    DEFAULT_MAX_PARTITIONS,
    MAX_INPUT_BYTES,
    AssignmentSummary,
    AssignmentTooLargeError,
    assignment_to_json,
    loads_group,
    member_loads,
    summarize,
)
from coordkit.support.terminal import plain, visible_json

#: Raises the partition limit of the input (as --max-partitions does).
MAX_PARTITIONS_ENV = "COORDKIT_ASSIGN_MAX_PARTITIONS"

INPUT_HELP = """\b
Input JSON (FILE, or stdin when FILE is omitted or '-'; UTF-8):
{"topics": {"t0": 3,
            "t1": {"partitions": 2, "replica_racks": [["a","b"], ["b","c"]], "loads": [5, 1]}},
 "members": {"C0": {"topics": ["t0", "t1"], "instance_id": "i1", "owned": ["t0-0"],
                    "generation": 1, "rack": "a"}}}
Every member field but "topics" is optional."""


@click.command("assign", epilog=INPUT_HELP)
@click.option(
    "--assignor",
    "-a",
    "assignor_name",
    default="range",
    show_default=True,
    help="Assignor name (`coordkit plugins` lists them).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--max-partitions",
    type=Integer(1),
    envvar=MAX_PARTITIONS_ENV,
    default=DEFAULT_MAX_PARTITIONS,
    show_default=True,
    help=f"Refuse input whose topics have more partitions in all (or ${MAX_PARTITIONS_ENV}).",
)
@click.argument(
    "file",
    type=LocalPath(exists=True, dir_okay=False, readable=True, allow_dash=True),
    default="-",
    required=False,
)
def assign_command(assignor_name: str, fmt: str, max_partitions: int, file: str) -> None:
    """Assign a consumer group's partitions with an assignor and summarise the result."""
    try:
        assignor = get_plugin_manager().assignor(assignor_name)
    except UnknownNameError as exc:  # lists the registered ones
        raise click.BadParameter(str(exc), param_hint="'--assignor' / '-a'") from None
    group = _read_group(_read_input(file), max_partitions)
    started = time.perf_counter()
    assignment = assignor.assign(group)
    elapsed = time.perf_counter() - started
    summary = summarize(group, assignment, elapsed)
    if fmt == "json":
        document = assignment_to_json(assignor.name, assignment, summary)
        click.echo(visible_json(json.dumps(document, ensure_ascii=False)))
    else:
        _print_table(assignor.name, group, assignment, summary)


def _read_input(file: str) -> bytes:
    """The bytes of FILE (stdin for ``-``), refused when larger than any input may be."""
    if file == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text stream put in place of stdin: its text, as UTF-8
            text = sys.stdin.read(MAX_INPUT_BYTES + 1)
            return text.encode("utf-8", "surrogatepass")
        return _bounded_read(stream, "stdin")
    try:
        with open(file, "rb") as stream:
            return _bounded_read(stream, file)
    except OSError as exc:
        raise CommandError(f"{file}: cannot be read ({exc.strerror or exc})") from None


def _bounded_read(stream: IO[bytes], name: str) -> bytes:
    data = stream.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise AssignmentInputError(f"input: {name} holds more than {MAX_INPUT_BYTES:,} bytes")
    return data


def _read_group(data: bytes, max_partitions: int) -> GroupSubscription:
    """The input parsed and checked; the partition limit's refusal says how to raise it."""
    try:
        return loads_group(data, max_partitions=max_partitions)
    except AssignmentTooLargeError as exc:
        raise CommandError(
            f"{exc}; raise the limit with --max-partitions {exc.requested} "
            f"(or {MAX_PARTITIONS_ENV}={exc.requested})"
        ) from None


def compact_partitions(by_topic: dict[str, list[int]]) -> str:
    """``{"t0": [0, 1, 2, 5]}`` → ``t0[0-2,5]``: runs folded so large assignments stay readable."""
    parts = []
    for topic, numbers in by_topic.items():
        runs: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            if n is not None:
                start = prev = n
        parts.append(f"{topic}[{','.join(runs)}]")
    return " ".join(parts)


def _print_table(
    name: str, group: GroupSubscription, assignment: GroupAssignment, summary: AssignmentSummary
) -> None:
    has_static = any(m.instance_id for m in group.members.values())
    has_rack = any(m.rack for m in group.members.values())
    loads = member_loads(group, assignment) if summary.load_balance is not None else None
    columns = [Column("member")]
    if has_static:
        columns.append(Column("instance id"))
    if has_rack:
        columns.append(Column("rack"))
    columns.append(Column("count", Kind.NUMBER))
    if loads is not None:
        columns.append(Column("load", Kind.NUMBER))
    columns.append(Column("partitions", Kind.TEXT))
    if assignment.has_withheld:
        columns.append(Column("withheld", Kind.TEXT))
    rows = []
    for member in assignment.members:
        sub = group.members[member]
        row = [member]
        if has_static:
            row.append(sub.instance_id or "-")
        if has_rack:
            row.append(sub.rack or "-")
        row.append(f"{summary.counts[member]:,}")
        if loads is not None:
            row.append(f"{loads[member]:,.6g}")
        row.append(compact_partitions(assignment.by_topic(member)) or "-")
        if assignment.has_withheld:
            withheld = assignment.space.group_by_topic(assignment.withheld_indices(member))
            row.append(compact_partitions(withheld) or "-")
        rows.append(row)
    console = output_console()
    console.print(FittedTable(columns, rows, title=plain(f"assignment by {name}")))
    line = (
        f"{summary.members:,} members, {summary.partitions:,} partitions, "
        f"balance (max-min) {summary.balance:,}, moves {summary.moves:,}"
    )
    if summary.load_balance is not None:
        line += f", load balance (max/mean) {summary.load_balance:.3f}"
    if summary.withheld:
        line += f", withheld {summary.withheld:,}"
    line += f", assigned in {summary.time_s * 1000:.2f} ms"
    console.print(Text(line))
