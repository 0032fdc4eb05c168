"""``coordkit configs``: ``kafka-configs.sh`` on any store, without starting brokers.

``--entity-type topics|brokers`` with ``--entity-name NAME`` (a topic; a broker id) or, for
brokers, ``--entity-default`` (the cluster-wide broker configs); ``--describe`` prints the dynamic
configs in Kafka's lines, ``--alter --add-config k=v,k2=[a,b] --delete-config k3`` changes them
as ``kafka-configs.sh`` does: ``/config/topics/T`` or ``/config/brokers/N|<default>`` rewritten
and a change notification written (:class:`~coordkit.engine.configs.ConfigAdmin`), from which
Kafka's brokers and ``coordkit serve`` apply them. Everything is checked first on a read-only
session; a refused command writes nothing.
"""

from __future__ import annotations

import click

from coordkit.cli.admin.options import store_option
from coordkit.cli.configs.changes import check, parse_added, parse_deleted
from coordkit.cli.configs.quotas import (
    CLIENTS,
    IPS,
    alter_quotas,
    check_combination,
    describe_quotas,
)
from coordkit.cli.configs.users import USERS, alter_user, describe_users
from coordkit.cli.errors import CommandError
from coordkit.engine.configs import BROKERS, TOPICS, ConfigAdmin
from coordkit.engine.errors import UnknownTopicError
from coordkit.errors import NoNodeError
from coordkit.kafka import layout
from coordkit.plugins import open_store
from coordkit.store import MetadataStore
from coordkit.support.terminal import visible

#: DescribeConfigs' names of the sources a stored config comes from.
_SOURCE = {TOPICS: "DYNAMIC_TOPIC_CONFIG", BROKERS: "DYNAMIC_BROKER_CONFIG"}
_DEFAULT_SOURCE = "DYNAMIC_DEFAULT_BROKER_CONFIG"


def _entity(entity_type: str, name: str | None, default: bool) -> str | None:
    """The entity the options name (``None``: every one, for ``--describe``)."""
    if default and name is not None:
        raise CommandError("--entity-name and --entity-default: give only one")
    if default:
        if entity_type != BROKERS:
            raise CommandError("--entity-default: only brokers have cluster-wide defaults")
        return layout.DEFAULT_BROKER
    if name is not None and entity_type == BROKERS and not name.isdigit():
        raise CommandError(f"--entity-name {name!r}: a broker id is a non-negative integer")
    return name


def _title(entity_type: str, name: str) -> str:
    if name == layout.DEFAULT_BROKER:
        return "Default configs for brokers in the cluster are:"
    return f"Dynamic configs for {entity_type.removesuffix('s')} {name} are:"


def _describe(store: MetadataStore, entity_type: str, name: str | None) -> None:
    admin = ConfigAdmin(store)
    if name is None:
        root = layout.CONFIG_TOPICS if entity_type == TOPICS else layout.CONFIG_BROKERS
        try:
            names = sorted(store.children(root))
        except NoNodeError:
            names = []
    else:
        names = [name]
    cluster = admin.read(BROKERS, layout.DEFAULT_BROKER) if entity_type == BROKERS else {}
    for entity in names:
        configs = admin.read(entity_type, entity)
        click.echo(visible(_title(entity_type, entity)))
        for config, value in sorted(configs.items()):
            own = _DEFAULT_SOURCE if entity == layout.DEFAULT_BROKER else _SOURCE[entity_type]
            synonyms = [f"{own}:{config}={value}"]
            if own == _SOURCE[BROKERS] and config in cluster:
                synonyms.append(f"{_DEFAULT_SOURCE}:{config}={cluster[config]}")
            line = f"  {config}={value} sensitive=false synonyms={{{', '.join(synonyms)}}}"
            click.echo(visible(line))


class _EntityOrder(click.Command):
    """kafka-configs pairs each ``--entity-type`` with the ``--entity-name`` or
    ``--entity-default`` that follows it: the order of those options is kept."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ORDER] = [
            None if arg == "--entity-default" else "name"
            for arg in args
            if arg == "--entity-default" or arg.split("=", 1)[0] == "--entity-name"
        ]
        return super().parse_args(ctx, args)


_ORDER = "coordkit.configs.entity_order"


def _named(entity_names: tuple[str, ...]) -> list[str | None]:
    """The names in kafka-configs' order, ``None`` for each ``--entity-default``."""
    given = iter(entity_names)
    order = click.get_current_context().meta.get(_ORDER, [])
    return [next(given, None) if slot == "name" else None for slot in order]


def _quota_keys(add: str | None, delete: str | None) -> bool:
    """Whether a users change names quotas (not SCRAM credentials)."""
    named = [*parse_added(add), *parse_deleted(delete)]
    return any(not n.startswith("SCRAM-") for n in named)


def _quotas(store_url: str, types: tuple[str, ...], names: list[str | None], describe: bool,
            add: str | None, delete: str | None, *, users_too: bool) -> None:  # fmt: skip
    """Client quotas (:mod:`coordkit.cli.configs.quotas`); a users describe also lists the
    SCRAM credentials, as kafka-configs does."""
    if describe:
        if add is not None or delete is not None:
            raise CommandError("--add-config and --delete-config go with --alter")
        wanted = [*names, *[...] * (len(types) - len(names))]
        describe_quotas(store_url, types, wanted)
        if users_too and not (names and names[0] is None):
            describe_users(store_url, names[0] if names else None)
        return
    named = [*parse_added(add), *parse_deleted(delete)]
    if types[0] == USERS and any(n.startswith("SCRAM-") for n in named):
        raise CommandError("--add-config/--delete-config: quotas and SCRAM credentials are "
                           "changed by separate commands, as kafka-configs has it")  # fmt: skip
    alter_quotas(store_url, types, names, add, delete)


@click.command("configs", cls=_EntityOrder)
@store_option
@click.option(
    "--entity-type",
    "entity_types",
    required=True,
    multiple=True,
    type=click.Choice([TOPICS, BROKERS, USERS, CLIENTS, IPS]),
    help="Whose configs: a topic's, a broker's, a user's (SCRAM credentials, quotas), a client "
    "id's or an ip's (quotas); users then clients for a user's client id's quotas.",
)
@click.option("--entity-name", "entity_names", metavar="NAME", multiple=True,
              help="The topic, the broker id, the user, the client id or the ip.")  # fmt: skip
@click.option("--entity-default", "entity_defaults", count=True,
              help="The cluster-wide broker configs, or the default user, client id or ip.")  # fmt: skip
@click.option("--describe", is_flag=True, help="Print the dynamic configs.")
@click.option("--alter", is_flag=True, help="Change them (--add-config, --delete-config).")
@click.option(
    "--add-config",
    metavar="K=V,...",
    help="Configs to set: k1=v1,k2=[a,b] (a list value in square brackets).",
)
@click.option("--delete-config", metavar="K,...", help="Configs to remove: k1,k2.")
def configs_command(
    store_url: str,
    entity_types: tuple[str, ...],
    entity_names: tuple[str, ...],
    entity_defaults: int,
    describe: bool,
    alter: bool,
    add_config: str | None,
    delete_config: str | None,
) -> None:
    """Describe or change topic and broker configs, SCRAM credentials and client quotas as
    kafka-configs.sh (Kafka's ZooKeeper layout)."""
    if describe == alter:
        raise CommandError("give one of --describe and --alter")
    names = _named(entity_names)
    if len(names) > len(entity_types):
        raise CommandError("--entity-name or --entity-default given more often than --entity-type")
    quota = CLIENTS in entity_types or IPS in entity_types or len(entity_types) > 1 or (
        alter and entity_types == (USERS,) and _quota_keys(add_config, delete_config))  # fmt: skip
    if quota or (describe and entity_types == (USERS,) and len(names) < 2):
        if quota:
            check_combination(entity_types)
        _quotas(store_url, entity_types, names, describe, add_config, delete_config,
                users_too=not quota)  # fmt: skip
        return
    entity_type = entity_types[0]
    entity_name = entity_names[0] if entity_names else None
    entity_default = entity_defaults > 0
    if len(entity_types) > 1 or len(entity_names) > 1 or entity_defaults > 1:
        raise CommandError(f"--entity-type {entity_type}: give one entity")
    if entity_type == USERS:  # SCRAM credentials: coordkit.cli.configs.users
        if entity_default:
            raise CommandError("--entity-default: only brokers have cluster-wide defaults")
        if describe:
            describe_users(store_url, entity_name)
        elif entity_name is None:
            raise CommandError("--alter needs --entity-name (the user)")
        else:
            alter_user(store_url, entity_name, add_config, delete_config)
        return
    name = _entity(entity_type, entity_name, entity_default)
    if describe:
        if add_config is not None or delete_config is not None:
            raise CommandError("--add-config and --delete-config go with --alter")
        with open_store(store_url, read_only=True) as store:
            try:
                _describe(store, entity_type, name)
            except UnknownTopicError as exc:
                raise CommandError(f"--entity-name {name}: {exc}") from None
        return
    if name is None:
        raise CommandError("--alter needs --entity-name (or --entity-default for brokers)")
    added, deleted = parse_added(add_config), parse_deleted(delete_config)
    if not added and not deleted:
        raise CommandError("--alter needs --add-config or --delete-config")
    check(entity_type, added, deleted)
    with open_store(store_url, read_only=True) as store:
        try:
            current = ConfigAdmin(store).read(entity_type, name)
        except UnknownTopicError as exc:
            raise CommandError(f"--entity-name {name}: {exc}") from None
    updated = {k: v for k, v in current.items() if k not in deleted} | added
    with open_store(store_url) as store:
        ConfigAdmin(store).write(entity_type, name, updated)
    if name == layout.DEFAULT_BROKER:
        click.echo("Completed updating default config for brokers in the cluster.")
    else:
        click.echo(
            visible(f"Completed updating config for {entity_type.removesuffix('s')} {name}.")
        )
