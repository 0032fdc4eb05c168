"""``coordkit topics``: ``kafka-topics.sh --zookeeper`` on any store, without starting brokers.

``create``, ``alter`` and ``delete`` write what Kafka's ``AdminZkClient`` writes (through
:class:`~coordkit.engine.topics.TopicAdmin`): ``/config/topics/T``, ``/brokers/topics/T``,
``/admin/delete_topics/T``; the controller of the cluster, when one runs, acts on them. Each first
checks its input against the store on a read-only session and opens a writing session only once
everything holds, so a refused command has written nothing (not even a ZooKeeper chroot or a Redis
session). ``describe`` and ``list`` only read, on a read-only session.

``describe`` prints Kafka's own lines::

    Topic: t	PartitionCount: 3	ReplicationFactor: 2	Configs: cleanup.policy=compact
        Topic: t	Partition: 0	Leader: 1	Replicas: 1,2	Isr: 1,2

"Live" brokers are those registered under ``/brokers/ids``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

import click

from coordkit.cli.admin.cluster_state import (
    PartitionInfo,
    TopicInfo,
    controller,
    marked_for_deletion,
    pending_reassignment,
    read_topics,
    registrations,
    topic_names,
)
from coordkit.cli.admin.kafka_formats import (
    parse_config_names,
    parse_configs,
    parse_replica_assignment,
)
from coordkit.cli.admin.options import (
    MAX_REPLICATION_FACTOR,
    WholeNumber,
    placement_option,
    placement_strategy,
    store_option,
)
from coordkit.cli.cluster.spec import MAX_TOPIC_PARTITIONS
from coordkit.cli.errors import CommandError
from coordkit.engine.errors import EngineError
from coordkit.engine.topics import TopicAdmin
from coordkit.kafka import layout
from coordkit.kafka.model import NO_LEADER, validate_topic_name
from coordkit.plugins import open_store
from coordkit.store import MetadataStore
from coordkit.strategies.placement import BrokerMetadata, ReplicaPlacement
from coordkit.support.terminal import visible, visible_json


@click.group("topics")
def topics_group() -> None:
    """Create, alter, delete, describe and list topics as kafka-topics.sh --zookeeper does."""


# -- checks against the store ------------------------------------------------------------------


def _topic_name(text: str) -> str:
    try:
        return validate_topic_name(text)
    except ValueError as exc:
        raise CommandError(f"--topic {text!r}: {exc}") from None


def _existing(store: MetadataStore, topic: str) -> TopicInfo:
    found = read_topics(store, [topic]) if topic in topic_names(store) else []
    if not found:
        raise CommandError(
            f"--topic {topic!r}: topic does not exist (no {layout.BROKER_TOPICS}/{topic})"
        )
    return found[0]


def _broker_metadata(store: MetadataStore) -> list[BrokerMetadata]:
    return [BrokerMetadata(b, r.info.rack) for b, r in sorted(registrations(store).items())]


def _listing(brokers: Sequence[BrokerMetadata]) -> str:
    return ", ".join(str(b.id) for b in brokers) or "none"


def _check_registered(
    option: str, text: str, lists: Mapping[int, Sequence[int]], brokers: Sequence[BrokerMetadata]
) -> None:
    registered = {b.id for b in brokers}
    for partition, replicas in sorted(lists.items()):
        unknown = [r for r in replicas if r not in registered]
        if unknown:
            raise CommandError(
                f"{option} {text!r}: partition {partition} names broker {unknown[0]}, which is not "
                f"registered under {layout.BROKER_IDS} (registered: {_listing(brokers)})"
            )


def _check_placeable(
    strategy: ReplicaPlacement,
    brokers: Sequence[BrokerMetadata],
    topic: str,
    partitions: int,
    factor: int,
    where: str,
    existing: Mapping[int, Sequence[int]] | None = None,
) -> None:
    """Refuse what the placement strategy would refuse, by placing once on the side (placement
    is a pure function of the brokers; the real one runs again when writing). ``where`` names
    what set the replication factor."""
    if factor > len(brokers):
        raise CommandError(
            f"{where}: replication factor {factor} is larger than the {len(brokers)} broker(s) "
            f"registered under {layout.BROKER_IDS} ({_listing(brokers)})"
        )
    try:
        strategy.place(
            brokers, partitions, factor, existing=existing, rng=random.Random(0), topic=topic
        )
    except EngineError as exc:
        raise CommandError(f"--placement {strategy.name}: {exc}") from None


# -- create ------------------------------------------------------------------------------------


@topics_group.command("create")
@store_option
@click.option("--topic", required=True, metavar="NAME", help="The topic to create.")
@click.option("--partitions", type=WholeNumber(1, MAX_TOPIC_PARTITIONS), help="Partition count.")
@click.option(
    "--replication-factor",
    type=WholeNumber(1, MAX_REPLICATION_FACTOR),
    help="Replicas per partition.",
)
@click.option(
    "--replica-assignment",
    metavar="B:B,B:B,...",
    help="Replica lists, partition 0 first (0:1:2,1:2:0); replaces the placement strategy.",
)
@click.option(
    "--config", "configs", multiple=True, metavar="NAME=VALUE", help="A config override (repeat)."
)
@click.option("--if-not-exists", is_flag=True, help="An existing topic is not an error.")
@placement_option
def create_command(
    store_url: str,
    topic: str,
    partitions: int | None,
    replication_factor: int | None,
    replica_assignment: str | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
    placement: str,
) -> None:
    """Create a topic: /config/topics/T and /brokers/topics/T, as Kafka's AdminZkClient writes
    them; the controller then creates the partition states."""
    name = _topic_name(topic)
    config = parse_configs(configs)
    strategy = placement_strategy(placement)
    manual = None
    if replica_assignment is not None:
        manual = parse_replica_assignment(replica_assignment)
        if len(manual) > MAX_TOPIC_PARTITIONS:
            raise CommandError(
                f"--replica-assignment: {len(manual):,} partitions (at most "
                f"{MAX_TOPIC_PARTITIONS:,})"
            )
        if partitions is not None and partitions != len(manual):
            raise CommandError(
                f"--partitions {partitions}: --replica-assignment lists {len(manual)} partitions"
            )
        if replication_factor is not None and replication_factor != len(manual[0]):
            raise CommandError(
                f"--replication-factor {replication_factor}: --replica-assignment lists "
                f"{len(manual[0])} replicas per partition"
            )
        partitions, replication_factor = len(manual), len(manual[0])
    elif partitions is None or replication_factor is None:
        missing = "--partitions" if partitions is None else "--replication-factor"
        raise CommandError(
            f"{missing} is required (or give every replica list with --replica-assignment)"
        )
    with open_store(store_url, read_only=True) as store:
        if store.exists(layout.topic_path(name)) is not None:
            if if_not_exists:
                return
            deleting = name in marked_for_deletion(store)
            raise CommandError(
                f"--topic {name!r}: topic already exists"
                + (
                    " (marked for deletion: the controller has not deleted it yet)"
                    if deleting
                    else ""
                )
            )
        brokers = _broker_metadata(store)
        if manual is not None:
            _check_registered("--replica-assignment", replica_assignment or "", manual, brokers)
        else:
            _check_placeable(
                strategy,
                brokers,
                name,
                partitions,
                replication_factor,
                f"--replication-factor {replication_factor}",
            )
    with open_store(store_url) as store:
        TopicAdmin(store, placement=strategy).create_topic(
            name,
            partitions,
            replication_factor,
            config=config,
            assignment=manual,
            if_not_exists=if_not_exists,
        )
    click.echo(f"Created topic {name}.")


# -- describe and list -------------------------------------------------------------------------


def _numbers(values: Sequence[int]) -> str:
    return ",".join(map(str, values))


def _partition_line(p: PartitionInfo, marked: bool) -> str:
    leader = "none" if p.leader == NO_LEADER else str(p.leader)
    line = (
        f"\tTopic: {visible(p.topic)}\tPartition: {p.partition}\tLeader: {leader}"
        f"\tReplicas: {_numbers(p.replicas)}\tIsr: {_numbers(p.isr)}"
    )
    if p.adding or p.removing:  # as Kafka 2.5+ shows a reassignment in progress
        line += (
            f"\tAdding Replicas: {_numbers(p.adding)}\tRemoving Replicas: {_numbers(p.removing)}"
        )
    return line + ("\tMarkedForDeletion: true" if marked else "")


def _topic_line(t: TopicInfo) -> str:
    configs = ",".join(f"{visible(k)}={visible(v)}" for k, v in sorted(t.config.items()))
    line = (
        f"Topic: {visible(t.name)}\tPartitionCount: {len(t.partitions)}"
        f"\tReplicationFactor: {t.replication_factor}\tConfigs: {configs}"
    )
    return line + ("\tMarkedForDeletion: true" if t.marked_for_deletion else "")


def _partition_json(p: PartitionInfo, live: frozenset[int]) -> dict[str, Any]:
    return {
        "partition": p.partition,
        "leader": None if p.leader == NO_LEADER else p.leader,
        "leader_epoch": None if p.state is None else p.state.leader_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "adding_replicas": list(p.adding),
        "removing_replicas": list(p.removing),
        "under_replicated": p.under_replicated,
        "unavailable": p.unavailable(live),
    }


@topics_group.command("describe")
@store_option
@click.option("--topic", metavar="NAME", help="Only this topic (default: every topic).")
@click.option(
    "--under-replicated-partitions",
    "under_replicated",
    is_flag=True,
    help="Only partitions whose ISR is smaller than their replica list.",
)
@click.option(
    "--unavailable-partitions",
    "unavailable",
    is_flag=True,
    help="Only partitions without a leader, or led by a broker that is not registered.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def describe_command(
    store_url: str, topic: str | None, under_replicated: bool, unavailable: bool, fmt: str
) -> None:
    """Each topic's partition count, replication factor and configs, then each partition's
    leader, replicas and ISR (Kafka's layout; with a filter, only the matching partitions)."""
    with open_store(store_url, read_only=True) as store:
        names = topic_names(store)
        if topic is not None:
            names = [_existing(store, topic).name]
        topics = read_topics(store, names)
        live = frozenset(registrations(store))
    filtering = under_replicated or unavailable

    def shown(p: PartitionInfo) -> bool:
        return not filtering or (
            (under_replicated and p.under_replicated) or (unavailable and p.unavailable(live))
        )

    if fmt == "json":
        document = []
        for t in topics:
            partitions = [_partition_json(p, live) for p in t.partitions if shown(p)]
            if filtering and not partitions:
                continue
            document.append(
                {
                    "topic": t.name,
                    "partition_count": len(t.partitions),
                    "replication_factor": t.replication_factor,
                    "configs": dict(sorted(t.config.items())),
                    "marked_for_deletion": t.marked_for_deletion,
                    "partitions": partitions,
                }
            )
        click.echo(visible_json(json.dumps({"topics": document}, indent=2, ensure_ascii=False)))
        return
    for t in topics:
        if not filtering:  # Kafka prints the topic line only when no filter is given
            click.echo(_topic_line(t))
        for p in t.partitions:
            if shown(p):
                click.echo(_partition_line(p, t.marked_for_deletion))


@topics_group.command("list")
@store_option
def list_command(store_url: str) -> None:
    """Every topic, one a line; a topic queued for deletion is marked so."""
    with open_store(store_url, read_only=True) as store:
        names = topic_names(store)
        deleting = marked_for_deletion(store)
    for name in names:
        click.echo(visible(name) + (" - marked for deletion" if name in deleting else ""))


# -- alter and delete --------------------------------------------------------------------------


def _added_partitions(
    text: str, lists: dict[int, list[int]], info: TopicInfo, total: int
) -> dict[int, list[int]]:
    """The new partitions' replica lists from ``--replica-assignment``: every partition's list
    (kafka-topics.sh's form, the existing ones as they are) or the new ones' only."""
    current = info.assignment.partitions
    count = len(current)
    where = f"--replica-assignment {text!r}"
    if len(lists) == total:
        for p in range(count):
            if tuple(lists[p]) != tuple(current[p]):
                raise CommandError(
                    f"{where}: partition {p} is listed as {_numbers(lists[p])} but has replicas "
                    f"{_numbers(current[p])}; move existing partitions with coordkit reassign"
                )
        added = {p: lists[p] for p in range(count, total)}
    elif len(lists) == total - count:
        added = {count + i: replicas for i, replicas in lists.items()}
    else:
        raise CommandError(
            f"{where}: lists {len(lists)} partitions; --partitions {total} on topic "
            f"{info.name!r} ({count} partitions) needs {total} (all) or {total - count} (the new ones)"
        )
    factor = len(current[0])
    if len(added[count]) != factor:
        raise CommandError(
            f"{where}: {len(added[count])} replicas per partition; topic {info.name!r} has "
            f"replication factor {factor}"
        )
    return added


@topics_group.command("alter")
@store_option
@click.option("--topic", required=True, metavar="NAME", help="The topic to alter.")
@click.option(
    "--partitions",
    type=WholeNumber(1, MAX_TOPIC_PARTITIONS),
    help="The new partition count (it can only grow).",
)
@click.option(
    "--replica-assignment",
    metavar="B:B,B:B,...",
    help="Replica lists of every partition (as kafka-topics.sh; the existing ones unchanged) or "
    "of the new ones only.",
)
@click.option(
    "--config", "configs", multiple=True, metavar="NAME=VALUE", help="Set a config override."
)
@click.option(
    "--delete-config", "deleted", multiple=True, metavar="NAME", help="Remove a config override."
)
@placement_option
def alter_command(
    store_url: str,
    topic: str,
    partitions: int | None,
    replica_assignment: str | None,
    configs: tuple[str, ...],
    deleted: tuple[str, ...],
    placement: str,
) -> None:
    """Add partitions (placed by the placement strategy unless --replica-assignment gives them)
    or change config overrides; the controller initialises new partitions."""
    name = _topic_name(topic)
    if partitions is None and replica_assignment is not None:
        raise CommandError(f"--replica-assignment {replica_assignment!r}: needs --partitions")
    if partitions is None and not configs and not deleted:
        raise CommandError("nothing to alter: give --partitions, --config or --delete-config")
    added_configs = parse_configs(configs)
    removed = parse_config_names(deleted)
    both = sorted(set(added_configs) & set(removed))
    if both:
        raise CommandError(f"--delete-config {both[0]!r}: also set with --config")
    strategy = placement_strategy(placement)
    lists = None if replica_assignment is None else parse_replica_assignment(replica_assignment)
    added: dict[int, list[int]] | None = None
    with open_store(store_url, read_only=True) as store:
        info = _existing(store, name)
        if partitions is not None:
            count = len(info.partitions)
            if info.marked_for_deletion:
                raise CommandError(
                    f"--partitions {partitions}: topic {name!r} is marked for deletion"
                )
            moving = sorted({*info.assignment.adding, *info.assignment.removing})
            if moving:
                raise CommandError(
                    f"--partitions {partitions}: partitions {moving} of topic {name!r} are being "
                    "reassigned; add partitions once the reassignment completes"
                )
            if partitions <= count:
                raise CommandError(
                    f"--partitions {partitions}: topic {name!r} has {count} partitions; the number "
                    "of partitions can only be increased"
                )
            brokers = _broker_metadata(store)
            if lists is not None:
                text = replica_assignment or ""
                added = _added_partitions(text, lists, info, partitions)
                _check_registered("--replica-assignment", text, added, brokers)
            else:
                _check_placeable(
                    strategy,
                    brokers,
                    name,
                    partitions - count,
                    len(info.assignment.partitions[0]),
                    f"--partitions {partitions} (topic {name!r})",
                    existing=info.assignment.partitions,
                )
        config = {k: v for k, v in info.config.items() if k not in removed} | added_configs
    with open_store(store_url) as store:
        admin = TopicAdmin(store, placement=strategy)
        if configs or deleted:
            admin.set_config(name, config)
            click.echo(f"Updated config for topic {name}.")
        if partitions is not None:
            admin.add_partitions(name, partitions, assignment=added)
            click.echo(
                "WARNING: If partitions are increased for a topic that has a key, the partition "
                "logic or ordering of the messages will be affected"
            )
            click.echo("Adding partitions succeeded!")


@topics_group.command("delete")
@store_option
@click.option("--topic", required=True, metavar="NAME", help="The topic to delete.")
def delete_command(store_url: str, topic: str) -> None:
    """Queue a topic for deletion (/admin/delete_topics/T); the controller deletes it."""
    name = _topic_name(topic)
    with open_store(store_url, read_only=True) as store:
        info = _existing(store, name)
        elected = controller(store) is not None
        reassigning = any(t == name for t, _ in pending_reassignment(store)) or bool(
            info.assignment.adding or info.assignment.removing
        )
    if info.marked_for_deletion:
        click.echo(f"Topic {name} is already marked for deletion.")
        return
    with open_store(store_url) as store:
        TopicAdmin(store).delete_topic(name)
    click.echo(f"Topic {name} is marked for deletion ({layout.delete_topic_path(name)}).")
    note = (
        f"The controller deletes {layout.topic_path(name)}, its partition states and "
        f"{layout.topic_config_path(name)}"
        + (" once its reassignment completes." if reassigning else ".")
    )
    if not elected:
        note += " No controller is elected now: the next one will."
    click.echo(note)
