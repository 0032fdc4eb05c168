"""``coordkit brokers``: every registration under ``/brokers/ids`` — host:port, rack, whether its
node is ephemeral (a live broker's session owns it) — with the partitions each broker leads (from
the partition states) and the replicas it holds (from the replica assignments). A broker that
leads or holds something without being registered is listed too, as ``(not registered)``: the
replicas a dead broker leaves behind. Read-only.
"""

from __future__ import annotations

import json
from typing import Any

import click

from coordkit.cli.admin.cluster_state import (
    Registration,
    controller,
    read_topics,
    registrations,
    topic_names,
)
from coordkit.cli.admin.options import store_option
from coordkit.cli.group.view import compact_partitions
from coordkit.cli.tables import Column, FittedTable, Kind, output_console
from coordkit.kafka.model import NO_LEADER, TopicPartition
from coordkit.plugins import open_store
from coordkit.support.terminal import visible_json


def _address(registration: Registration) -> str:
    host = registration.info.host
    # An IPv6 literal needs brackets before the port, as in Kafka's endpoints.
    return (
        f"[{host}]:{registration.info.port}" if ":" in host else f"{host}:{registration.info.port}"
    )


def _ephemeral(registration: Registration | None) -> str:
    if registration is None:
        return "-"
    return "yes" if registration.ephemeral else "no"


@click.command("brokers")
@store_option
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def brokers_command(store_url: str, fmt: str) -> None:
    """Registered brokers (/brokers/ids) with the partitions each leads and holds replicas of."""
    with open_store(store_url, read_only=True) as store:
        registered = registrations(store)
        topics = read_topics(store, topic_names(store))
        current_controller = controller(store)
    leads: dict[int, list[TopicPartition]] = {}
    holds: dict[int, list[TopicPartition]] = {}
    for topic in topics:
        for p in topic.partitions:
            tp = TopicPartition(p.topic, p.partition)
            if p.leader != NO_LEADER:
                leads.setdefault(p.leader, []).append(tp)
            for replica in p.replicas:
                holds.setdefault(replica, []).append(tp)
    ids = sorted({*registered, *leads, *holds})
    if fmt == "json":
        document: dict[str, Any] = {"controller": current_controller, "brokers": []}
        for broker in ids:
            registration = registered.get(broker)
            info = registration.info if registration is not None else None
            document["brokers"].append(
                {
                    "id": broker,
                    "registered": registration is not None,
                    "host": info.host if info else None,
                    "port": info.port if info else None,
                    "rack": info.rack if info else None,
                    "endpoints": list(info.endpoints) if info else [],
                    "ephemeral": registration.ephemeral if registration else None,
                    "leader_of": [str(tp) for tp in leads.get(broker, [])],
                    "replicas": [str(tp) for tp in holds.get(broker, [])],
                }
            )
        click.echo(visible_json(json.dumps(document, indent=2, ensure_ascii=False)))
        return
    rows: list[list[str]] = []
    for broker in ids:
        registration = registered.get(broker)
        rows.append(
            [
                str(broker),
                _address(registration) if registration else "(not registered)",
                (registration.info.rack or "-") if registration else "-",
                _ephemeral(registration),
                str(len(leads.get(broker, []))),
                compact_partitions(leads.get(broker, [])),
                str(len(holds.get(broker, []))),
                compact_partitions(holds.get(broker, [])),
            ]
        )
    title = f"{len(registered)} broker(s) registered; controller: " + (
        "none" if current_controller is None else str(current_controller)
    )
    table = FittedTable(
        [
            Column("broker", Kind.NUMBER, "id"),
            Column("host:port"),
            Column("rack"),
            Column("ephemeral", short="eph"),
            Column("leads", Kind.NUMBER),
            Column("leader of", Kind.TEXT),
            Column("replicas", Kind.NUMBER, "repl"),
            Column("replicas of", Kind.TEXT, "repl of"),
        ],
        rows,
        title=title,
    )
    output_console().print(table)
