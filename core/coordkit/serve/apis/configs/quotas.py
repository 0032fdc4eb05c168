"""DescribeClientQuotas (v0-1) and AlterClientQuotas (v0-1), answered as Kafka 4.4 answers them,
on the quotas of Kafka 3.9's ZooKeeper layout (:mod:`coordkit.engine.quotas`).

* Describe: a filter of components (an entity type matched by exact name, the default, or any
  name), strict or not, checked as Kafka's ``ClientQuotasImage.describe`` (refusals:
  INVALID_REQUEST, or UNSUPPORTED_VERSION for an entity type Kafka does not know, with Kafka's
  messages and no entries); every entity with quotas that matches.
* Alter: each entity checked as Kafka's ``ClientQuotaControlManager`` (its types, an IP alone
  and valid, each quota known for it, finite, above 0, whole for LONG and INT quotas) and
  refused whole with INVALID_REQUEST and Kafka's message, nothing written; the others are
  written. ``validate_only`` checks and writes nothing.

Both need the cluster's DescribeConfigs / AlterConfigs under an authorizer, as Kafka's
``KafkaApis``. Quotas are stored and described; coordkit does not throttle clients by them.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import socket
from collections.abc import Iterable
from typing import Any

from coordkit.engine.groups.modern.java_order import java_hash_map_order, java_string_hash
from coordkit.engine.quotas import (
    CLIENT_ID,
    ENTITY_TYPES,
    IP,
    USER,
    ClientQuotaEntity,
    ClientQuotas,
    quota_types,
)
from coordkit.errors import LayoutError, StoreError
from coordkit.kafka.acls import AclOperation
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.configs.errors import RefusedError
from coordkit.serve.authorization import (
    AUTHORIZATION_MESSAGES,
    CLUSTER_AUTHORIZATION_FAILED,
    cluster_allowed,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

log = logging.getLogger("coordkit.serve")

VERSIONS = (0, 1)
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

DescribeResponse = messages.DescribeClientQuotasResponse
DescribeEntry = nested(DescribeResponse, "EntryData")
DescribeEntity = nested(DescribeEntry, "EntityData")
DescribeValue = nested(DescribeEntry, "ValueData")
AlterResponse = messages.AlterClientQuotasResponse
AlterEntry = nested(AlterResponse, "EntryData")
AlterEntity = nested(AlterEntry, "EntityData")


def _filter(components: Iterable[Any]) -> tuple[dict[str, str | None], set[str]]:
    """The exact (or default: ``None``) names and the any-name types a filter asks for."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for component in components:
        kind = component.entity_type
        if not kind:
            raise RefusedError(errors.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise RefusedError(errors.INVALID_REQUEST,
                               f"Entity type {kind} cannot appear more than once in the filter.")  # fmt: skip
        if kind not in ENTITY_TYPES:
            raise RefusedError(errors.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        match = component.match
        if component.match_type == MATCH_EXACT:
            if match is None:
                raise RefusedError(errors.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, "
                                   "but set match string to null.")  # fmt: skip
            exact[kind] = match
        elif component.match_type == MATCH_DEFAULT:
            if match is not None:
                raise RefusedError(errors.INVALID_REQUEST, "Request specified "
                                   "MATCH_TYPE_DEFAULT, but also specified a match string.")  # fmt: skip
            exact[kind] = None
        elif component.match_type == MATCH_SPECIFIED:
            if match is not None:
                raise RefusedError(errors.INVALID_REQUEST, "Request specified "
                                   "MATCH_TYPE_SPECIFIED, but also specified a match string.")  # fmt: skip
            specified.add(kind)
        else:
            raise RefusedError(errors.INVALID_REQUEST, f"Unknown match type {component.match_type}")
    asked = set(exact) | specified
    if IP in asked and asked & {USER, CLIENT_ID}:
        raise RefusedError(errors.INVALID_REQUEST, "Invalid entity filter component combination. "
                           "IP filter component should not be used with user or clientId filter "
                           "component.")  # fmt: skip
    return exact, specified


def _matches(entity: ClientQuotaEntity, exact: dict[str, str | None], specified: set[str],
             strict: bool) -> bool:  # fmt: skip
    """Kafka's ``ClientQuotasImage.matches``."""
    named = dict(entity.entries)
    if strict and len(named) != len(exact) + len(specified):
        return False
    if any(kind not in named or named[kind] != name for kind, name in exact.items()):
        return False
    return all(kind in named for kind in specified)


def _sized_map_order(keys: list[str]) -> list[str]:
    """``keys`` as a ``new HashMap<>(keys.size())`` filled with them iterates them (Kafka's
    ``AlterClientQuotasRequest`` reads an entity into one): its table starts at the size asked,
    rounded up to a power of two, and doubles once more than three quarters full."""
    table = 1
    while table < len(keys):
        table *= 2
    while len(keys) > table * 0.75:
        table *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (table - 1)

    return sorted(keys, key=lambda k: (bucket(k), keys.index(k)))


def _entity_order(entity: ClientQuotaEntity) -> list[tuple[str, str | None]]:
    """The entity's types in the order Kafka's ``HashMap`` lists them."""
    named = dict(entity.entries)
    return [(kind, named[kind]) for kind in java_hash_map_order(named)]


def _describe(ctx: BrokerContext, body: Any) -> Any:
    try:
        exact, specified = _filter(body.components)
        quotas = ClientQuotas(ctx.broker.store).read_all()
    except RefusedError as exc:
        return DescribeResponse(throttle_time_ms=0, error_code=exc.code, error_message=str(exc),
                                entries=None)  # fmt: skip
    except (StoreError, LayoutError) as exc:
        return DescribeResponse(throttle_time_ms=0, error_code=errors.UNKNOWN_SERVER_ERROR,
                                error_message=f"the quotas were not read: {exc}", entries=None)  # fmt: skip
    entries = []
    for entity, values in quotas.items():
        if not _matches(entity, exact, specified, body.strict):
            continue
        entries.append(DescribeEntry(
            entity=[DescribeEntity(entity_type=t, entity_name=n) for t, n in _entity_order(entity)],
            values=[DescribeValue(key=k, value=values[k]) for k in java_hash_map_order(values)],
        ))  # fmt: skip
    return DescribeResponse(throttle_time_ms=0, error_code=errors.NONE, error_message="",
                            entries=entries)  # fmt: skip


def _valid_ip(name: str | None) -> bool:
    """Kafka's ``isValidIpEntity``: the default, an address, or a host name that resolves."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
    except (OSError, UnicodeError):
        return False
    return True


def _check_entity(entity_data: Iterable[Any]) -> ClientQuotaEntity:
    """Kafka's ``validateEntity`` and ``configKeysForEntityType``; a type given twice counts
    once, its last name (Kafka reads the entity into a map)."""
    named: dict[str, str | None] = {}
    for data in entity_data:
        named[data.entity_type] = data.entity_name
    if not named:
        raise RefusedError(errors.INVALID_REQUEST, "Invalid empty client quota entity")
    for kind in java_hash_map_order(named):
        if kind not in ENTITY_TYPES:
            raise RefusedError(errors.INVALID_REQUEST,
                               f"Unhandled client quota entity type: {kind}")  # fmt: skip
        if named[kind] == "":
            raise RefusedError(errors.INVALID_REQUEST, f"Empty {kind} not supported")
    if IP in named:
        if len(named) > 1:
            raise RefusedError(errors.INVALID_REQUEST, "Invalid quota entity combination, IP "
                               "entity shouldnot be combined with User or ClientId")  # fmt: skip
        if not _valid_ip(named[IP]):
            raise RefusedError(errors.INVALID_REQUEST,
                               f"{named[IP]} is not a valid IP or resolvable host.")  # fmt: skip
    return ClientQuotaEntity(tuple(sorted(named.items())))


def _check_value(entity: ClientQuotaEntity, key: str, value: float) -> None:
    """Kafka's ``validateQuotaKeyValue``."""
    kind = quota_types(entity).get(key)
    if kind is None:
        raise RefusedError(errors.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not math.isfinite(value):
        raise RefusedError(errors.INVALID_REQUEST, f"Quota {key} must be a finite number")
    if value <= 0:
        raise RefusedError(errors.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if kind == "double":
        return
    if kind == "int" and value > INT32_MAX:
        raise RefusedError(errors.INVALID_REQUEST,
                           f"Proposed value for {key} is too large for an INT.")  # fmt: skip
    if kind == "long" and value > INT64_MAX:
        raise RefusedError(errors.INVALID_REQUEST,
                           f"Proposed value for {key} is too large for a LONG.")  # fmt: skip
    if abs(math.fmod(value, 1.0)) > 1e-6:
        raise RefusedError(errors.INVALID_REQUEST, f"{key} cannot be a fractional value.")


def _alter_entry(ctx: BrokerContext, entry: Any, validate_only: bool
                 ) -> tuple[ClientQuotaEntity | None, int, str | None]:  # fmt: skip
    entity = None
    try:
        entity = _check_entity(entry.entity)
        changes: dict[str, float | None] = {}
        for op in entry.ops:
            if op.key in changes:
                raise RefusedError(errors.INVALID_REQUEST, f"Ignoring duplicate entity {entity}")
            changes[op.key] = None if op.remove else op.value
        for key in java_hash_map_order(changes):
            value = changes[key]
            if value is not None:
                _check_value(entity, key, value)
        if not validate_only:
            ClientQuotas(ctx.broker.store).alter(entity, changes)
            log.info("broker %s: quotas of %s changed: %s", ctx.broker_id, entity, changes)
    except RefusedError as exc:
        return entity, exc.code, str(exc)
    except (StoreError, LayoutError) as exc:
        return entity, errors.UNKNOWN_SERVER_ERROR, f"the quotas were not written: {exc}"
    return entity, errors.NONE, None


def _alter(ctx: BrokerContext, body: Any) -> list[Any]:
    allowed = cluster_allowed(ctx, AclOperation.ALTER_CONFIGS)
    results: dict[Any, tuple[list[tuple[str, str | None]], int, str | None]] = {}
    for entry in body.entries:
        given = {data.entity_type: data.entity_name for data in entry.entity}
        key = tuple(sorted(given.items()))
        shown = [(t, given[t]) for t in _sized_map_order(list(given))]
        if not allowed:
            code = CLUSTER_AUTHORIZATION_FAILED
            results[key] = (shown, code, AUTHORIZATION_MESSAGES[code])
            continue
        if key in results:  # Kafka keys its answers by entity: the first was applied
            entity = ClientQuotaEntity(key)
            results[key] = (shown, errors.INVALID_REQUEST, f"Ignoring duplicate entity {entity}")
            continue
        _, code, message = _alter_entry(ctx, entry, bool(body.validate_only))
        results[key] = (shown, code, message)
    return [
        AlterEntry(error_code=code, error_message=message,
                   entity=[AlterEntity(entity_type=t, entity_name=n) for t, n in shown])
        for shown, code, message in results.values()
    ]  # fmt: skip


async def handle_describe_client_quotas(ctx: BrokerContext, request: Request) -> Any:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE_CONFIGS):
        code = CLUSTER_AUTHORIZATION_FAILED
        return DescribeResponse(throttle_time_ms=0, error_code=code,
                                error_message=AUTHORIZATION_MESSAGES[code], entries=None)  # fmt: skip
    return await ctx.blocking(lambda: _describe(ctx, request.body))


async def handle_alter_client_quotas(ctx: BrokerContext, request: Request) -> Any:
    entries = await ctx.blocking(lambda: _alter(ctx, request.body))
    return AlterResponse(throttle_time_ms=0, entries=entries)
