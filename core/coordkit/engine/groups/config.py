"""A group consumer's settings (Kafka's consumer config names; times in seconds)."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import field, frozen, validators

from coordkit.kafka.model import validate_topic_name


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _topic_names(value: Iterable[str]) -> tuple[str, ...]:
    """Subscribed topics in the given order, each once; raises ``ValueError`` naming a bad one."""
    if isinstance(value, str):
        raise ValueError(f"topics: give a list of topic names, not the string {value!r}")
    topics = tuple(dict.fromkeys(value))
    if not topics:
        raise ValueError("topics: give at least one topic")
    for topic in topics:
        try:
            validate_topic_name(topic)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"topics: {topic!r} is not a valid topic name: {exc}") from None
    return topics


def _some_assignors(_: object, attribute: object, value: tuple[str, ...]) -> None:
    # Whether each is known is checked where the strategies are: the consumer's constructor.
    if not value:
        raise ValueError("assignors: give at least one assignor name")


@frozen
class ConsumerConfig:
    """A consumer's settings (Kafka's names; times in seconds).

    :param assignors: ``partition.assignment.strategy``, most preferred first.
    :param group_instance_id: ``group.instance.id`` (static membership).
    :param session_timeout: ``session.timeout.ms``.
    :param heartbeat_interval: ``heartbeat.interval.ms`` (below the session timeout).
    :param rebalance_timeout: ``max.poll.interval.ms``, the rebalance timeout it joins with.
    :param retry_backoff: ``retry.backoff.ms``.
    :param metadata_max_age: ``metadata.max.age.ms``: how often the group leader re-reads the
        partition counts of the group's topics even without a watch event (the safety net).
    """

    group_id: str = field(validator=validators.min_len(1))
    topics: tuple[str, ...] = field(converter=_topic_names, validator=validators.min_len(1))
    assignors: tuple[str, ...] = field(
        default=("range",), converter=_names, validator=_some_assignors
    )
    group_instance_id: str | None = None
    session_timeout: float = field(default=10.0, validator=validators.gt(0.0))
    heartbeat_interval: float = field(default=3.0, validator=validators.gt(0.0))
    rebalance_timeout: float = field(default=60.0, validator=validators.gt(0.0))
    client_id: str = ""
    retry_backoff: float = field(default=0.05, validator=validators.gt(0.0))
    metadata_max_age: float = field(default=300.0, validator=validators.gt(0.0))

    def __attrs_post_init__(self) -> None:
        if self.heartbeat_interval >= self.session_timeout:
            raise ValueError(
                f"heartbeat_interval ({self.heartbeat_interval}s) must be below session_timeout "
                f"({self.session_timeout}s)"
            )
