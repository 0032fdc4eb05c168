"""AlterConfigs (v0-2) and IncrementalAlterConfigs (v0-1): each resource's change checked whole,
as Kafka checks it, before anything is written; one refused resource leaves the others alone.

* TOPIC: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION; a name that is not one of Kafka's topic
  configs, or a value its validator refuses, INVALID_CONFIG with Kafka's message; the new
  overrides replace ``/config/topics/T`` and a change notification is written (the brokers
  apply them without a restart).
* BROKER ``N`` or ``""`` (``<default>``): a config Kafka cannot change dynamically is
  INVALID_REQUEST (``Cannot update these configs dynamically: [...]``); a known one with a bad
  value INVALID_CONFIG; a name Kafka does not know is kept, as Kafka 4.4 keeps it.
* GROUP and CLIENT_METRICS: checked whole after the change, as Kafka 4.4 (:mod:`.groups`).
* BROKER_LOGGER ``N`` (IncrementalAlterConfigs only): a logger's level, set or given back to its
  parent's, at once and never stored (:mod:`.loggers`).
* IncrementalAlterConfigs' operations: SET, DELETE, APPEND and SUBTRACT (lists only; APPEND to a
  config with no override starts from its current value); a name twice: INVALID_REQUEST.

``validate_only`` runs every check and writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from coordkit.engine.configs import BROKERS, CLIENT_METRICS, GROUPS, TOPICS, ConfigAdmin
from coordkit.engine.errors import UnknownTopicError
from coordkit.errors import LayoutError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.acls import AclOperation
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.configs.describe import broker_sources, check_topic_name
from coordkit.serve.apis.configs.errors import RefusedError
from coordkit.serve.apis.configs.groups import (
    check_client_metrics,
    check_group,
    client_metrics_entity,
    group_entity,
)
from coordkit.serve.apis.configs.loggers import alter_loggers
from coordkit.serve.apis.configs.values import (
    BROKER,
    BROKER_LOGGER,
    GROUP,
    TOPIC,
    topic_value,
)
from coordkit.serve.apis.configs.values import CLIENT_METRICS as CLIENT_METRICS_RESOURCE
from coordkit.serve.authorization import config_refusal
from coordkit.serve.config_catalogue import BROKER_KEYS, TOPIC_KEYS, InvalidConfigValueError
from coordkit.serve.context import BrokerContext

log = logging.getLogger("coordkit.serve")

ALTER_VERSIONS = (0, 2)
INCREMENTAL_VERSIONS = (0, 1)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATIONS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def _entity(resource_type: int, name: str) -> tuple[str, str]:
    """The config entity a resource names: (``topics``, T) or (``brokers``, N / <default>)."""
    if resource_type == TOPIC:
        check_topic_name(name)
        return TOPICS, name
    if resource_type == BROKER:
        if not name:
            return BROKERS, layout.DEFAULT_BROKER
        if not name.isdigit():
            raise RefusedError(errors.INVALID_REQUEST, f"Invalid broker name {name}")
        return BROKERS, str(int(name))
    if resource_type == GROUP:
        return group_entity(name)
    if resource_type == CLIENT_METRICS_RESOURCE:
        return client_metrics_entity(name)
    raise RefusedError(errors.INVALID_REQUEST, f"Unknown resource type {resource_type}")


def _check(entity_type: str, changed: Mapping[str, str | None]) -> None:
    """Kafka's checks of the configs a request sets (``None``: removed)."""
    if entity_type == TOPICS:
        for name, text in changed.items():
            key = TOPIC_KEYS.get(name)
            if key is None:
                raise RefusedError(errors.INVALID_CONFIG, f"Unknown topic config name: {name}")
            if text is not None:
                _parse(key.parse, text)
        return
    static = [n for n in changed if n in BROKER_KEYS and BROKER_KEYS[n].read_only]
    if static:
        raise RefusedError(
            errors.INVALID_REQUEST,
            f"Cannot update these configs dynamically: [{', '.join(static)}]",
        )
    for name, text in changed.items():
        if name in BROKER_KEYS and text is not None:
            _parse(BROKER_KEYS[name].parse, text)


def _parse(parse: Any, text: str) -> None:
    try:
        parse(text)
    except InvalidConfigValueError as exc:
        raise RefusedError(errors.INVALID_CONFIG, str(exc)) from None


def _current(ctx: BrokerContext, entity_type: str, name: str) -> dict[str, str]:
    try:
        return ConfigAdmin(ctx.broker.store).read(entity_type, name)
    except UnknownTopicError as exc:
        raise RefusedError(errors.UNKNOWN_TOPIC_OR_PARTITION, str(exc)) from None
    except LayoutError:
        return {}  # a node that does not decode is replaced whole


def _no_duplicates(names: Iterable[str]) -> None:
    listed = list(names)
    if len(set(listed)) != len(listed):
        raise RefusedError(errors.INVALID_REQUEST, "Error due to duplicate config keys")


def _list_base(ctx: BrokerContext, entity_type: str, name: str, current: Mapping[str, str]) -> str:
    """The value APPEND and SUBTRACT start from: the override, else the current value."""
    if name in current:
        return current[name]
    if entity_type == TOPICS:
        return topic_value(TOPIC_KEYS[name], {}, broker_sources(ctx, None))
    return broker_sources(ctx, None).value(name) or ""


def _incremental(
    ctx: BrokerContext, entity_type: str, name: str, configs: list[Any]
) -> tuple[dict[str, str], dict[str, str | None]]:
    _no_duplicates(c.name for c in configs)
    current = _current(ctx, entity_type, name)
    updated = dict(current)
    changed: dict[str, str | None] = {}
    for config in configs:
        operation = config.config_operation
        if operation not in _OPERATIONS:
            raise RefusedError(errors.INVALID_REQUEST, f"Unknown operation type {operation}")
        if operation == DELETE:
            updated.pop(config.name, None)
            changed[config.name] = None
            continue
        if config.value is None:
            raise RefusedError(errors.INVALID_REQUEST,
                               f"Null value not supported for : {config.name}")  # fmt: skip
        if operation == SET:
            updated[config.name] = changed[config.name] = config.value
            continue
        keys = TOPIC_KEYS if entity_type == TOPICS else BROKER_KEYS
        key = keys.get(config.name)
        if key is None or key.type != "list":
            raise RefusedError(
                errors.INVALID_CONFIG,
                f"Can't {_OPERATIONS[operation]} to key {config.name} because its type is not "
                "LIST.",
            )
        items = [i for i in _list_base(ctx, entity_type, config.name, current).split(",") if i]
        given = [i.strip() for i in config.value.split(",") if i.strip()]
        if operation == APPEND:
            items += [i for i in given if i not in items]
        else:
            items = [i for i in items if i not in given]
        updated[config.name] = changed[config.name] = ",".join(items)
    return updated, changed


def _alter_resource(ctx: BrokerContext, resource: Any, validate_only: bool, incremental: bool
                    ) -> tuple[int, str | None]:  # fmt: skip
    try:
        if resource.resource_type == BROKER_LOGGER and incremental:
            _no_duplicates(c.name for c in resource.configs)
            alter_loggers(ctx.broker_id, resource.resource_name, resource.configs, validate_only)
            return errors.NONE, None
        entity_type, name = _entity(resource.resource_type, resource.resource_name)
        if incremental:
            updated, changed = _incremental(ctx, entity_type, name, resource.configs)
        else:
            _no_duplicates(c.name for c in resource.configs)
            _current(ctx, entity_type, name)  # the topic exists
            changed = {c.name: c.value for c in resource.configs}
            updated = {k: v for k, v in changed.items() if v is not None}
        if entity_type == GROUPS:
            check_group(ctx, updated)
        elif entity_type == CLIENT_METRICS:
            check_client_metrics(updated)
        else:
            _check(entity_type, changed)
        if not validate_only:
            ConfigAdmin(ctx.broker.store).write(entity_type, name, updated)
            log.info("broker %s: configs of %s/%s now %s",
                     ctx.broker_id, entity_type, name, updated)  # fmt: skip
    except RefusedError as exc:
        return exc.code, str(exc)
    except (StoreError, LayoutError) as exc:
        return errors.UNKNOWN_SERVER_ERROR, f"the configs were not written: {exc}"
    return errors.NONE, None


def _responses(ctx: BrokerContext, body: Any, incremental: bool) -> list[Any]:
    Response = messages.IncrementalAlterConfigsResponse if incremental else (
        messages.AlterConfigsResponse)  # fmt: skip
    Entry = Response.AlterConfigsResourceResponse  # type: ignore[attr-defined]
    out: list[Any] = []
    refused: list[Any] = []
    for resource in body.resources:
        # Kafka's KafkaApis: AlterConfigs on the topic or the cluster, the refused answered last.
        denied = config_refusal(ctx, resource.resource_type, resource.resource_name,
                                AclOperation.ALTER_CONFIGS)  # fmt: skip
        code, message = (denied, None) if denied is not None else _alter_resource(
            ctx, resource, bool(body.validate_only), incremental)  # fmt: skip
        (out if denied is None else refused).append(
            Entry(error_code=code, error_message=message, resource_type=resource.resource_type,
                  resource_name=resource.resource_name))  # fmt: skip
    return out + refused


async def handle_alter_configs(ctx: BrokerContext, request: Request) -> Any:
    responses = await ctx.blocking(lambda: _responses(ctx, request.body, incremental=False))
    return messages.AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def handle_incremental_alter_configs(ctx: BrokerContext, request: Request) -> Any:
    responses = await ctx.blocking(lambda: _responses(ctx, request.body, incremental=True))
    return messages.IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
