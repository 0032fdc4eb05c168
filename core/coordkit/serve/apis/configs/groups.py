"""Kafka 4's GROUP and CLIENT_METRICS config resources, described and altered as Kafka 4.4 does.

* GROUP ``g``: the group configs of :data:`~coordkit.serve.config_catalogue.GROUP_KEYS` (and an
  internal one whose broker config is given), each its override (GROUP_CONFIG), else the broker
  config it overrides, from where the broker has it (its synonyms: the cluster-wide dynamic
  broker configs, the ones it started with, Kafka's default);
  kept in ``/config/groups/<g>`` (:mod:`coordkit.engine.group_configs` reads them for the
  coordinators). An alter is checked as Kafka's ``GroupConfig.validate`` checks the group's
  configs after it: known names, the values' types and validators, then the ranges the broker's
  configs set (``group.consumer.min.session.timeout.ms``...), each refusal with Kafka's message.
* CLIENT_METRICS ``s``: a subscription's ``interval.ms``, ``match`` and ``metrics``
  (CLIENT_METRICS_CONFIG when set), checked as Kafka's ``ClientMetricsConfigs.validate``; kept
  in ``/config/client-metrics/<s>``. coordkit does not push metrics (no GetTelemetry apis): the
  subscriptions are stored and described only.

Lists (APPEND, SUBTRACT) are refused on both, as Kafka 4.4 refuses them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from coordkit.engine.configs import BROKERS, CLIENT_METRICS, GROUPS, ConfigAdmin
from coordkit.errors import LayoutError
from coordkit.kafka import layout
from coordkit.serve import errors
from coordkit.serve.apis.configs.errors import RefusedError
from coordkit.serve.apis.configs.values import Entry, canonical
from coordkit.serve.config_catalogue import (
    CLIENT_METRICS_KEYS,
    GROUP_DEFINITION_ORDER,
    GROUP_KEYS,
    INTERNAL_GROUP_KEYS,
    InvalidConfigValueError,
    KafkaConfigKey,
)
from coordkit.serve.context import BrokerContext

# Kafka's ConfigSource ids of these resources.
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
CLIENT_METRICS_CONFIG = 7
GROUP_CONFIG = 8

ALL_GROUP_KEYS: Mapping[str, KafkaConfigKey] = {**GROUP_KEYS, **INTERNAL_GROUP_KEYS}

#: The ranges ``GroupConfig.validateValues`` checks, in its order: config → (low, high), each
#: a broker config's name and Kafka's default of it (``None``: no bound on that side).
_RANGES: tuple[tuple[str, tuple[str, int] | None, tuple[str, int] | None], ...] = (
    ("consumer.heartbeat.interval.ms", ("group.consumer.min.heartbeat.interval.ms", 5000),
     ("group.consumer.max.heartbeat.interval.ms", 15000)),
    ("consumer.session.timeout.ms", ("group.consumer.min.session.timeout.ms", 45000),
     ("group.consumer.max.session.timeout.ms", 60000)),
    ("consumer.assignment.interval.ms", ("", 0), ("", 15000)),
    ("share.heartbeat.interval.ms", ("group.share.min.heartbeat.interval.ms", 5000),
     ("group.share.max.heartbeat.interval.ms", 15000)),
    ("share.session.timeout.ms", ("group.share.min.session.timeout.ms", 45000),
     ("group.share.max.session.timeout.ms", 60000)),
    ("share.record.lock.duration.ms", ("group.share.min.record.lock.duration.ms", 15000),
     ("group.share.max.record.lock.duration.ms", 60000)),
    ("share.delivery.count.limit", ("group.share.min.delivery.count.limit", 2),
     ("group.share.max.delivery.count.limit", 10)),
    ("share.partition.max.record.locks", ("group.share.min.partition.max.record.locks", 100),
     ("group.share.max.partition.max.record.locks", 4000)),
    ("share.assignment.interval.ms", ("", 0), ("", 15000)),
    ("streams.heartbeat.interval.ms", ("group.streams.min.heartbeat.interval.ms", 5000),
     ("group.streams.max.heartbeat.interval.ms", 15000)),
    ("streams.session.timeout.ms", ("group.streams.min.session.timeout.ms", 45000),
     ("group.streams.max.session.timeout.ms", 60000)),
    ("streams.num.standby.replicas", None, ("group.streams.max.standby.replicas", 2)),
    ("streams.assignment.interval.ms", ("", 0), ("", 15000)),
    ("streams.task.offset.interval.ms", ("", 15000), None),
    ("streams.num.warmup.replicas", None, ("group.streams.max.warmup.replicas", 20)),
)  # fmt: skip
_SESSIONS = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)
_ISO_DURATION = re.compile(
    r"P(?:\d+D)?(?:T(?=\d)(?:\d+H)?(?:\d+M)?(?:\d+(?:[.,]\d{0,9})?S)?)?", re.IGNORECASE
)
#: ``ClientMetricsConfigs``' match selectors.
_MATCH_SELECTORS = ("client_instance_id", "client_id", "client_software_name",
                    "client_software_version", "client_source_address", "client_source_port")  # fmt: skip


def _broker_int(ctx: BrokerContext, bound: tuple[str, int]) -> int:
    name, default = bound
    text = ctx.settings.static_configs.get(name) if name else None
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _broker_entries(ctx: BrokerContext, key: KafkaConfigKey, cluster: Mapping[str, str]
                    ) -> list[Entry]:  # fmt: skip
    """The broker's values of the config ``key`` overrides, from each source, Kafka's default
    last (a group config named as its broker config has only the default)."""
    synonym = key.synonyms[0][0]
    entries = []
    if synonym != key.name:
        for source, given in ((DYNAMIC_DEFAULT_BROKER_CONFIG, cluster),
                              (STATIC_BROKER_CONFIG, ctx.settings.static_configs)):  # fmt: skip
            text = given.get(synonym)
            if text is not None:
                if synonym == "group.streams.assignors":
                    text = text.split(",")[0].strip()
                entries.append(Entry(synonym, canonical(key, text), source))
    entries.append(Entry(synonym, key.default or "", DEFAULT_CONFIG))
    return entries


def _broker_value(ctx: BrokerContext, key: KafkaConfigKey) -> str:
    """The value of ``key`` a group without an override has."""
    cluster = _read(ctx, BROKERS, layout.DEFAULT_BROKER)
    return _broker_entries(ctx, key, cluster)[0].value or ""


def _read(ctx: BrokerContext, entity_type: str, name: str) -> dict[str, str]:
    try:
        return ConfigAdmin(ctx.broker.store).read(entity_type, name)
    except LayoutError:
        return {}  # a node another writer broke: the defaults hold


def describe_group(ctx: BrokerContext, name: str, wanted: Callable[[str], bool],
                   body: Any, result: Callable[..., Any]) -> list[Any]:  # fmt: skip
    if not name:
        raise RefusedError(errors.INVALID_REQUEST, "Group name must not be empty")
    overrides = _read(ctx, GROUPS, name)
    cluster = _read(ctx, BROKERS, layout.DEFAULT_BROKER)
    given = ctx.settings.static_configs
    internal = [k for k in INTERNAL_GROUP_KEYS.values() if k.synonyms[0][0] in given]
    out = []
    for key in [*internal, *GROUP_KEYS.values()]:
        if not wanted(key.name):
            continue
        entries = _broker_entries(ctx, key, cluster)
        if key.name in overrides:
            entries.insert(0, Entry(key.name, canonical(key, overrides[key.name]), GROUP_CONFIG))
        out.append(result(key, entries, body))
    return out


def describe_client_metrics(ctx: BrokerContext, name: str, wanted: Callable[[str], bool],
                            body: Any, result: Callable[..., Any]) -> list[Any]:  # fmt: skip
    if not name:
        raise RefusedError(errors.INVALID_REQUEST,
                           "Client metrics subscription name must not be empty")  # fmt: skip
    overrides = _read(ctx, CLIENT_METRICS, name)
    out = []
    for key in CLIENT_METRICS_KEYS.values():
        if wanted(key.name):
            if key.name in overrides:
                value = canonical(key, overrides[key.name])
                entries = [Entry(key.name, value, CLIENT_METRICS_CONFIG)]
                out.append(result(key, entries, body))
            else:
                out.append(result(key, [], body, value=key.default))
    return out


def group_entity(name: str) -> tuple[str, str]:
    if not name:
        raise RefusedError(errors.INVALID_REQUEST, "Default group resources are not allowed.")
    return GROUPS, name


def client_metrics_entity(name: str) -> tuple[str, str]:
    if not name:
        raise RefusedError(errors.INVALID_REQUEST, "Subscription name can't be empty")
    return CLIENT_METRICS, name


def _parse(key: KafkaConfigKey, text: str) -> Any:
    try:
        return key.parse(text)
    except InvalidConfigValueError as exc:
        raise RefusedError(errors.INVALID_CONFIG, str(exc)) from None


def _check_reset(text: str) -> None:
    value = text.strip()
    lowered = value.lower()
    if lowered in ("earliest", "latest"):
        return
    if lowered.startswith("by_duration:") and _ISO_DURATION.fullmatch(value[12:].strip()):
        return
    raise RefusedError(
        errors.INVALID_CONFIG,
        f"Invalid value {text} for configuration share.auto.offset.reset: Invalid value `{text}`"
        " for configuration share.auto.offset.reset. The value must be either 'earliest', "
        "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
    )


def check_group(ctx: BrokerContext, configs: Mapping[str, str]) -> None:
    """Kafka's ``GroupConfig.validate`` of a group's configs after the change."""
    for config in configs:
        if config not in ALL_GROUP_KEYS:
            raise RefusedError(errors.INVALID_CONFIG, f"Unknown group config name: {config}")
    tags = configs.get("streams.rack.aware.assignment.tags")
    if tags is not None and tags.strip():
        listed = re.split(r"\s*,\s*", tags.strip())
        if len(set(listed)) != len(listed):
            raise RefusedError(errors.INVALID_CONFIG,
                               "streams.rack.aware.assignment.tags must not contain duplicate "
                               "tag keys.")  # fmt: skip
    parsed: dict[str, Any] = {}
    for config in GROUP_DEFINITION_ORDER:
        if config in configs:
            if config == "share.auto.offset.reset":
                _check_reset(configs[config])
            parsed[config] = _parse(ALL_GROUP_KEYS[config], configs[config])
    for config, low, high in _RANGES:
        if config not in parsed:
            continue
        value = parsed[config]
        lowest = None if low is None else _broker_int(ctx, low)
        highest = None if high is None else _broker_int(ctx, high)
        if lowest is not None and highest is not None:
            if not lowest <= value <= highest:
                raise RefusedError(errors.INVALID_CONFIG, f"{config} must be in the range "
                                   f"{lowest} to {highest} inclusive.")  # fmt: skip
        elif highest is not None and value > highest:
            raise RefusedError(errors.INVALID_CONFIG,
                               f"{config} must be less than or equal to {highest}")  # fmt: skip
        elif lowest is not None and value < lowest:
            raise RefusedError(errors.INVALID_CONFIG,
                               f"{config} must be greater than or equal to {lowest}")  # fmt: skip
    assignor = parsed.get("streams.assignor.name")
    if assignor is not None:
        registered = [a.strip() for a in ctx.settings.static_configs.get(
            "group.streams.assignors", "sticky").split(",") if a.strip()]  # fmt: skip
        if assignor not in registered:
            raise RefusedError(errors.INVALID_CONFIG,
                               f"streams.assignor.name '{assignor}' is not a registered task "
                               f"assignor. Registered assignors are: [{', '.join(registered)}].")  # fmt: skip
    for session, heartbeat in _SESSIONS:
        if session in parsed or heartbeat in parsed:
            session_ms = parsed.get(session) or int(_broker_value(ctx, GROUP_KEYS[session]))
            heartbeat_ms = parsed.get(heartbeat) or int(_broker_value(ctx, GROUP_KEYS[heartbeat]))
            if session_ms <= heartbeat_ms:
                raise RefusedError(errors.INVALID_CONFIG,
                                   f"{session} must be greater than {heartbeat}")  # fmt: skip
    dlq = parsed.get("errors.deadletterqueue.topic.name")
    if dlq and dlq.startswith("__"):
        raise RefusedError(errors.INVALID_CONFIG, "errors.deadletterqueue.topic.name: DLQ topic "
                           "name must not start with '__'")  # fmt: skip


def check_client_metrics(configs: Mapping[str, str]) -> None:
    """Kafka's ``ClientMetricsConfigs.validate`` of a subscription after the change."""
    for config in configs:
        if config not in CLIENT_METRICS_KEYS:
            raise RefusedError(errors.INVALID_REQUEST,
                               f"Unknown client metrics configuration: {config}")  # fmt: skip
    parsed = {c: _parse(CLIENT_METRICS_KEYS[c], t) for c, t in configs.items()}
    interval = parsed.get("interval.ms")
    if interval is not None and not 100 <= interval <= 3_600_000:
        raise RefusedError(errors.INVALID_REQUEST, f"Invalid value {interval} for interval.ms, "
                           "interval must be between 100 and 3600000 (1 hour)")  # fmt: skip
    for pattern in parsed.get("match", ()):
        selector, sep, regex = pattern.partition("=")
        valid = bool(sep) and selector.strip() in _MATCH_SELECTORS and bool(regex.strip())
        if valid:
            try:
                re.compile(regex.strip())
            except re.error:
                valid = False
        if not valid:
            raise RefusedError(errors.INVALID_CONFIG,
                               f"Illegal client matching pattern: {pattern}")  # fmt: skip
