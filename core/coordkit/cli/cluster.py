"""``coordkit cluster``: run N brokers in this process on a store and watch the control plane.

``coordkit cluster demo --store URL --brokers 3 --topic orders:6:2 --kill 1 --restart 1`` starts
the brokers, creates the topics, runs the steps in order (each waits for the controller to finish
its work) and prints the controller, its epoch and every partition's leader after each; ``--watch``
keeps a live view at the end and ``--show-tree`` prints the store in Kafka's layout before the
brokers stop (for ``memory://`` stores, which live only as long as this process).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import click
from rich.console import Group
from rich.live import Live
from rich.text import Text

from coordkit.cli.numbers import (
    MAX_INT64,
    MAX_SECONDS,
    Integer,
    Seconds,
    parse_integer,
    parse_seconds,
)
from coordkit.cli.tables import Column, FittedTable, Kind, output_console
from coordkit.cli.tree import DEFAULT_STORE_ENV, _print_tree, walk
from coordkit.elections import ElectionKind
from coordkit.engine import Cluster, ClusterView, EngineConfig, OpCounts
from coordkit.engine.config import UNCLEAN_LEADER_ELECTION_ENABLE
from coordkit.engine.invariants import Convergence, check_cluster
from coordkit.errors import CoordkitError
from coordkit.model import NO_LEADER, validate_topic_name
from coordkit.plugins import get_plugin_manager, open_store
from coordkit.terminal import markup, visible, visible_json
from coordkit.urls import StoreURL

DEFAULT_STORE = "memory://coordkit-cluster"
#: Brokers one process runs (each has its own sessions and threads).
MAX_BROKERS = 64
#: Partitions of one topic created from the command line (every one is a few store nodes).
MAX_TOPIC_PARTITIONS = 10_000
#: Records one produce step or option appends to each partition.
MAX_RECORDS = 1_000_000_000


@attrs.frozen
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int


@attrs.frozen
class Step:
    """A step of the plan; ``option`` is where it was given (``--step``, ``--kill``, ...)."""

    action: str
    args: tuple[str, ...] = ()
    option: str = "--step"

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


TOPIC_FORMAT = "NAME:PARTITIONS:REPLICATION_FACTOR"


def parse_topic(text: str) -> TopicSpec:
    """``NAME:PARTITIONS:REPLICATION_FACTOR`` of ``--topic``; every refusal names ``--topic``,
    the value and what is wrong with it."""
    parts = text.split(":")
    if len(parts) != 3:
        raise click.BadParameter(f"{text!r}: expected {TOPIC_FORMAT}", param_hint="--topic")
    name, partitions, factor = parts
    try:
        return TopicSpec(
            validate_topic_name(name),
            _labelled("partitions", parse_integer, partitions, 1, MAX_TOPIC_PARTITIONS),
            _labelled("replication factor", parse_integer, factor, 1, MAX_BROKERS),
        )
    except ValueError as exc:
        raise click.BadParameter(
            f"{text!r}: {exc} (expected {TOPIC_FORMAT})", param_hint="--topic"
        ) from None


def _labelled(label: str, parse: Callable[[str, int, int], int], text: str, *bounds: int) -> int:
    """``parse(text, *bounds)``, its refusal starting with what the number is."""
    try:
        return parse(text, *bounds)
    except ValueError as exc:
        raise ValueError(f"{label}: {exc}") from None


def check_replication(specs: Sequence[TopicSpec], brokers: int) -> None:
    """Refuse a topic whose replication factor is above the number of brokers."""
    for spec in specs:
        if spec.replication_factor > brokers:
            raise click.BadParameter(
                f"topic {spec.name!r}: replication factor {spec.replication_factor} needs at "
                f"least as many brokers (--brokers is {brokers})",
                param_hint="--topic",
            )


def _step_error(text: str, problem: str) -> click.BadParameter:
    return click.BadParameter(f"step {text!r}: {problem}", param_hint="--step")


def parse_step(text: str) -> Step:
    action, *args = text.split(":")
    if action not in _ARITY:
        raise click.BadParameter(
            f"unknown step {text!r}; steps: " + ", ".join(STEP_HELP), param_hint="--step"
        )
    usage = next(k for k in STEP_HELP if k.split(":")[0] == action)
    if len(args) != _ARITY[action]:
        raise _step_error(text, f"expected {usage}")
    try:
        match action:
            case "kill" | "stop" | "restart" | "shutdown":
                _labelled("broker", parse_integer, args[0], 0, MAX_BROKERS - 1)
            case "produce":
                _labelled("records", parse_integer, args[0], 1, MAX_RECORDS)
            case "create":
                validate_topic_name(args[0])
                _labelled("partitions", parse_integer, args[1], 1, MAX_TOPIC_PARTITIONS)
                _labelled("replication factor", parse_integer, args[2], 1, MAX_BROKERS)
            case "delete":
                validate_topic_name(args[0])
            case "grow":
                validate_topic_name(args[0])
                _labelled("partitions", parse_integer, args[1], 1, MAX_TOPIC_PARTITIONS)
            case "sleep":
                parse_seconds(args[0], 0.0, MAX_SECONDS)
    except ValueError as exc:
        raise _step_error(text, f"{exc} (expected {usage})") from None
    return Step(action, tuple(args))


def check_plan(plan: Sequence[Step], brokers: int) -> None:
    """Refuse, before anything starts, a step naming a broker the cluster does not have at that
    point (``restart:N`` adds broker N), or creating a topic that needs more brokers; the error
    names the option the step came from."""
    known = set(range(brokers))
    for position, step in enumerate(plan, start=1):
        problem = None
        if step.action in ("kill", "stop", "shutdown") and int(step.args[0]) not in known:
            listing = ", ".join(map(str, sorted(known)))
            problem = f"there is no broker {step.args[0]} (step {position}); brokers: {listing}"
        if step.action == "restart":
            known.add(int(step.args[0]))
        if step.action == "create" and int(step.args[2]) > len(known):
            problem = (
                f"replication factor {step.args[2]} needs as many brokers; the cluster has "
                f"{len(known)} (step {position})"
            )
        if problem is not None:
            if step.option == "--step":
                raise _step_error(str(step), problem)
            raise click.BadParameter(
                f"{step.args[0]}: {problem} (--{step.action} runs after every --step)",
                param_hint=step.option,
            )


def _shared_store(url: str) -> str:
    parsed = StoreURL.parse(url)
    if parsed.scheme == "memory" and not (parsed.host_string or parsed.path.strip("/")):
        return DEFAULT_STORE
    return url


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
    lines.extend(f"  {markup(v)}" for v in result.violations)
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
    url = _shared_store(store_url)
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
