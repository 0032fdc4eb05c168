"""``coordkit plugins``: every plugin, its distribution and what it registered."""

from __future__ import annotations

import json

import click
from rich.text import Text

from coordkit.cli.tables import Column, FittedTable, Kind, output_console
from coordkit.plugins import get_plugin_manager
from coordkit.support.terminal import plain


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
    rows = [
        [
            p.name + ("" if p.builtin else " (third-party)"),
            p.distribution or "-",
            p.version or "-",
            p.module,
            Text("\n").join(
                plain(f"{kind}: {', '.join(names)}") for kind, names in sorted(p.registered.items())
            )
            or "-",
        ]
        for p in infos
    ]
    columns = [
        Column("plugin"),
        Column("distribution", short="dist."),
        Column("version"),
        Column("module"),
        Column("registers", Kind.TEXT),
    ]
    output_console().print(FittedTable(columns, rows, title="coordkit plugins"))
