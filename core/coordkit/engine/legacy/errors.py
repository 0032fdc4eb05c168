"""Errors of the legacy ZooKeeper consumer; each message names the group and the consumer."""

from __future__ import annotations

from coordkit.engine.errors import EngineError


class LegacyConsumerError(EngineError):
    """Base of the legacy consumer's own errors."""


class ConsumerIdInUseError(LegacyConsumerError):
    """Another live session holds ``/consumers/G/ids/C``: two consumers share a consumer id."""


class LegacyRebalanceFailedError(LegacyConsumerError):
    """Every attempt of a rebalance failed (Kafka's ``ConsumerRebalanceFailedException``).

    :param group_id: the group.
    :param consumer_id: the consumer that gave up.
    :param attempts: attempts made (``rebalance.max.retries``).
    :param reason: why the last attempt failed.
    """

    def __init__(self, group_id: str, consumer_id: str, attempts: int, reason: str):
        self.group_id = group_id
        self.consumer_id = consumer_id
        self.attempts = attempts
        self.reason = reason
        super().__init__(
            f"consumer {consumer_id!r} of group {group_id!r} can't rebalance after {attempts} "
            f"attempts (rebalance.max.retries); last attempt: {reason}"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.group_id, self.consumer_id, self.attempts, self.reason))
