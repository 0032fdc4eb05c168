"""Errors of the control-plane engine; each message names the broker, topic or partition."""

from __future__ import annotations

from coordkit.errors import CoordkitError


class EngineError(CoordkitError):
    """Base of the engine's own errors."""


class BrokerIdInUseError(EngineError):
    """Another live session already holds ``/brokers/ids/N``: two brokers share a broker id."""


class ControllerFencedError(EngineError):
    """A controller write failed its ``/controller_epoch`` check: a newer controller exists."""


class ControllerSessionEndedError(ControllerFencedError):
    """The session that won a controller term has ended, so the term has too."""


class StateConflictError(EngineError):
    """Partition state writes kept failing their version checks: the states moved under the
    controller faster than it could decide (the pass is tried again from the store)."""


class ControllerUnavailableError(EngineError):
    """No controller could serve a request (none elected, or not reachable in this process)."""


class BrokerNotAvailableError(EngineError):
    """A controlled shutdown asked for a broker the controller does not know as live (Kafka's
    BROKER_NOT_AVAILABLE)."""


class StaleBrokerEpochError(EngineError):
    """A request names an earlier registration of its broker (Kafka's STALE_BROKER_EPOCH)."""


class TopicExistsError(EngineError):
    """A topic of that name already exists."""


class UnknownTopicError(EngineError):
    """No topic of that name exists."""


class InvalidReplicationFactorError(EngineError, ValueError):
    """The replication factor is below 1 or above the number of brokers."""


class InvalidPartitionsError(EngineError, ValueError):
    """The partition count is below 1, or a partition increase does not increase it."""


class InvalidReplicaAssignmentError(EngineError, ValueError):
    """A placement request is inconsistent (e.g. rack information on only some brokers)."""
