"""The options the admin commands share — ``--store``, ``--placement``, whole numbers — and how a
bad value is refused: one ``error:`` line naming the option and the value, exit status 2.

Click's own ``BadParameter`` prints the usage before its message; these options raise
:class:`~coordkit.cli.errors.CommandError` instead, so a refusal is a single line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from coordkit.cli.errors import CommandError
from coordkit.cli.numbers import Integer
from coordkit.cli.tree import DEFAULT_STORE_ENV
from coordkit.engine.topics import DEFAULT_PLACEMENT
from coordkit.errors import UnknownNameError
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.placement import ReplicaPlacement

F = TypeVar("F", bound=Callable[..., Any])

#: Kafka's broker ids and partition numbers are Java ints.
MAX_INT32 = 2**31 - 1
#: Kafka's replication factor is a Java short.
MAX_REPLICATION_FACTOR = 32_767


def store_option(function: F) -> F:
    """``--store URL`` (or ``$COORDKIT_STORE``), required: an admin command on the private
    ``memory://`` default would only ever see an empty tree."""
    decorated: F = click.option(
        "--store",
        "store_url",
        envvar=DEFAULT_STORE_ENV,
        required=True,
        metavar="URL",
        help=f"Store URL of the cluster (or ${DEFAULT_STORE_ENV}), e.g. zookeeper://host:2181/kafka.",
    )(function)
    return decorated


def placement_option(function: F) -> F:
    decorated: F = click.option(
        "--placement",
        default=DEFAULT_PLACEMENT,
        show_default=True,
        metavar="NAME",
        help="Replica placement strategy (kafka, kafka-rack-aware, balanced, rendezvous, or a "
        "plugin's); kafka-rack-aware is Kafka's own.",
    )(function)
    return decorated


def placement_strategy(name: str, option: str = "--placement") -> ReplicaPlacement:
    """The placement strategy registered as ``name``; refused naming ``option`` otherwise."""
    try:
        strategy: ReplicaPlacement = get_plugin_manager().placement(name)
    except UnknownNameError as exc:
        raise CommandError(f"{option} {name!r}: {exc}") from None
    return strategy


def option_name(param: click.Parameter | None) -> str:
    """How the user wrote the option: its longest spelling (``--partitions``)."""
    if param is None or not param.opts:
        return "value"
    return max(param.opts, key=len)


class WholeNumber(Integer):
    """:class:`~coordkit.cli.numbers.Integer`, refused in one line naming the option."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            raise CommandError(f"{option_name(param)} {str(value)!r}: {exc.message}") from None
