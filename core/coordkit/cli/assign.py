"""``coordkit assign``: run an assignor on a group described in JSON and show the result."""

from __future__ import annotations

import json
import time
from typing import IO

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from coordkit.assignment import GroupAssignment, GroupSubscription
from coordkit.assignment_io import (
    AssignmentSummary,
    assignment_to_json,
    loads_group,
    member_loads,
    summarize,
)
from coordkit.plugins import get_plugin_manager

INPUT_HELP = """\b
Input JSON (FILE, or stdin when FILE is omitted or '-'):
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
@click.argument("file", type=click.File("r", encoding="utf-8"), default="-", required=False)
def assign_command(assignor_name: str, fmt: str, file: IO[str]) -> None:
    """Assign a consumer group's partitions with an assignor and summarise the result."""
    assignor = get_plugin_manager().assignor(assignor_name)  # unknown name: lists the known ones
    group = loads_group(file.read())
    started = time.perf_counter()
    assignment = assignor.assign(group)
    elapsed = time.perf_counter() - started
    summary = summarize(group, assignment, elapsed)
    if fmt == "json":
        click.echo(json.dumps(assignment_to_json(assignor.name, assignment, summary)))
    else:
        _print_table(assignor.name, group, assignment, summary)


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
    table = Table(title=f"assignment by {name}")
    table.add_column("member", no_wrap=True)
    if has_static:
        table.add_column("instance id", no_wrap=True)
    if has_rack:
        table.add_column("rack", no_wrap=True)
    table.add_column("count", justify="right")
    if loads is not None:
        table.add_column("load", justify="right")
    table.add_column("partitions", overflow="fold")
    if assignment.has_withheld:
        table.add_column("withheld", overflow="fold")
    for member in assignment.members:
        sub = group.members[member]
        row = [escape(member)]
        if has_static:
            row.append(escape(sub.instance_id or "-"))
        if has_rack:
            row.append(escape(sub.rack or "-"))
        row.append(str(summary.counts[member]))
        if loads is not None:
            row.append(f"{loads[member]:g}")
        row.append(escape(compact_partitions(assignment.by_topic(member))) or "-")
        if assignment.has_withheld:
            withheld = assignment.space.group_by_topic(assignment.withheld_indices(member))
            row.append(escape(compact_partitions(withheld)) or "-")
        table.add_row(*row)
    console = Console()
    console.print(table)
    line = (
        f"{summary.members} members, {summary.partitions} partitions, "
        f"balance (max-min) {summary.balance}, moves {summary.moves}"
    )
    if summary.load_balance is not None:
        line += f", load balance (max/mean) {summary.load_balance:.3f}"
    if summary.withheld:
        line += f", withheld {summary.withheld}"
    line += f", assigned in {summary.time_s * 1000:.2f} ms"
    console.print(escape(line), highlight=False)
