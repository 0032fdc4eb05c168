"""``coordkit acls``: ``kafka-acls.sh`` on any store, without starting brokers.

``--add`` / ``--remove`` / ``--list`` ACLs on ``--topic T``, ``--group G``, ``--cluster`` or
``--transactional-id X`` (each repeatable), for ``--allow-principal`` / ``--deny-principal``
(``User:alice``; repeatable) from ``--allow-host`` / ``--deny-host`` (default ``*``), for each
``--operation`` (default ``All``), on literal or prefixed resources
(``--resource-pattern-type``; ``--list`` and ``--remove`` also take ``any`` and ``match``). The
ACLs are written in Kafka 3.9's ZooKeeper layout with its change notifications
(:class:`~coordkit.engine.acls.AclAdmin`), so coordkit's and Kafka's brokers take them in at
once; the output is kafka-acls'. Everything is checked before the store is opened for writing; a
refused command writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import click

from coordkit.cli.admin.options import store_option
from coordkit.cli.errors import CommandError
from coordkit.engine.acls import AclAdmin
from coordkit.kafka.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from coordkit.plugins import open_store
from coordkit.support.terminal import visible

PATTERN_TYPES = ("literal", "prefixed", "any", "match")


def _pattern_text(pattern: ResourcePattern) -> str:
    return (f"ResourcePattern(resourceType={pattern.type.name}, name={pattern.name}, "
            f"patternType={pattern.pattern_type.name})")  # fmt: skip


def _entry_text(entry: AccessControlEntry) -> str:
    return (f"(principal={entry.principal}, host={entry.host}, "
            f"operation={entry.operation.name}, permissionType={entry.permission.name})")  # fmt: skip


def _print(title: str, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
    click.echo(visible(f"{title} `{_pattern_text(pattern)}`: "))
    for entry in sorted(entries):
        click.echo(f" \t{visible(_entry_text(entry))} ")  # kafka-acls' tab, not the input's
    click.echo("")


def _principal(option: str, text: str) -> str:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise CommandError(f"{option} {text!r}: a principal is 'Type:name' (e.g. User:alice)")
    return text


def _operations(texts: Sequence[str], kinds: Iterable[ResourceType]) -> list[AclOperation]:
    operations = []
    for text in texts or ("All",):
        try:
            operation = AclOperation.parse(text)
        except ValueError:
            operation = AclOperation.UNKNOWN
        if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            names = ", ".join(o.pascal for o in AclOperation if o.value > AclOperation.ANY)
            raise CommandError(f"--operation {text!r}: not one of {names}")
        operations.append(operation)
    for kind in kinds:
        for operation in operations:
            if operation != AclOperation.ALL and operation not in SUPPORTED_OPERATIONS[kind]:
                allowed = ", ".join(sorted(o.pascal for o in SUPPORTED_OPERATIONS[kind]))
                raise CommandError(f"--operation {operation.pascal}: a {kind.pascal} resource "
                                   f"supports only {allowed} (and All)")  # fmt: skip
    return operations


def _resources(
    topics: Sequence[str], groups: Sequence[str], cluster: bool, transactional: Sequence[str]
) -> list[tuple[ResourceType, str]]:
    found = [(ResourceType.TOPIC, t) for t in topics]
    found += [(ResourceType.GROUP, g) for g in groups]
    found += [(ResourceType.TRANSACTIONAL_ID, x) for x in transactional]
    if cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    for kind, name in found:
        if not name:
            raise CommandError(f"--{kind.name.lower().replace('_', '-')}: an empty name")
    return found


@click.command("acls")
@store_option
@click.option("--add", "action", flag_value="add", help="Add the ACLs described.")
@click.option("--remove", "action", flag_value="remove", help="Remove the ACLs matched.")
@click.option("--list", "action", flag_value="list", help="List the ACLs matched.")
@click.option("--allow-principal", multiple=True, metavar="TYPE:NAME", help="Allowed principal.")
@click.option("--deny-principal", multiple=True, metavar="TYPE:NAME", help="Denied principal.")
@click.option("--principal", multiple=True, metavar="TYPE:NAME",
              help="--list: only the ACLs of these principals.")  # fmt: skip
@click.option("--allow-host", multiple=True, metavar="HOST", help="Host allowed from (*).")
@click.option("--deny-host", multiple=True, metavar="HOST", help="Host denied from (*).")
@click.option("--operation", multiple=True, metavar="OP",
              help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                   "DescribeConfigs, AlterConfigs, IdempotentWrite, All (default All).")  # fmt: skip
@click.option("--topic", multiple=True, metavar="NAME", help="A topic resource (* for all).")
@click.option("--group", multiple=True, metavar="NAME", help="A group resource (* for all).")
@click.option("--cluster", is_flag=True, help="The cluster resource.")
@click.option("--transactional-id", multiple=True, metavar="ID", help="A transactional id.")
@click.option("--resource-pattern-type", default=None, metavar="TYPE",
              help="literal (default), prefixed; --list and --remove also any, match.")  # fmt: skip
def acls_command(
    store_url: str,
    action: str | None,
    allow_principal: tuple[str, ...],
    deny_principal: tuple[str, ...],
    principal: tuple[str, ...],
    allow_host: tuple[str, ...],
    deny_host: tuple[str, ...],
    operation: tuple[str, ...],
    topic: tuple[str, ...],
    group: tuple[str, ...],
    cluster: bool,
    transactional_id: tuple[str, ...],
    resource_pattern_type: str | None,
) -> None:
    """Add, remove or list ACLs as kafka-acls.sh (Kafka's ZooKeeper layout)."""
    if action is None:
        raise CommandError("give one of --add, --remove and --list")
    text = (resource_pattern_type or ("literal" if action == "add" else "any")).lower()
    if text not in PATTERN_TYPES or (action == "add" and text in ("any", "match")):
        usable = "literal, prefixed" if action == "add" else ", ".join(PATTERN_TYPES)
        raise CommandError(f"--resource-pattern-type {resource_pattern_type}: with --{action} "
                           f"one of {usable}")  # fmt: skip
    pattern_type = PatternType.parse(text)
    resources = _resources(topic, group, cluster, transactional_id)
    allowed = [_principal("--allow-principal", p) for p in allow_principal]
    denied = [_principal("--deny-principal", p) for p in deny_principal]
    listed = [_principal("--principal", p) for p in principal]
    if action == "list":
        if allowed or denied or operation:
            raise CommandError("--list takes resources and --principal only")
        _list(store_url, resources, pattern_type, listed)
        return
    if not resources:
        raise CommandError(f"--{action} needs a resource (--topic, --group, --cluster or "
                           "--transactional-id)")  # fmt: skip
    if listed:
        raise CommandError("--principal goes with --list (use --allow-principal/--deny-principal)")
    operations = _operations(operation, {kind for kind, _ in resources})
    entries = [
        AccessControlEntry(who, host, op, permission)
        for people, hosts, permission in (
            (allowed, allow_host or ("*",), AclPermissionType.ALLOW),
            (denied, deny_host or ("*",), AclPermissionType.DENY),
        )
        for who in people
        for host in hosts
        for op in operations
    ]
    if action == "add":
        if not entries:
            raise CommandError("--add needs --allow-principal or --deny-principal")
        _add(store_url, resources, pattern_type, entries)
    else:
        _remove(store_url, resources, pattern_type, entries)


def _add(store_url: str, resources: list[tuple[ResourceType, str]], pattern_type: PatternType,
         entries: list[AccessControlEntry]) -> None:  # fmt: skip
    with open_store(store_url) as store:
        admin = AclAdmin(store)
        for kind, name in resources:
            pattern = ResourcePattern(kind, name, pattern_type)
            _print("Adding ACLs for resource", pattern, entries)
            admin.add(AclBinding(pattern, e) for e in entries)
        for kind, name in resources:
            pattern = ResourcePattern(kind, name, pattern_type)
            _print("Current ACLs for resource", pattern, admin.read(pattern)[0])


def _remove(store_url: str, resources: list[tuple[ResourceType, str]], pattern_type: PatternType,
            entries: list[AccessControlEntry]) -> None:  # fmt: skip
    filters = [
        AclBindingFilter(kind, name, pattern_type, e.principal, e.host, e.operation, e.permission)
        for kind, name in resources
        for e in entries
    ] or [AclBindingFilter(kind, name, pattern_type) for kind, name in resources]
    with open_store(store_url) as store:
        removed = AclAdmin(store).remove(filters)
    for binding in sorted({b for found in removed for b in found}):
        click.echo(visible(f"Removed {_entry_text(binding.entry)} from "
                           f"`{_pattern_text(binding.pattern)}`"))  # fmt: skip


def _list(store_url: str, resources: list[tuple[ResourceType, str]], pattern_type: PatternType,
          principals: list[str]) -> None:  # fmt: skip
    filters = [AclBindingFilter(kind, name, pattern_type) for kind, name in resources]
    with open_store(store_url, read_only=True) as store:
        found = AclAdmin(store).describe(AclBindingFilter())
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in found:
        if filters and not any(f.matches_pattern(binding.pattern) for f in filters):
            continue
        if principals and binding.entry.principal not in principals:
            continue
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    for pattern, entries in by_pattern.items():
        _print("Current ACLs for resource", pattern, entries)
