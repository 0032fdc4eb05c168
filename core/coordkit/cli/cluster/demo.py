"""``coordkit cluster demo``: run N brokers in this process on a store and watch the control plane.

``coordkit cluster demo --store URL --brokers 3 --topic orders:6:2 --kill 1 --restart 1`` starts
the brokers, creates the topics, runs the steps in order (each waits for the controller to finish
its work) and prints the controller, its epoch and every partition's leader after each; ``--watch``
keeps a live view at the end and ``--show-tree`` prints the store in Kafka's layout before the
brokers stop (for ``memory://`` stores, which live only as long as this process).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import click
from rich.live import Live

from coordkit.cli.cluster.spec import (
    DEFAULT_STORE,
    MAX_BROKERS,
    STEP_HELP,
    Step,
    check_plan,
    check_replication,
    parse_step,
    parse_topic,
    shared_store,
)
from coordkit.cli.cluster.view import as_json, render, render_convergence
from coordkit.cli.numbers import (
    MAX_INT64,
    Integer,
    Seconds,
    parse_integer,
)
from coordkit.cli.tables import output_console
from coordkit.cli.tree import DEFAULT_STORE_ENV, _print_tree, walk
from coordkit.engine import Cluster, ClusterView, EngineConfig, OpCounts
from coordkit.engine.config import UNCLEAN_LEADER_ELECTION_ENABLE
from coordkit.engine.invariants import Convergence
from coordkit.errors import CoordkitError
from coordkit.plugins import get_plugin_manager
from coordkit.store.urls import StoreURL
from coordkit.strategies.elections import ElectionKind

# -- running -----------------------------------------------------------------------------------


def _wait(cluster: Cluster, timeout: float) -> ClusterView:
    """Wait until the controller is idle (or no broker is left to be one).

    :raises UnreadableControllerNodeError: no controller can be elected until someone clears a
        controller node: said at once, how to clear it included, rather than after the timeout.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = cluster.settled()
        if status.blocked_by is not None:
            raise status.blocked_by
        if status or not cluster.live_brokers():
            # A change may still be on its way to the controller: look twice.
            time.sleep(0.05)
            if cluster.settled() or not cluster.live_brokers():
                return cluster.view()
        time.sleep(0.02)
    raise click.ClickException(f"the cluster did not settle within {timeout}s")


#: After the controller is idle, how long leaders' ISR changes may take to reach the store.
CONVERGENCE_GRACE = 3.0


def _converged(cluster: Cluster) -> Convergence:
    """The invariant check, given the replica fetchers a moment to heal ISRs."""
    deadline = time.monotonic() + CONVERGENCE_GRACE
    while True:
        result = cluster.converged()
        if (result and not result.under_replicated) or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def run_step(cluster: Cluster, step: Step) -> None:
    a = step.args
    match step.action:
        case "kill":
            cluster.kill(int(a[0]))
        case "stop":
            cluster.stop(int(a[0]))
        case "restart":
            cluster.restart(int(a[0]))
        case "shutdown":
            cluster.broker(int(a[0])).controlled_shutdown()
        case "create":
            cluster.create_topic(a[0], int(a[1]), int(a[2]))
        case "delete":
            cluster.delete_topic(a[0])
        case "grow":
            cluster.add_partitions(a[0], int(a[1]))
        case "produce":
            cluster.produce(int(a[0]))
        case "replicate":
            cluster.replicate()
        case "rebalance":
            holder = cluster.controller_broker()
            if holder is not None and holder.controller is not None:
                holder.controller.check_leader_imbalance().result(timeout=60)
        case "sleep":
            time.sleep(float(a[0]))


@click.command("demo")
@click.option(
    "--store",
    "store_url",
    envvar=DEFAULT_STORE_ENV,
    default=DEFAULT_STORE,
    show_default=True,
    help=f"Store URL (or ${DEFAULT_STORE_ENV}); a bare memory:// becomes {DEFAULT_STORE}.",
)
@click.option("--brokers", type=Integer(1, MAX_BROKERS), default=3, show_default=True)
@click.option(
    "--rack", "racks", multiple=True, metavar="ID=RACK", help="broker.rack of a broker (repeat)."
)
@click.option(
    "--topic",
    "--topics",
    "topics",
    multiple=True,
    metavar="NAME:PARTITIONS:RF",
    help="Topic to create at start (repeat).",
)
@click.option(
    "--controller-election",
    default="kafka",
    show_default=True,
    help="Controller election strategy (kafka, latch, or a plugin's).",
)
@click.option("--unclean", is_flag=True, help="Allow unclean leader election cluster-wide.")
@click.option(
    "--step",
    "steps",
    multiple=True,
    metavar="ACTION",
    help="A step, in order (repeat): " + "; ".join(f"{k} {v}" for k, v in STEP_HELP.items()),
)
@click.option(
    "--kill",
    "kills",
    multiple=True,
    type=Integer(0, MAX_BROKERS - 1),
    help="Crash broker N (after --step).",
)
@click.option(
    "--restart",
    "restarts",
    multiple=True,
    type=Integer(0, MAX_BROKERS - 1),
    help="Restart broker N (after --kill).",
)
@click.option("--show-tree", is_flag=True, help="Print the store's tree before stopping.")
@click.option(
    "--watch",
    type=Seconds(0),
    default=0,
    help="Keep a live view for this many seconds at the end.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option("--timeout", type=Seconds(1), default=60, show_default=True)
@click.option("--seed", type=Integer(0, MAX_INT64), default=None, help="Seed replica placement.")
def demo_command(
    store_url: str,
    brokers: int,
    racks: tuple[str, ...],
    topics: tuple[str, ...],
    controller_election: str,
    unclean: bool,
    steps: tuple[str, ...],
    kills: tuple[int, ...],
    restarts: tuple[int, ...],
    show_tree: bool,
    watch: float,
    fmt: str,
    timeout: float,
    seed: int | None,
) -> None:
    """Start brokers, create topics, run steps, and show the control plane after each."""
    specs = [parse_topic(t) for t in topics]
    if len({s.name for s in specs}) != len(specs):
        raise click.BadParameter("a topic is given twice", param_hint="--topic")
    plan = [parse_step(s) for s in steps]
    plan += [Step("kill", (str(b),), "--kill") for b in kills]
    plan += [Step("restart", (str(b),), "--restart") for b in restarts]
    check_plan(plan, brokers)
    check_replication(specs, brokers)
    rack_of = {broker: rack for broker, rack in map(_parse_rack, racks)}
    try:
        get_plugin_manager().election(ElectionKind.CONTROLLER.value, controller_election)
    except CoordkitError as exc:
        raise click.BadParameter(str(exc), param_hint="--controller-election") from None
    config = EngineConfig(
        controller_election=controller_election,
        offline_election="offline-unclean" if unclean else "offline",
    )
    url = shared_store(store_url)
    console = output_console()
    snapshots: list[dict[str, Any]] = []

    def show(cluster: Cluster, label: str, since: OpCounts) -> OpCounts:
        view = _wait(cluster, timeout)
        checked = _converged(cluster)
        counts = cluster.op_counts()
        if fmt == "json":
            snapshot = as_json(view, label, counts - since)
            snapshot["violations"] = [{"path": v.path, "message": v.message} for v in checked]
            snapshot["under_replicated"] = [f"{t}-{p}" for t, p in checked.under_replicated]
            snapshots.append(snapshot)
        else:
            console.print(render(view, label, counts - since))
            console.print(render_convergence(checked))
        return counts

    cluster = Cluster(url, brokers, racks=rack_of, config=config, seed=seed)
    try:
        cluster.start()
        counts = show(
            cluster, f"started {brokers} brokers on {StoreURL.parse(url).redacted()}", OpCounts()
        )
        for spec in specs:
            config_map = {UNCLEAN_LEADER_ELECTION_ENABLE: "true"} if unclean else None
            cluster.create_topic(
                spec.name, spec.partitions, spec.replication_factor, config=config_map
            )
        if specs:
            _await_topics(cluster, [s.name for s in specs], timeout)
            counts = show(cluster, "created " + ", ".join(topics), counts)
        for step in plan:
            run_step(cluster, step)
            counts = show(cluster, f"after {step}", counts)
        if watch and fmt == "table":
            with Live(
                render(cluster.view(), "live"), console=console, refresh_per_second=4
            ) as live:
                for _ in _ticks(watch):
                    live.update(render(cluster.view(), "live", cluster.op_counts()))
        tree = walk(cluster.admin_store, "/") if show_tree else []
        if fmt == "json":
            document: dict[str, Any] = {"steps": snapshots}
            if show_tree:
                document["tree"] = {
                    v.path: {"value": v.text, "ephemeral": v.stat.ephemeral} for v in tree
                }
            click.echo(json.dumps(document, indent=2))
        elif show_tree:
            _print_tree(tree, "/", url)
        problems = cluster.history.violations() if cluster.history is not None else []
        if problems:
            raise click.ClickException("history check failed: " + "; ".join(problems))
    finally:
        cluster.close()


def _parse_rack(text: str) -> tuple[int, str]:
    """``ID=RACK`` of ``--rack``."""
    broker, sep, rack = text.partition("=")
    try:
        if not sep or not rack:
            raise ValueError("expected ID=RACK")
        return parse_integer(broker, 0, MAX_BROKERS - 1), rack
    except ValueError as exc:
        raise click.BadParameter(f"{text!r}: {exc}", param_hint="--rack") from None


def _await_topics(cluster: Cluster, names: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = cluster.view()
        present = {p.topic for p in view.partitions} | {t for t, _ in view.uninitialised}
        if set(names) <= present and not view.uninitialised:
            return
        if set(names) <= present and not cluster.live_brokers():
            return
        time.sleep(0.02)


def _ticks(seconds: float) -> Iterator[None]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.25)
        yield None
