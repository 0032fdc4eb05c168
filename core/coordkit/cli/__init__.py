"""The ``coordkit`` command line (click). Plugins add subcommands through
``coordkit_register_commands``."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import click

from coordkit.__about__ import __version__
from coordkit.cli.acls import acls_command
from coordkit.cli.admin import (
    brokers_command,
    delete_node_command,
    elect_preferred_command,
    reassign_command,
    topics_group,
)
from coordkit.cli.assign import assign_command
from coordkit.cli.cluster import cluster_group
from coordkit.cli.configs import configs_command
from coordkit.cli.errors import CommandError, visible_message
from coordkit.cli.group import group_group
from coordkit.cli.plugin_list import plugins_command
from coordkit.cli.serve import serve_command
from coordkit.cli.tree import tree_command
from coordkit.errors import CoordkitError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class _PluginCommands(click.Group):
    """Adds plugin-registered commands the first time the command list is needed, and turns
    every :class:`CoordkitError` a command raises into a :class:`CommandError` (exit status 2)."""

    _loaded = False

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _refusals():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _refusals():
            return super().invoke(ctx)

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


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """Errors of coordkit's own as :class:`CommandError`; click's messages made visible."""
    try:
        yield
    except CoordkitError as exc:
        raise CommandError(str(exc)) from exc
    except click.UsageError as exc:
        shown = visible_message(exc.format_message())
        if shown != exc.format_message():  # a value quoted with control characters
            raise click.UsageError(shown, exc.ctx) from None
        raise
    except click.ClickException as exc:
        if isinstance(exc, CommandError) or visible_message(exc.message) == exc.message:
            raise
        raise click.ClickException(visible_message(exc.message)) from None


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
cli.add_command(topics_group)
cli.add_command(configs_command)
cli.add_command(reassign_command)
cli.add_command(elect_preferred_command)
cli.add_command(brokers_command)
cli.add_command(delete_node_command)
cli.add_command(serve_command)
cli.add_command(acls_command)


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
        CommandError(str(exc)).show()
        sys.exit(CommandError.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
