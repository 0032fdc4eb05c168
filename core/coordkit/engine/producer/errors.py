"""Errors a send can end with; each names the topic, partition and broker concerned."""

from __future__ import annotations

from coordkit.engine.errors import EngineError


class ProducerError(EngineError):
    """Base of the producer's errors."""


class RetriableSendError(ProducerError):
    """A send failed in a way fresh metadata may cure (Kafka's retriable errors)."""


class NotLeaderError(RetriableSendError):
    """``NOT_LEADER_OR_FOLLOWER``: the broker sent to no longer leads the partition."""


class LeaderNotAvailableError(RetriableSendError):
    """``LEADER_NOT_AVAILABLE``: the partition has no live leader (its state says ``-1``)."""


class UnknownTopicOrPartitionError(RetriableSendError):
    """``UNKNOWN_TOPIC_OR_PARTITION``: no such topic or partition (yet) in the metadata."""


class BrokerUnavailableError(ProducerError):
    """The broker a send must go to cannot be reached (it is down, or this producer's broker
    discovery does not connect to it)."""


class ProducerClosedError(ProducerError):
    """The producer was closed."""
