"""``coordkit reassign``: ``kafka-reassign-partitions.sh --zookeeper``; ``coordkit
elect-preferred``: ``kafka-preferred-replica-election.sh --zookeeper``. Any store, no broker
started: they read and write the admin nodes a running cluster's controller acts on.

* ``--generate``: the placement strategy's ``rebalance()`` over the listed brokers (their racks
  from ``/brokers/ids``) proposes new replica lists for the listed topics; prints the current
  assignment and the proposal as Kafka's plan JSON (only the partitions the strategy moves).
* ``--execute``: prints the current assignment (the rollback plan), then writes the plan to
  ``/admin/reassign_partitions`` through :meth:`TopicAdmin.reassign_partitions`.
* ``--verify``: per partition of the plan, completed / still in progress / failed; exit status 0
  only when every partition completed, 1 otherwise.

The printed lines are Kafka's own (1.x, ZooKeeper mode), partitions written ``t-0``. Input is
checked in full on a read-only session before anything is written; a refusal names the option,
the file and the entry.
"""

from __future__ import annotations

from collections.abc import Iterable

import click

from coordkit.cli.admin.cluster_state import (
    assignments,
    marked_for_deletion,
    pending_election,
    registrations,
    topic_names,
)
from coordkit.cli.admin.kafka_formats import (
    TP,
    parse_broker_list,
    parse_election,
    parse_reassignment,
    parse_topics_to_move,
    partition_name,
    read_json_file,
    reassignment_json,
)
from coordkit.cli.admin.options import placement_option, placement_strategy, store_option
from coordkit.cli.errors import CommandError
from coordkit.engine.errors import EngineError
from coordkit.engine.topics import TopicAdmin
from coordkit.errors import LayoutError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicAssignment
from coordkit.plugins import open_store
from coordkit.store import MetadataStore
from coordkit.strategies.placement import BrokerMetadata, ClusterLayout
from coordkit.support.terminal import visible, visible_json

TOPICS_FILE = "--topics-to-move-json-file"
PLAN_FILE = "--reassignment-json-file"
ELECTION_FILE = "--path-to-json-file"


def _current(found: dict[str, TopicAssignment]) -> dict[TP, tuple[int, ...]]:
    """Every partition's replicas (a reassignment in progress counted as done: its targets)."""
    return {
        (topic, p): a.target_replicas(p) for topic, a in found.items() for p in sorted(a.partitions)
    }


def _echo_json(text: str) -> None:
    click.echo(visible_json(text))


def _listing(ids: Iterable[int]) -> str:
    return ", ".join(map(str, ids)) or "none"


@click.command("reassign")
@store_option
@click.option("--generate", is_flag=True, help="Propose a plan moving the listed topics' replicas.")
@click.option("--execute", is_flag=True, help="Start the reassignment a plan file describes.")
@click.option("--verify", is_flag=True, help="Report how far a plan file's reassignment got.")
@click.option(
    TOPICS_FILE,
    "topics_file",
    metavar="FILE",
    help='--generate: the topics to move, {"topics":[{"topic":"foo"}],"version":1}.',
)
@click.option(
    "--broker-list",
    metavar="4,5,6",
    help="--generate: the brokers the topics' replicas may go to (registered ones).",
)
@placement_option
@click.option(
    "--disable-rack-aware",
    is_flag=True,
    help="--generate: Kafka's placement without racks (the same as --placement kafka).",
)
@click.option(
    PLAN_FILE,
    "plan_file",
    metavar="FILE",
    help='--execute, --verify: the plan, {"version":1,"partitions":[{"topic":"t",'
    '"partition":0,"replicas":[4,5,6]}]} (log_dirs optional, "any" only).',
)
@click.pass_context
def reassign_command(
    ctx: click.Context,
    store_url: str,
    generate: bool,
    execute: bool,
    verify: bool,
    topics_file: str | None,
    broker_list: str | None,
    placement: str,
    disable_rack_aware: bool,
    plan_file: str | None,
) -> None:
    """Move partition replicas between brokers, as kafka-reassign-partitions.sh: --generate a
    plan, --execute it, --verify it; the cluster's controller does the moving."""
    actions = [
        name
        for name, given in (("--generate", generate), ("--execute", execute), ("--verify", verify))
        if given
    ]
    if len(actions) != 1:
        raise CommandError(
            "give exactly one of --generate, --execute, --verify"
            + (f" (got {' and '.join(actions)})" if actions else "")
        )
    placement_given = (
        ctx.get_parameter_source("placement") is not click.core.ParameterSource.DEFAULT
    )
    if generate:
        if plan_file is not None:
            raise CommandError(f"{PLAN_FILE}: not used by --generate (it prints the plan)")
        if topics_file is None or broker_list is None:
            missing = TOPICS_FILE if topics_file is None else "--broker-list"
            raise CommandError(f"--generate needs {missing}")
        if disable_rack_aware:
            if placement_given and placement != "kafka":
                raise CommandError(
                    f"--disable-rack-aware: chooses --placement kafka, not {placement!r}"
                )
            placement = "kafka"
        _generate(store_url, topics_file, broker_list, placement)
        return
    unused = [
        name
        for name, given in (
            (TOPICS_FILE, topics_file is not None),
            ("--broker-list", broker_list is not None),
            ("--placement", placement_given),
            ("--disable-rack-aware", disable_rack_aware),
        )
        if given
    ]
    if unused:
        raise CommandError(f"{unused[0]}: only used by --generate, not {actions[0]}")
    if plan_file is None:
        raise CommandError(f"{actions[0]} needs {PLAN_FILE}")
    plan = parse_reassignment(read_json_file(plan_file, PLAN_FILE), f"{PLAN_FILE} {plan_file}")
    if execute:
        _execute(store_url, plan_file, plan)
    else:
        _verify(store_url, plan)


def _generate(store_url: str, topics_file: str, broker_list: str, placement: str) -> None:
    where = f"{TOPICS_FILE} {topics_file}"
    topics = parse_topics_to_move(read_json_file(topics_file, TOPICS_FILE), where)
    brokers = parse_broker_list(broker_list)
    strategy = placement_strategy(placement)
    with open_store(store_url, read_only=True) as store:
        registered = registrations(store)
        existing = set(topic_names(store))
        for index, topic in enumerate(topics):
            if topic not in existing:
                raise CommandError(f"{where}: topics[{index}]: topic {topic!r} does not exist")
        found = assignments(store, topics)
    unknown = [b for b in brokers if b not in registered]
    if unknown:
        raise CommandError(
            f"--broker-list {broker_list!r}: broker {unknown[0]} is not registered under "
            f"{layout.BROKER_IDS} (registered: {_listing(sorted(registered))})"
        )
    for topic, assignment in found.items():
        factor = len(assignment.target_replicas(0))
        if factor > len(brokers):
            raise CommandError(
                f"--broker-list {broker_list!r}: topic {topic!r} has replication factor {factor}, "
                f"more than the {len(brokers)} broker(s) listed"
            )
    current = _current(found)
    cluster = ClusterLayout(
        brokers=tuple(BrokerMetadata(b, registered[b].info.rack) for b in sorted(brokers)),
        assignment={
            topic: {p: current[(topic, p)] for p in sorted(a.partitions)}
            for topic, a in found.items()
        },
    )
    try:
        proposal = strategy.rebalance(cluster)
    except EngineError as exc:
        raise CommandError(f"--placement {placement}: {exc}") from None
    click.echo("Current partition replica assignment")
    _echo_json(reassignment_json(current))
    click.echo()
    click.echo("Proposed partition reassignment configuration")
    _echo_json(reassignment_json(proposal))
    if not proposal:
        click.echo(
            f"(placement {placement!r} moves no replica of these topics onto brokers "
            f"{_listing(brokers)})",
            err=True,
        )


def _check_plan(
    store: MetadataStore, plan_file: str, plan: dict[TP, tuple[int, ...]]
) -> dict[str, TopicAssignment]:
    """Refuse a plan the controller would drop (Kafka's ``parseAndValidate``, and more): unknown
    topics or partitions, topics being deleted, unregistered brokers, a reassignment running."""
    if store.exists(layout.REASSIGN_PARTITIONS) is not None:
        raise CommandError(
            f"{layout.REASSIGN_PARTITIONS} exists: a reassignment is already running; wait for it "
            f"to complete (coordkit reassign --verify {PLAN_FILE} FILE)"
        )
    registered = sorted(registrations(store))
    existing = set(topic_names(store))
    topics = sorted({t for t, _ in plan})
    found = assignments(store, [t for t in topics if t in existing])
    deleting = marked_for_deletion(store)
    for index, ((topic, partition), replicas) in enumerate(plan.items()):
        at = f"{PLAN_FILE} {plan_file}: partitions[{index}] ({partition_name((topic, partition))})"
        if topic not in found:
            raise CommandError(f"{at}: topic {topic!r} does not exist")
        if topic in deleting:
            raise CommandError(f"{at}: topic {topic!r} is marked for deletion")
        count = found[topic].partition_count
        if partition >= count:
            raise CommandError(f"{at}: topic {topic!r} has partitions 0..{count - 1}")
        unknown = [r for r in replicas if r not in registered]
        if unknown:
            raise CommandError(
                f"{at}: broker {unknown[0]} is not registered under {layout.BROKER_IDS} "
                f"(registered: {_listing(registered)})"
            )
    return found


def _execute(store_url: str, plan_file: str, plan: dict[TP, tuple[int, ...]]) -> None:
    with open_store(store_url, read_only=True) as store:
        found = _check_plan(store, plan_file, plan)
    # Before writing, as Kafka does: what to give --execute to undo this.
    click.echo("Current partition replica assignment\n")
    _echo_json(reassignment_json(_current(found)))
    click.echo("\nSave this to use as the --reassignment-json-file option during rollback")
    with open_store(store_url) as store:
        TopicAdmin(store).reassign_partitions(plan)
    click.echo("Successfully started reassignment of partitions.")


def _verify(store_url: str, plan: dict[TP, tuple[int, ...]]) -> None:
    with open_store(store_url, read_only=True) as store:
        status = TopicAdmin(store).reassignment_status(plan)
        existing = set(topic_names(store))
        found = assignments(store, sorted({t for t, _ in plan if t in existing}))
    click.echo("Status of partition reassignment:")
    for tp in sorted(plan):
        name = visible(partition_name(tp))
        if status[tp] == "completed":
            click.echo(f"Reassignment of partition {name} completed successfully")
        elif status[tp] == "in progress":
            click.echo(f"Reassignment of partition {name} is still in progress")
        else:
            assignment = found.get(tp[0])
            now = assignment.partitions.get(tp[1], ()) if assignment is not None else ()
            click.echo(
                f"ERROR: Assigned replicas ({','.join(map(str, now))}) don't match the list of "
                f"replicas for reassignment ({','.join(map(str, plan[tp]))}) for partition {name}"
            )
            click.echo(f"Reassignment of partition {name} failed")
    if any(s != "completed" for s in status.values()):
        raise SystemExit(1)


@click.command("elect-preferred")
@store_option
@click.option(
    ELECTION_FILE,
    "json_file",
    metavar="FILE",
    help='The partitions, {"partitions":[{"topic":"t","partition":0}]}; default: every partition.',
)
def elect_preferred_command(store_url: str, json_file: str | None) -> None:
    """Move leadership back to each partition's preferred (first) replica, as
    kafka-preferred-replica-election.sh: writes /admin/preferred_replica_election; the
    controller elects the first replica where it is alive and in the ISR."""
    requested = None
    if json_file is not None:
        requested = parse_election(
            read_json_file(json_file, ELECTION_FILE), f"{ELECTION_FILE} {json_file}"
        )
    with open_store(store_url, read_only=True) as store:
        try:
            running = pending_election(store)
        except LayoutError:
            running = []  # unreadable, but there: still an election the controller owns
        if running is not None:
            listing = ",".join(partition_name(tp) for tp in running)
            raise CommandError(
                f"{layout.PREFERRED_REPLICA_ELECTION} exists: a preferred replica election is "
                f"already running{' for ' + listing if listing else ''}; wait for the controller "
                "to finish it"
            )
        existing = topic_names(store)
        if requested is None:
            found = assignments(store, existing)
            partitions = [(t, p) for t, a in found.items() for p in sorted(a.partitions)]
        else:
            wanted = set(existing)
            found = assignments(store, sorted({t for t, _ in requested if t in wanted}))
            for index, (topic, partition) in enumerate(requested):
                at = f"{ELECTION_FILE} {json_file}: partitions[{index}] ({topic}-{partition})"
                if topic not in found:
                    raise CommandError(f"{at}: topic {topic!r} does not exist")
                count = found[topic].partition_count
                if partition >= count:
                    raise CommandError(f"{at}: topic {topic!r} has partitions 0..{count - 1}")
            partitions = requested
    if not partitions:
        click.echo("No partitions to elect leaders for: the store holds no topics.")
        return
    with open_store(store_url) as store:
        TopicAdmin(store).elect_preferred_leaders(partitions)
    names = visible(",".join(partition_name(tp) for tp in partitions))
    click.echo(f"Created preferred replica election path with {names}")
    click.echo(f"Successfully started preferred replica election for partitions {names}")
