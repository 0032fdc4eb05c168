"""Settings of the legacy consumer, named after Kafka 0.8's consumer configuration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from attrs import validators

#: Kafka's ``rebalance.backoff.ms`` and ``rebalance.max.retries`` defaults.
DEFAULT_REBALANCE_BACKOFF_MS = 2000
DEFAULT_REBALANCE_MAX_RETRIES = 4
#: Kafka's ``auto.commit.interval.ms`` default.
DEFAULT_AUTO_COMMIT_INTERVAL_MS = 60_000


def _options(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


def _optional_name(_: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"{attribute.name} must be a non-empty string or None, got {value!r}")


@attrs.frozen
class LegacyConsumerConfig:
    """What a :class:`~coordkit.engine.legacy.LegacyConsumer` is configured with.

    :param rebalance_backoff_ms: ``rebalance.backoff.ms``: pause between failed rebalance attempts.
    :param rebalance_max_retries: ``rebalance.max.retries``: attempts per rebalance (Kafka's loop
        runs this many attempts in all) before it gives up.
    :param auto_commit_enable: ``auto.commit.enable``: commit consumed offsets before releasing
        partitions, periodically and on close.
    :param auto_commit_interval_ms: ``auto.commit.interval.ms``.
    :param consumer_id: ``consumer.id``: replaces the generated ``host-timestamp-uuid`` part.
    :param host: the host name in generated consumer ids (default: this machine's).
    :param offset_storage: the registered offset storage the consumer commits through (Kafka's
        ZooKeeper consumer wrote ``/consumers/G/offsets/T/P``: ``zookeeper``).
    :param offset_storage_options: options for that storage's factory.
    """

    rebalance_backoff_ms: int = attrs.field(
        default=DEFAULT_REBALANCE_BACKOFF_MS,
        validator=[validators.instance_of(int), validators.ge(0)],
    )
    rebalance_max_retries: int = attrs.field(
        default=DEFAULT_REBALANCE_MAX_RETRIES,
        validator=[validators.instance_of(int), validators.ge(1)],
    )
    auto_commit_enable: bool = attrs.field(default=True, validator=validators.instance_of(bool))
    auto_commit_interval_ms: int = attrs.field(
        default=DEFAULT_AUTO_COMMIT_INTERVAL_MS,
        validator=[validators.instance_of(int), validators.ge(1)],
    )
    consumer_id: str | None = attrs.field(default=None, validator=_optional_name)
    host: str | None = attrs.field(default=None, validator=_optional_name)
    offset_storage: str = attrs.field(default="zookeeper", validator=validators.instance_of(str))
    offset_storage_options: Mapping[str, Any] = attrs.field(factory=dict, converter=_options)

    @property
    def rebalance_backoff_s(self) -> float:
        return self.rebalance_backoff_ms / 1000

    @property
    def auto_commit_interval_s(self) -> float:
        return self.auto_commit_interval_ms / 1000
