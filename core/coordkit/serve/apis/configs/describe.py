"""DescribeConfigs (v1-4) as Kafka's ``ConfigHelper.describeConfigs`` answers it.

* TOPIC: Kafka 4.4's 37 topic configs (:data:`~coordkit.serve.config_catalogue.TOPIC_KEYS`),
  each with its value, source (TOPIC_CONFIG for an override in ``/config/topics/T``, else its
  broker synonym's STATIC_BROKER_CONFIG or DEFAULT_CONFIG), synonyms, type and flags; an unknown
  topic: UNKNOWN_TOPIC_OR_PARTITION.
* BROKER ``N`` (the broker asked): every broker config of
  :data:`~coordkit.serve.config_catalogue.BROKER_KEYS` from its sources (``/config/brokers/N``,
  ``/config/brokers/<default>``, ``--config``, defaults), read-only where Kafka cannot change it
  dynamically; BROKER ``""``: the cluster-wide dynamic configs only. Another broker's id:
  INVALID_REQUEST, as Kafka.
* BROKER_LOGGER ``N``: the process's loggers and their levels (:mod:`.loggers`).
* GROUP, CLIENT_METRICS: Kafka 4's group configs and client-metrics subscriptions
  (:mod:`.groups`).
* Other resource types: INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from coordkit.engine.configs import BROKERS, TOPICS, ConfigAdmin
from coordkit.engine.errors import UnknownTopicError
from coordkit.errors import LayoutError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.acls import AclOperation
from coordkit.kafka.model import validate_topic_name
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.configs.errors import RefusedError
from coordkit.serve.apis.configs.groups import describe_client_metrics, describe_group
from coordkit.serve.apis.configs.loggers import DYNAMIC_BROKER_LOGGER_CONFIG, describe_loggers
from coordkit.serve.apis.configs.values import (
    BROKER,
    BROKER_LOGGER,
    CLIENT_METRICS,
    DEFAULT_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    GROUP,
    RESOURCE_TYPES,
    TOPIC,
    BrokerSources,
    Entry,
    topic_entries,
    topic_value,
)
from coordkit.serve.authorization import AUTHORIZATION_MESSAGES, config_refusal
from coordkit.serve.classes import nested
from coordkit.serve.config_catalogue import BROKER_KEYS, TOPIC_KEYS, KafkaConfigKey
from coordkit.serve.context import BrokerContext

VERSIONS = (1, 4)

Response = messages.DescribeConfigsResponse
Result = nested(Response, "DescribeConfigsResult")
ConfigResult = nested(Result, "DescribeConfigsResourceResult")
Synonym = nested(ConfigResult, "DescribeConfigsSynonym")


def broker_sources(ctx: BrokerContext, broker: str | None) -> BrokerSources:
    """The broker configs of ``broker`` (``None``: what topics take, all but a broker's own
    dynamic configs, which coordkit does not apply to topics)."""
    admin = ConfigAdmin(ctx.broker.store)
    return BrokerSources(
        dynamic={} if broker is None else admin.read(BROKERS, broker),
        dynamic_default=admin.read(BROKERS, layout.DEFAULT_BROKER),
        static=ctx.settings.static_configs,
    )


def _entry(
    key: KafkaConfigKey | None,
    name: str,
    entries: list[Entry],
    value: str | None,
    synonyms: bool,
    documentation: bool,
) -> Any:
    return ConfigResult(
        name=name,
        value=value,
        read_only=key.read_only if key is not None else True,
        config_source=entries[0].source if entries else DEFAULT_CONFIG,
        is_sensitive=False,
        synonyms=[Synonym(name=e.name, value=e.value, source=e.source) for e in entries]
        if synonyms
        else [],
        config_type=key.config_type if key is not None else 0,
        documentation=(key.doc if key is not None else "") if documentation else None,
    )


def check_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: a name that cannot be a topic's is INVALID_TOPIC_EXCEPTION."""
    try:
        validate_topic_name(name)
    except ValueError as exc:
        raise RefusedError(errors.INVALID_TOPIC_EXCEPTION, str(exc)) from None


def _topic(ctx: BrokerContext, name: str, wanted: Callable[[str], bool], body: Any) -> list[Any]:
    check_topic_name(name)
    try:
        overrides = ConfigAdmin(ctx.broker.store).read(TOPICS, name)
    except (UnknownTopicError, LayoutError) as exc:
        if isinstance(exc, LayoutError) and ctx.broker.store.exists(layout.topic_path(name)):
            overrides = {}  # a config node another writer broke: the defaults hold
        else:
            raise RefusedError(errors.UNKNOWN_TOPIC_OR_PARTITION, "") from None
    broker = broker_sources(ctx, None)
    return [
        _entry(
            key,
            key.name,
            topic_entries(key, overrides, broker),
            topic_value(key, overrides, broker),
            body.include_synonyms,
            body.include_documentation,
        )
        for key in TOPIC_KEYS.values()
        if wanted(key.name)
    ]


def _broker(ctx: BrokerContext, name: str, wanted: Callable[[str], bool], body: Any) -> list[Any]:
    if name and name != str(ctx.broker_id):
        raise RefusedError(
            errors.INVALID_REQUEST,
            f"Unexpected broker id, expected {ctx.broker_id} or empty string, but received {name}",
        )
    sources = broker_sources(ctx, str(ctx.broker_id))
    out = []
    if not name:
        for config, value in sources.dynamic_default.items():
            if not wanted(config):
                continue
            entries = [e for e in sources.synonyms(config)
                       if e.source == DYNAMIC_DEFAULT_BROKER_CONFIG]  # fmt: skip
            key = BROKER_KEYS.get(config)
            out.append(_entry(key, config, entries, value, body.include_synonyms,
                              body.include_documentation))  # fmt: skip
        return out
    for key in BROKER_KEYS.values():
        if wanted(key.name):
            entries = sources.synonyms(key.name)
            found = entries[0].value if entries else None
            out.append(_entry(key, key.name, entries, found, body.include_synonyms,
                              body.include_documentation))  # fmt: skip
    return out


def created_topic_configs(
    ctx: BrokerContext, overrides: Mapping[str, str], entry: Any
) -> list[Any]:
    """A new topic's configs as CreateTopics v5+ answers them (``entry``: its
    ``CreatableTopicConfigs``): each with the value and source DescribeConfigs gives."""
    broker = broker_sources(ctx, None)
    out = []
    for key in TOPIC_KEYS.values():
        entries = topic_entries(key, overrides, broker)
        out.append(entry(name=key.name, value=topic_value(key, overrides, broker),
                         read_only=False, is_sensitive=False,
                         config_source=entries[0].source if entries else DEFAULT_CONFIG))  # fmt: skip
    return out


def _loggers(ctx: BrokerContext, name: str, wanted: Callable[[str], bool], body: Any) -> list[Any]:
    return [
        ConfigResult(
            name=logger,
            value=level,
            read_only=False,
            is_sensitive=False,
            synonyms=[],
            config_source=DYNAMIC_BROKER_LOGGER_CONFIG,
            config_type=0,
            documentation="" if body.include_documentation else None,
        )
        for logger, level in describe_loggers(ctx.broker_id, name, wanted)
    ]


def _catalogued(key: KafkaConfigKey, entries: list[Entry], body: Any, value: str | None = None
                ) -> Any:  # fmt: skip
    """A config of a group or a subscription: the first entry's value (``value``: none)."""
    return _entry(key, key.name, entries, entries[0].value if entries else value,
                  body.include_synonyms, body.include_documentation)  # fmt: skip


def _group(ctx: BrokerContext, name: str, wanted: Callable[[str], bool], body: Any) -> list[Any]:
    return describe_group(ctx, name, wanted, body, _catalogued)


def _client_metrics(ctx: BrokerContext, name: str, wanted: Callable[[str], bool], body: Any
                    ) -> list[Any]:  # fmt: skip
    return describe_client_metrics(ctx, name, wanted, body, _catalogued)


HANDLERS: Mapping[int, Callable[[BrokerContext, str, Callable[[str], bool], Any], list[Any]]] = {
    TOPIC: _topic,
    BROKER: _broker,
    BROKER_LOGGER: _loggers,
    GROUP: _group,
    CLIENT_METRICS: _client_metrics,
}


def _describe(ctx: BrokerContext, body: Any) -> list[Any]:
    results = []
    refused = []  # Kafka answers the resources the principal may not describe last
    for resource in body.resources:
        keys = resource.configuration_keys
        wanted: Callable[[str], bool] = (lambda _n: True) if not keys else set(keys).__contains__
        result = Result(error_code=errors.NONE, error_message="", configs=[],
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name)  # fmt: skip
        denied = config_refusal(ctx, resource.resource_type, resource.resource_name,
                                AclOperation.DESCRIBE_CONFIGS)  # fmt: skip
        if denied is not None:
            result.error_code, result.error_message = denied, AUTHORIZATION_MESSAGES[denied]
            refused.append(result)
            continue
        handler = HANDLERS.get(resource.resource_type)
        try:
            if handler is None:
                raise RefusedError(
                    errors.INVALID_REQUEST,
                    f"Unsupported resource type: {resource_type_name(resource.resource_type)}",
                )
            result.configs = handler(ctx, resource.resource_name, wanted, body)
        except RefusedError as exc:
            result.error_code = exc.code
            result.error_message = str(exc)
        except (StoreError, LayoutError) as exc:
            result.error_code = errors.UNKNOWN_SERVER_ERROR
            result.error_message = f"the configs were not read: {exc}"
        results.append(result)
    return results + refused


def resource_type_name(resource_type: int) -> str:
    return RESOURCE_TYPES.get(resource_type, "UNKNOWN")


async def handle_describe_configs(ctx: BrokerContext, request: Request) -> Any:
    results = await ctx.blocking(lambda: _describe(ctx, request.body))
    return Response(throttle_time_ms=0, results=results)
