"""``coordkit plugins``: every plugin, its distribution and what it registered."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from coordkit.plugins import get_plugin_manager


@click.command("plugins")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def plugins_command(fmt: str) -> None:
    """List installed plugins with their distribution, version and what they registered."""
    infos = get_plugin_manager().plugins()
    if fmt == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "name": p.name,
                        "module": p.module,
                        "distribution": p.distribution,
                        "version": p.version,
                        "builtin": p.builtin,
                        "registered": {k: list(v) for k, v in p.registered.items()},
                    }
                    for p in infos
                ],
                indent=2,
            )
        )
        return
    table = Table(title="coordkit plugins")
    for column in ("plugin", "distribution", "version", "module", "registers"):
        table.add_column(column)
    for p in infos:
        registers = "\n".join(
            f"{kind}: {', '.join(names)}" for kind, names in sorted(p.registered.items())
        )
        table.add_row(
            p.name + ("" if p.builtin else " (third-party)"),
            p.distribution or "-",
            p.version or "-",
            p.module,
            registers or "-",
        )
    Console().print(table)
