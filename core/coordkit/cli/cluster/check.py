"""``coordkit cluster check``: a cluster's invariants, read from its store without writing."""

from __future__ import annotations

import json

import click

from coordkit.cli.errors import CommandError
from coordkit.cli.tree import DEFAULT_STORE_ENV
from coordkit.engine.invariants import check_cluster
from coordkit.plugins import open_store
from coordkit.support.terminal import visible, visible_json


@click.command("check")
@click.option(
    "--store",
    "store_url",
    envvar=DEFAULT_STORE_ENV,
    required=True,
    help=f"Store URL of the cluster (or ${DEFAULT_STORE_ENV}).",
)
@click.option(
    "--unclean",
    is_flag=True,
    help="The cluster runs with unclean.leader.election.enable=true (topic configs override).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def check_command(store_url: str, unclean: bool, fmt: str) -> None:
    """Check a cluster's invariants against its store, without writing anything.

    Every partition has a state; its leader is live and in the ISR (or -1 only when no ISR
    member is live); its ISR is a subset of its replicas holding no dead broker (but the last
    replica of a leaderless partition); one /controller from the election that set
    /controller_epoch; no admin request pending; every node readable. Exit status 0 when all
    hold, 1 when something is violated (each violation is listed with its path), 2 when
    /controller or /controller_epoch is unreadable: no controller can be elected until it is
    cleared, which the last line says how to do.
    """
    with open_store(store_url, read_only=True) as store:
        result = check_cluster(store, unclean_default=unclean)
    if fmt == "json":
        click.echo(
            visible_json(
                json.dumps(
                    {
                        "converged": result.ok,
                        "partitions": result.partitions,
                        "violations": [
                            {"path": v.path, "message": v.message} for v in result.violations
                        ],
                        "under_replicated": [f"{t}-{p}" for t, p in result.under_replicated],
                    },
                    indent=2,
                    ensure_ascii=False,
                )
            )
        )
    else:
        for violation in result.violations:
            click.echo(visible(f"{violation.path}: {violation.message}"))
        under = len(result.under_replicated)
        state = "converged" if result.ok else f"{len(result.violations)} violation(s)"
        click.echo(
            f"{state}: {result.partitions} partition(s) checked, {under} under-replicated"
            + (
                f" ({visible(', '.join(f'{t}-{p}' for t, p in result.under_replicated[:10]))}"
                + (", ..." if under > 10 else "")
                + ")"
                if under
                else ""
            )
        )
    if result.blocked_by is not None:
        raise CommandError(str(result.blocked_by))
    if not result.ok:
        raise SystemExit(1)
