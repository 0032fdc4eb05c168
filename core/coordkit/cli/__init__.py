"""The ``coordkit`` command line (click). Plugins add subcommands through
``coordkit_register_commands``."""

from __future__ import annotations

import sys

import click

from coordkit.__about__ import __version__
from coordkit.cli.assign import assign_command
from coordkit.cli.cluster import cluster_group
from coordkit.cli.group import group_group
from coordkit.cli.plugin_list import plugins_command
from coordkit.cli.tree import tree_command
from coordkit.errors import CoordkitError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class _PluginCommands(click.Group):
    """Adds plugin-registered commands the first time the command list is needed."""

    _loaded = False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        from coordkit.plugins import get_plugin_manager

        for registration in get_plugin_manager().commands:
            if registration.name not in self.commands:
                self.add_command(registration.value)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self._load()
        return super().get_command(ctx, cmd_name)


@click.group(cls=_PluginCommands, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="coordkit")
def cli() -> None:
    """Study and run the coordination layer of partitioned log systems.

    Metadata stores (memory, ZooKeeper, Redis), assignment and election strategies are plugins;
    `coordkit plugins` lists what is installed.
    """


cli.add_command(assign_command)
cli.add_command(plugins_command)
cli.add_command(tree_command)
cli.add_command(cluster_group)
cli.add_command(group_group)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: turns coordkit's own errors into one clear line and exit status 2."""
    try:
        cli.main(args=argv, prog_name="coordkit", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except CoordkitError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
