"""What ``coordkit cluster`` prints: the cluster as read back from the store, and the
invariant check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.text import Text

from coordkit.cli.tables import Column, FittedTable, Kind
from coordkit.engine import ClusterView, OpCounts
from coordkit.engine.invariants import Convergence
from coordkit.kafka.model import NO_LEADER
from coordkit.support.terminal import markup

# -- rendering ---------------------------------------------------------------------------------


def _numbers(values: Sequence[int]) -> str:
    return ",".join(map(str, values)) or "-"


def render(view: ClusterView, title: str, counts: OpCounts | None = None) -> Group:
    """The controller, its epoch, the brokers and every partition's leadership, as tables that
    fit the terminal."""
    live = set(view.brokers)
    columns = [
        Column("controller", Kind.NUMBER, "ctrl"),
        Column("epoch", Kind.NUMBER),
        Column("brokers", Kind.TEXT),
        Column("leaders per broker", Kind.TEXT, "leaders"),
        Column("offline", Kind.NUMBER),
    ]
    row: list[str | Text] = [
        "-" if view.controller is None else str(view.controller),
        str(view.epoch),
        _numbers(view.brokers),
        ", ".join(f"{b}:{n}" for b, n in sorted(view.leaders_per_broker().items())) or "-",
        str(len(view.offline())),
    ]
    if counts is not None:
        columns.append(Column("store ops (trips/reads/writes)", Kind.NUMBER, "ops t/r/w"))
        row.append(f"{counts.round_trips}/{counts.reads}/{counts.writes}")
    head = FittedTable(columns, [row], title=title)
    rows: list[list[str | Text]] = []
    for p in view.partitions:
        leader = Text("none", style="red") if p.leader == NO_LEADER else Text(str(p.leader))
        if p.leader != NO_LEADER and p.leader not in live:
            leader = Text(f"{p.leader} (down)", style="red")
        elif p.leader != NO_LEADER and p.leader != p.replicas[0]:
            leader.stylize("yellow")
        rows.append(
            [
                f"{p.topic}-{p.partition}",
                _numbers(p.replicas),
                leader,
                str(p.leader_epoch),
                _numbers(p.isr),
                str(p.controller_epoch),
            ]
        )
    for topic, partition in view.uninitialised:
        rows.append([f"{topic}-{partition}", "", Text("no state", style="red"), "", "", ""])
    if not rows:
        return Group(head)
    parts = FittedTable(
        [
            Column("partition"),
            Column("replicas", Kind.TEXT),
            Column("leader", Kind.NUMBER),
            Column("leader epoch", Kind.NUMBER, "l.epoch"),
            Column("isr", Kind.TEXT),
            Column("ctrl epoch", Kind.NUMBER, "c.epoch"),
        ],
        rows,
    )
    return Group(head, parts)


def as_json(view: ClusterView, step: str, counts: OpCounts) -> dict[str, Any]:
    return {
        "step": step,
        "controller": view.controller,
        "epoch": view.epoch,
        "brokers": list(view.brokers),
        "leaders_per_broker": {str(b): n for b, n in view.leaders_per_broker().items()},
        "offline": [f"{t}-{p}" for t, p in view.offline()],
        "store_ops": counts.as_dict(),
        "partitions": {
            f"{p.topic}-{p.partition}": {
                "replicas": list(p.replicas),
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "isr": list(p.isr),
                "controller_epoch": p.controller_epoch,
            }
            for p in view.partitions
        },
    }


def render_convergence(result: Convergence) -> str:
    if result:
        under = len(result.under_replicated)
        return "[green]invariants hold[/]" + (
            f" ({under} partition(s) under-replicated)" if under else ""
        )
    lines = [f"[red]{len(result.violations)} invariant violation(s):[/]"]
    lines.extend(f"  {markup(v)}" for v in result.violations)
    return "\n".join(lines)
