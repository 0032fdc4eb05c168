"""Kafka's error codes that ``coordkit serve`` answers with (``org.apache.kafka.common.protocol.Errors``)."""

from __future__ import annotations

from coordkit.engine.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    TopicExistsError,
)
from coordkit.errors import LayoutError

NONE = 0
UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43


def topic_creation_error(exc: Exception) -> int:
    """The code CreateTopics answers for what topic creation raised."""
    if isinstance(exc, TopicExistsError):
        return TOPIC_ALREADY_EXISTS
    if isinstance(exc, InvalidReplicationFactorError):
        return INVALID_REPLICATION_FACTOR
    if isinstance(exc, InvalidPartitionsError):
        return INVALID_PARTITIONS
    if isinstance(exc, InvalidReplicaAssignmentError):
        return INVALID_REPLICA_ASSIGNMENT
    if isinstance(exc, LayoutError):
        return INVALID_TOPIC_EXCEPTION
    return UNKNOWN_SERVER_ERROR
