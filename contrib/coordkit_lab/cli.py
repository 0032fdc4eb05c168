"""``coordkit lab``: the project's main job."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from coordkit.plugins import get_plugin_manager


@click.group("lab")
def lab() -> None:
    """Compare assignment and election strategies across generated workloads (on Spark)."""


@lab.command("list")
def list_command() -> None:
    """List the strategies, workloads and metrics the lab can combine."""
    manager = get_plugin_manager()
    table = Table(title="coordkit lab components")
    table.add_column("kind")
    table.add_column("names")
    table.add_row("assignors", ", ".join(manager.assignors.names()) or "-")
    table.add_row("workloads", ", ".join(manager.workloads.names()) or "-")
    table.add_row("metrics", ", ".join(manager.metrics.names()) or "-")
    Console().print(table)


@lab.command("run")
def run_command() -> None:
    """Run the lab (the scenario runner arrives with the lab issue)."""
    names = ", ".join(get_plugin_manager().assignors.names())
    click.echo(
        "The Spark lab is not built yet: it arrives with the lab issue (#4).\n"
        f"Strategies it will compare: {names}.\n"
        "Meanwhile: `coordkit assign --assignor NAME FILE` runs one assignor; `coordkit lab list` "
        "shows what is installed."
    )
