"""``coordkit cluster``: run N brokers in this process on a store and watch the control plane.

``coordkit cluster demo --store URL --brokers 3 --topic orders:6:2 --kill 1 --restart 1`` starts
the brokers, creates the topics, runs the steps in order (each waits for the controller to finish
its work) and prints the controller, its epoch and every partition's leader after each; ``--watch``
keeps a live view at the end and ``--show-tree`` prints the store in Kafka's layout before the
brokers stop (for ``memory://`` stores, which live only as long as this process).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import attrs
import click
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from coordkit.cli.tree import DEFAULT_STORE_ENV, _print_tree, walk
from coordkit.engine import Cluster, ClusterView, EngineConfig, OpCounts
from coordkit.engine.config import UNCLEAN_LEADER_ELECTION_ENABLE
from coordkit.engine.invariants import Convergence, check_cluster
from coordkit.errors import CoordkitError
from coordkit.model import NO_LEADER
from coordkit.plugins import open_store
from coordkit.terminal import visible
from coordkit.urls import StoreURL

DEFAULT_STORE = "memory://coordkit-cluster"


@attrs.frozen
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int


@attrs.frozen
class Step:
    action: str
    args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return ":".join((self.action, *self.args))


STEP_HELP = {
    "kill:N": "crash broker N (its session ends, no controlled shutdown)",
    "stop:N": "stop broker N after a controlled shutdown",
    "restart:N": "start broker N again on a new session",
    "shutdown:N": "controlled shutdown of broker N (it stays registered)",
    "create:T:P:R": "create topic T with P partitions and replication factor R",
    "delete:T": "delete topic T",
    "grow:T:P": "increase topic T to P partitions",
    "produce:N": "append N records to every partition (acks=all)",
    "replicate": "one replication round (leaders add caught-up followers to the ISR)",
    "rebalance": "run the preferred-leader rebalance check now",
    "sleep:S": "wait S seconds",
}
_ARITY = {
    "kill": 1,
    "stop": 1,
    "restart": 1,
    "shutdown": 1,
    "create": 3,
    "delete": 1,
    "grow": 2,
    "produce": 1,
    "replicate": 0,
    "rebalance": 0,
    "sleep": 1,
}


def parse_topic(text: str) -> TopicSpec:
    parts = text.split(":")
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        raise click.BadParameter(f"{text!r}: expected NAME:PARTITIONS:REPLICATION_FACTOR")
    return TopicSpec(parts[0], int(parts[1]), int(parts[2]))


def parse_step(text: str) -> Step:
    action, *args = text.split(":")
    if action not in _ARITY:
        raise click.BadParameter(
            f"unknown step {text!r}; steps: " + ", ".join(STEP_HELP), param_hint="--step"
        )
    if len(args) != _ARITY[action]:
        usage = next(k for k in STEP_HELP if k.split(":")[0] == action)
        raise click.BadParameter(f"step {text!r}: expected {usage}", param_hint="--step")
    numeric = {"kill", "stop", "restart", "shutdown", "produce"}
    if action in numeric and not args[0].isdigit():
        raise click.BadParameter(f"step {text!r}: {args[0]!r} is not a number", param_hint="--step")
    return Step(action, tuple(args))


def _shared_store(url: str) -> str:
    parsed = StoreURL.parse(url)
    if parsed.scheme == "memory" and not (parsed.host_string or parsed.path.strip("/")):
        return DEFAULT_STORE
    return url


# -- rendering ---------------------------------------------------------------------------------


def render(view: ClusterView, title: str, counts: OpCounts | None = None) -> Group:
    live = set(view.brokers)
    head = Table(title=title, show_header=True, title_justify="left")
    head.add_column("controller")
    head.add_column("epoch", justify="right")
    head.add_column("brokers")
    head.add_column("leaders per broker")
    head.add_column("offline", justify="right")
    if counts is not None:
        head.add_column("store ops (trips/reads/writes)")
    skew = ", ".join(f"{b}:{n}" for b, n in sorted(view.leaders_per_broker().items()))
    row = [
        "-" if view.controller is None else str(view.controller),
        str(view.epoch),
        ",".join(str(b) for b in view.brokers) or "-",
        skew or "-",
        str(len(view.offline())),
    ]
    if counts is not None:
        row.append(f"{counts.round_trips}/{counts.reads}/{counts.writes}")
    head.add_row(*row)
    parts = Table(show_header=True)
    for column in ("partition", "replicas", "leader", "leader epoch", "isr", "ctrl epoch"):
        parts.add_column(column, justify="right" if "epoch" in column else "left")
    for p in view.partitions:
        leader = "[red]none[/]" if p.leader == NO_LEADER else str(p.leader)
        if p.leader != NO_LEADER and p.leader not in live:
            leader = f"[red]{p.leader} (down)[/]"
        elif p.leader != NO_LEADER and p.leader != p.replicas[0]:
            leader = f"[yellow]{p.leader}[/]"
        parts.add_row(
            f"{p.topic}-{p.partition}",
            ",".join(map(str, p.replicas)),
            leader,
            str(p.leader_epoch),
            ",".join(map(str, p.isr)),
            str(p.controller_epoch),
        )
    for topic, partition in view.uninitialised:
        parts.add_row(f"{topic}-{partition}", "", "[red]no state[/]", "", "", "")
    if not view.partitions and not view.uninitialised:
        return Group(head)
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


# -- running -----------------------------------------------------------------------------------


def _wait(cluster: Cluster, timeout: float) -> ClusterView:
    """Wait until the controller is idle (or no broker is left to be one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cluster.settled() or not cluster.live_brokers():
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


def render_convergence(result: Convergence) -> str:
    if result:
        under = len(result.under_replicated)
        return "[green]invariants hold[/]" + (
            f" ({under} partition(s) under-replicated)" if under else ""
        )
    lines = [f"[red]{len(result.violations)} invariant violation(s):[/]"]
    lines.extend(f"  {escape(visible(str(v)))}" for v in result.violations)
    return "\n".join(lines)


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


@click.group("cluster")
def cluster_group() -> None:
    """Run brokers in this process on a store and watch controller, epochs and leaders."""


@cluster_group.command("check")
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
    hold, 1 when something is violated (each violation is listed with its path).
    """
    with open_store(store_url) as store:
        result = check_cluster(store, unclean_default=unclean)
    if fmt == "json":
        click.echo(
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
    if not result.ok:
        raise SystemExit(1)


@cluster_group.command("demo")
@click.option(
    "--store",
    "store_url",
    envvar=DEFAULT_STORE_ENV,
    default=DEFAULT_STORE,
    show_default=True,
    help=f"Store URL (or ${DEFAULT_STORE_ENV}); a bare memory:// becomes {DEFAULT_STORE}.",
)
@click.option("--brokers", type=click.IntRange(min=1), default=3, show_default=True)
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
@click.option("--kill", "kills", multiple=True, type=int, help="Crash broker N (after --step).")
@click.option(
    "--restart", "restarts", multiple=True, type=int, help="Restart broker N (after --kill)."
)
@click.option("--show-tree", is_flag=True, help="Print the store's tree before stopping.")
@click.option(
    "--watch",
    type=click.FloatRange(min=0),
    default=0,
    help="Keep a live view for this many seconds at the end.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option("--timeout", type=click.FloatRange(min=1), default=60, show_default=True)
@click.option("--seed", type=int, default=None, help="Seed replica placement.")
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
    plan = [parse_step(s) for s in steps]
    plan += [Step("kill", (str(b),)) for b in kills]
    plan += [Step("restart", (str(b),)) for b in restarts]
    rack_of: dict[int, str] = {}
    for item in racks:
        broker, sep, rack = item.partition("=")
        if not sep or not broker.isdigit() or not rack:
            raise click.BadParameter(f"{item!r}: expected ID=RACK", param_hint="--rack")
        rack_of[int(broker)] = rack
    config = EngineConfig(
        controller_election=controller_election,
        offline_election="offline-unclean" if unclean else "offline",
    )
    url = _shared_store(store_url)
    console = Console(width=int(os.environ.get("COLUMNS", "0")) or None)
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
    except CoordkitError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        cluster.close()


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
