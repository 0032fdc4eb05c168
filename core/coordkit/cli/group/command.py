"""``coordkit group``: start consumers of a group on brokers in this process, change the group
from the command line, and watch members, generations, assignment, lag and rebalances.

``coordkit group run --store URL --consumers 3 --step join --step crash:0 --step kill-coordinator``
starts the brokers (the cluster engine, as ``coordkit cluster``), creates the topics, starts the
consumers, then runs the steps in order; after each it waits for the group to be stable again and
prints the group state, generation, protocol, leader, coordinator, every member's partitions and
lag, and the rebalances the step caused. ``--legacy`` runs the legacy ZooKeeper consumer instead.
``coordkit group describe`` prints what the store holds for a group without starting anything.

The defaults are a demo that finishes in seconds on ``memory://``: short session timeouts (2 s,
Kafka's default is 45 s) and a 0.1 s initial rebalance delay (Kafka: 3 s).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import click
from rich.live import Live

from coordkit.cli.cluster.spec import (
    MAX_BROKERS,
    MAX_RECORDS,
    TopicSpec,
    check_replication,
    parse_topic,
)
from coordkit.cli.errors import CommandError
from coordkit.cli.group.classic import ClassicGroupRun
from coordkit.cli.group.legacy import LegacyGroupRun
from coordkit.cli.group.runs import GroupRun, GroupSettings
from coordkit.cli.group.steps import (
    MAX_CONSUMERS,
    STEP_HELP,
    append,
    check_plan,
    parse_step,
    run_step,
)
from coordkit.cli.group.stored import read_stored_group, render_stored, stored_json
from coordkit.cli.group.view import GroupSnapshot, render_snapshot, snapshot_json
from coordkit.cli.numbers import MAX_INT64, Integer, Seconds
from coordkit.cli.tables import output_console
from coordkit.cli.tree import DEFAULT_STORE_ENV
from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.errors import TopicExistsError
from coordkit.engine.groups import ConsumerConfig, group_path
from coordkit.errors import CoordkitError
from coordkit.plugins import get_plugin_manager, open_store
from coordkit.store.urls import StoreURL
from coordkit.strategies.offsets import validate_group_id
from coordkit.support.terminal import visible_json

DEFAULT_STORE = "memory://coordkit-group"
DEFAULT_TOPIC = "t0:12:2"
DEFAULT_STEPS = ("join", "crash:0")
#: Kafka waits 3 s for more members before a new group's first rebalance; the demo does not.
INITIAL_REBALANCE_DELAY = 0.1
#: offsets.topic.num.partitions accepted (Kafka's default is 50).
MAX_OFFSETS_PARTITIONS = 1_000


def shared_store(url: str) -> str:
    parsed = StoreURL.parse(url)
    if parsed.scheme == "memory" and not (parsed.host_string or parsed.path.strip("/")):
        return DEFAULT_STORE
    return url


def _check_assignors(assignors: tuple[str, ...], legacy: bool) -> None:
    if legacy and len(assignors) > 1:
        raise click.BadParameter(
            f"the legacy consumer takes one assignor, got {', '.join(assignors)}",
            param_hint="--assignor",
        )
    manager = get_plugin_manager()
    for name in assignors:
        try:
            manager.assignor(name)
        except CoordkitError as exc:
            raise click.BadParameter(str(exc), param_hint="--assignor") from None


def _check_offset_storage(name: str) -> None:
    try:
        get_plugin_manager().offset_store(name)
    except CoordkitError as exc:
        raise click.BadParameter(str(exc), param_hint="--offset-storage") from None


def _check_group_id(group_id: str) -> None:
    """A group id every store and offset storage can use as a node name, or ``--group``'s error."""
    try:
        group_path(group_id)
        validate_group_id(group_id)
    except (ValueError, CoordkitError) as exc:
        raise click.BadParameter(str(exc), param_hint="--group") from None


def _check_timing(settings: GroupSettings) -> None:
    try:
        ConsumerConfig(
            group_id=settings.group_id,
            topics=settings.topics,
            assignors=settings.assignors,
            session_timeout=settings.session_timeout,
            heartbeat_interval=settings.heartbeat_interval,
            rebalance_timeout=settings.rebalance_timeout,
        )
    except ValueError as exc:
        raise click.BadParameter(
            str(exc), param_hint=["--heartbeat-interval", "--session-timeout"]
        ) from None


# -- running -----------------------------------------------------------------------------------


def await_stable(run: GroupRun, label: str, since: float, timeout: float) -> GroupSnapshot:
    """Wait until the group is stable; on timeout, the error names what did not happen."""
    deadline = time.monotonic() + timeout
    while True:
        failures = run.failures()
        if failures:
            raise click.ClickException(f"{label}: " + "; ".join(failures))
        observed = run.observe(label, since)
        if observed.stable:
            return observed.snapshot
        if time.monotonic() > deadline:
            raise click.ClickException(
                f"{label}: group {run.settings.group_id!r} was not stable within {timeout}s: "
                f"still waiting for {observed.waiting_for}"
            )
        time.sleep(0.02)


def _create_topic(cluster: Cluster, spec: TopicSpec) -> None:
    """Create ``spec``'s topic; one left by an earlier run on the store is reused if it has the
    same partition count."""
    try:
        cluster.create_topic(spec.name, spec.partitions, spec.replication_factor)
    except TopicExistsError:
        view = cluster.view()
        existing = {p.tp for p in view.partitions} | set(view.uninitialised)
        count = sum(1 for topic, _ in existing if topic == spec.name)
        if count != spec.partitions:
            raise click.BadParameter(
                f"topic {spec.name!r} already exists on the store with {count} "
                f"partitions, not {spec.partitions}",
                param_hint="--topic",
            ) from None


def _await_cluster(cluster: Cluster, topics: list[TopicSpec], timeout: float) -> None:
    """Wait until the controller is idle, the topics exist and every invariant holds (a second
    run on the same store starts from whatever the first left: it must converge first)."""
    deadline = time.monotonic() + timeout
    names = {t.name for t in topics}
    checked = None
    while time.monotonic() < deadline:
        if cluster.settled():
            view = cluster.view()
            present = {p.topic for p in view.partitions}
            checked = cluster.converged()
            if names <= present and checked:
                return
        time.sleep(0.02)
    problems = f": {'; '.join(str(v) for v in checked.violations[:5])}" if checked else ""
    raise click.ClickException(
        f"the cluster did not elect a controller, create {', '.join(sorted(names))} and "
        f"converge within {timeout}s{problems}"
    )


def _ticks(seconds: float) -> Iterator[None]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.25)
        yield None


@click.group("group")
def group_group() -> None:
    """Run consumers of a group on brokers in this process, or read a group from a store."""


@group_group.command("run")
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
    "--topic",
    "topics",
    multiple=True,
    metavar="NAME:PARTITIONS:RF",
    help=f"Topic to create and subscribe to (repeat; default {DEFAULT_TOPIC}).",
)
@click.option("--group", "group_id", default="demo", show_default=True, help="The group id.")
@click.option("--consumers", type=Integer(1, MAX_CONSUMERS), default=3, show_default=True)
@click.option(
    "--assignor",
    "assignors",
    multiple=True,
    metavar="NAME",
    help="partition.assignment.strategy, most preferred first (repeat; default range). "
    "Cooperative when every one supports it (cooperative-sticky).",
)
@click.option(
    "--static", is_flag=True, help="Static members: group.instance.id <group>-i<I> per consumer."
)
@click.option(
    "--session-timeout",
    type=Seconds(0, above_minimum=True),
    default=2.0,
    show_default=True,
    help="session.timeout.ms in seconds (short for the demo; Kafka: 45).",
)
@click.option(
    "--heartbeat-interval",
    type=Seconds(0, above_minimum=True),
    default=0.2,
    show_default=True,
    help="heartbeat.interval.ms in seconds (below the session timeout).",
)
@click.option(
    "--rebalance-timeout",
    type=Seconds(0, above_minimum=True),
    default=5.0,
    show_default=True,
    help="max.poll.interval.ms in seconds: how long a rebalance waits for members to rejoin.",
)
@click.option(
    "--step",
    "steps",
    multiple=True,
    metavar="ACTION",
    help="A step, in order (repeat; default: "
    + ", ".join(DEFAULT_STEPS)
    + "): "
    + "; ".join(f"{k} {v}" for k, v in STEP_HELP.items()),
)
@click.option(
    "--watch",
    type=Seconds(0),
    default=0,
    help="Keep a live view for this many seconds at the end (0: skip).",
)
@click.option(
    "--produce",
    type=Integer(0, MAX_RECORDS),
    default=0,
    help="Records appended to every partition before the consumers start (their initial lag).",
)
@click.option(
    "--legacy",
    is_flag=True,
    help="Run the legacy ZooKeeper consumer (/consumers/G/ids, owner nodes) instead.",
)
@click.option(
    "--offset-storage",
    default="offsets-topic",
    show_default=True,
    help="Offset storage plugin the coordinators commit through (legacy: always zookeeper).",
)
@click.option(
    "--offsets-partitions",
    type=Integer(1, MAX_OFFSETS_PARTITIONS),
    default=10,
    show_default=True,
    help="offsets.topic.num.partitions (Kafka: 50).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--timeout",
    type=Seconds(1),
    default=30,
    show_default=True,
    help="Seconds each wait for a stable group may take.",
)
@click.option("--seed", type=Integer(0, MAX_INT64), default=None, help="Seed replica placement.")
def run_command(
    store_url: str,
    brokers: int,
    topics: tuple[str, ...],
    group_id: str,
    consumers: int,
    assignors: tuple[str, ...],
    static: bool,
    session_timeout: float,
    heartbeat_interval: float,
    rebalance_timeout: float,
    steps: tuple[str, ...],
    watch: float,
    produce: int,
    legacy: bool,
    offset_storage: str,
    offsets_partitions: int,
    fmt: str,
    timeout: float,
    seed: int | None,
) -> None:
    """Start brokers and consumers of a group, run steps, and show the group after each."""
    specs = [parse_topic(t) for t in topics or (DEFAULT_TOPIC,)]
    if len({s.name for s in specs}) != len(specs):
        raise click.BadParameter("a topic is given twice", param_hint="--topic")
    _check_group_id(group_id)
    plan = [parse_step(s) for s in steps or DEFAULT_STEPS]
    check_plan(plan, consumers, brokers, legacy=legacy)
    check_replication(specs, brokers)
    chosen = assignors or ("range",)
    _check_assignors(chosen, legacy)
    _check_offset_storage(offset_storage)
    settings = GroupSettings(
        group_id=group_id,
        partition_counts={s.name: s.partitions for s in specs},
        assignors=chosen,
        static=static,
        session_timeout=session_timeout,
        heartbeat_interval=heartbeat_interval,
        rebalance_timeout=rebalance_timeout,
    )
    _check_timing(settings)
    config = EngineConfig(
        group_initial_rebalance_delay=INITIAL_REBALANCE_DELAY,
        offsets_topic_num_partitions=offsets_partitions,
        offset_storage=offset_storage,
    )
    url = shared_store(store_url)
    console = output_console()
    snapshots: list[dict[str, Any]] = []
    universe = sorted(settings.partitions())

    def show(run: GroupRun, label: str, since: float) -> None:
        snapshot = await_stable(run, label, since, timeout)
        if fmt == "json":
            snapshots.append(snapshot_json(snapshot))
        else:
            console.print(render_snapshot(snapshot))

    cluster = Cluster(url, brokers, config=config, seed=seed)
    run: GroupRun | None = None
    try:
        cluster.start()
        for spec in specs:
            _create_topic(cluster, spec)
        _await_cluster(cluster, specs, timeout)
        if produce:
            append(cluster, produce, universe)
        run = (LegacyGroupRun if legacy else ClassicGroupRun)(cluster, settings)
        since = cluster.clock.monotonic()
        run.start_consumers(consumers)
        kind = "legacy consumers" if legacy else "consumers"
        show(
            run,
            f"started {consumers} {kind} of {group_id!r} on {StoreURL.parse(url).redacted()}",
            since,
        )
        for step in plan:
            since = cluster.clock.monotonic()
            run_step(run, cluster, step, universe)
            show(run, f"after {step}", since)
        if watch and fmt == "table":
            since = cluster.clock.monotonic()
            with Live(console=console, refresh_per_second=4) as live:
                for _ in _ticks(watch):
                    live.update(render_snapshot(run.observe("live", since).snapshot))
        if fmt == "json":
            click.echo(json.dumps({"steps": snapshots}, indent=2))
        problems = run.violations()
        if problems:
            raise click.ClickException("group invariant violated: " + "; ".join(problems))
    finally:
        if run is not None:
            run.close()
        cluster.close()


@group_group.command("describe")
@click.option(
    "--store",
    "store_url",
    envvar=DEFAULT_STORE_ENV,
    default=DEFAULT_STORE,
    show_default=True,
    help=f"Store URL (or ${DEFAULT_STORE_ENV}); a bare memory:// becomes {DEFAULT_STORE}.",
)
@click.option("--group", "group_id", required=True, help="The group id.")
@click.option(
    "--offset-storage",
    default="offsets-topic",
    show_default=True,
    help="Offset storage plugin the group's coordinators committed through.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def describe_command(store_url: str, group_id: str, offset_storage: str, fmt: str) -> None:
    """Print what the store holds for a group: its persisted metadata and committed offsets, and
    for a legacy group /consumers/G (ids, owners, offsets). Starts nothing."""
    _check_offset_storage(offset_storage)
    _check_group_id(group_id)
    url = shared_store(store_url)
    where = StoreURL.parse(url).redacted()
    try:
        with open_store(url, read_only=True) as store:
            stored = read_stored_group(store, group_id, offset_storage)
    except CoordkitError as exc:
        raise CommandError(str(exc)) from None
    if stored.empty:
        raise click.ClickException(f"group {group_id!r}: nothing stored on {where}")
    if fmt == "json":
        click.echo(visible_json(json.dumps(stored_json(stored), indent=2, ensure_ascii=False)))
    else:
        output_console().print(render_stored(stored, where))
