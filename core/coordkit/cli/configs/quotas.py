"""``coordkit configs --entity-type users|clients|ips``: client quotas as ``kafka-configs.sh``
sets and lists them (Kafka 3.9's ZooKeeper layout, :mod:`coordkit.engine.quotas`).

An entity is one ``--entity-type`` (``users``, ``clients``, ``ips``) or ``users`` then
``clients``, each followed by ``--entity-name NAME`` or ``--entity-default``, in kafka-configs'
order. ``--alter --add-config producer_byte_rate=1024,request_percentage=12.5 --delete-config
consumer_byte_rate`` checks each quota as Kafka 4.4's controller does (the quotas the entity may
have; a number; finite, above 0, whole for the LONG and INT ones) and refuses the whole command
on the first fault, writing nothing. ``--describe`` prints kafka-configs' lines (``Quota configs
for user-principal 'alice' are ...``), every entity of the types given when a name is left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import EllipsisType

import click

from coordkit.cli.configs.changes import parse_added, parse_deleted
from coordkit.cli.errors import CommandError
from coordkit.engine.quotas import (
    CLIENT_ID,
    IP,
    USER,
    ClientQuotaEntity,
    ClientQuotas,
    java_double_text,
    quota_types,
)
from coordkit.kafka.java import java_string_hashcode
from coordkit.plugins import open_store
from coordkit.support.terminal import visible

USERS, CLIENTS, IPS = "users", "clients", "ips"
QUOTA_ENTITY_TYPES = (USERS, CLIENTS, IPS)
_TYPE = {USERS: USER, CLIENTS: CLIENT_ID, IPS: IP}
_SHOWN = {USER: "user-principal", CLIENT_ID: "client-id", IP: "ip"}
_SINGULAR = {USERS: "user", CLIENTS: "client", IPS: "ip"}
_LIMITS = {"int": 2**31 - 1, "long": 2**63 - 1}


def check_combination(types: Sequence[str]) -> None:
    if list(types) not in ([USERS], [CLIENTS], [IPS], [USERS, CLIENTS]):
        raise CommandError(
            f"--entity-type {' '.join(types)}: quotas are a user's, a client's, a user's "
            "client's (users then clients) or an ip's"
        )


def _parse_value(entity: ClientQuotaEntity, name: str, text: str) -> float:
    kind = quota_types(entity).get(name)
    if kind is None:
        allowed = ", ".join(quota_types(entity))
        raise CommandError(f"--add-config {name}: not a quota of this entity ({allowed})")
    try:
        value = float(text)
    except ValueError:
        raise CommandError(f"--add-config {name}: Cannot parse quota configuration value for "
                           f"{name}: {text}") from None  # fmt: skip
    if not math.isfinite(value) or value <= 0:
        raise CommandError(f"--add-config {name}: Quota {name} must be greater than 0")
    if kind in _LIMITS and (value > _LIMITS[kind] or abs(math.fmod(value, 1.0)) > 1e-6):
        raise CommandError(f"--add-config {name}: a whole number up to {_LIMITS[kind]}")
    return value


def alter_quotas(store_url: str, types: Sequence[str], names: Sequence[str | None],
                 add: str | None, delete: str | None) -> None:  # fmt: skip
    """Set or remove the quotas of one entity (``names``: ``None`` is the default)."""
    check_combination(types)
    if len(names) != len(types):
        raise CommandError("--alter needs --entity-name or --entity-default for each --entity-type")
    entity = ClientQuotaEntity(tuple(sorted(zip((_TYPE[t] for t in types), names, strict=True))))
    for name in names:
        if name == "":
            raise CommandError("--entity-name: an empty name (use --entity-default)")
    added, deleted = parse_added(add), parse_deleted(delete)
    if not added and not deleted:
        raise CommandError("--alter needs --add-config or --delete-config")
    both = sorted(set(added) & set(deleted))
    if both:
        raise CommandError(f"--add-config and --delete-config both name {', '.join(both)}")
    for name in deleted:
        if name not in quota_types(entity):
            raise CommandError(f"--delete-config {name}: not a quota of this entity")
    changes: dict[str, float | None] = {n: _parse_value(entity, n, t) for n, t in added.items()}
    changes.update(dict.fromkeys(deleted))
    with open_store(store_url) as store:
        ClientQuotas(store).alter(entity, changes)
    first = names[0]
    if first is None:
        click.echo(f"Completed updating default config for {types[0]} in the cluster.")
    else:
        click.echo(visible(f"Completed updating config for {_SINGULAR[types[0]]} {first}."))


def _described(entity: ClientQuotaEntity) -> str:
    named = dict(entity.entries)
    parts = []
    for kind in (USER, CLIENT_ID, IP):
        if kind in named:
            name = named[kind]
            parts.append(f"the default {_SHOWN[kind]}" if name is None
                         else f"{_SHOWN[kind]} '{name}'")  # fmt: skip
    return ", ".join(parts)


def _java_map_order(hashes: Sequence[int]) -> list[int]:
    """Indexes of keys with ``hashes`` in a ``HashMap`` sized for them (as the AdminClient
    collects DescribeClientQuotas' entries, which kafka-configs prints in that order)."""
    table = 1
    while table < len(hashes):
        table *= 2
    while len(hashes) > table * 0.75:
        table *= 2

    def bucket(i: int) -> int:
        h = hashes[i] & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (table - 1)

    return sorted(range(len(hashes)), key=lambda i: (bucket(i), i))


def _entity_hash(entity: ClientQuotaEntity) -> int:
    """``ClientQuotaEntity.hashCode()``: ``Objects.hash(entries)`` of its map."""
    total = sum(java_string_hashcode(k) ^ (0 if v is None else java_string_hashcode(v))
                for k, v in entity.entries)  # fmt: skip
    return (31 + total) & 0xFFFFFFFF


def _key_order(values: Mapping[str, float]) -> list[str]:
    keys = list(values)
    table = 16
    while len(keys) > table * 0.75:
        table *= 2

    def bucket(key: str) -> int:
        h = java_string_hashcode(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (table - 1)

    return sorted(keys, key=lambda k: (bucket(k), keys.index(k)))


def describe_quotas(store_url: str, types: Sequence[str],
                    names: Sequence[str | EllipsisType | None]) -> bool:  # fmt: skip
    """Print the quotas of the entities of ``types`` (``names``, one for each type: a name,
    ``None`` for the default, ``...`` for any), as kafka-configs' strict filter matches them;
    whether any."""
    check_combination(types)
    wanted = {_TYPE[t] for t in types}
    with open_store(store_url, read_only=True) as store:
        found = ClientQuotas(store).read_all()
    matched = []
    for entity, values in found.items():
        named = dict(entity.entries)
        if set(named) != wanted:
            continue
        if any(n is not ... and named[_TYPE[t]] != n for t, n in zip(types, names, strict=True)):
            continue
        matched.append((entity, values))
    order = _java_map_order([_entity_hash(e) for e, _ in matched])
    for index in order:
        entity, values = matched[index]
        shown = ", ".join(f"{k}={java_double_text(values[k])}" for k in _key_order(values))
        click.echo(visible(f"Quota configs for {_described(entity)} are {shown}"))
    return bool(matched)
