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
BROKER_NOT_AVAILABLE = 8
MESSAGE_TOO_LARGE = 10
STALE_CONTROLLER_EPOCH = 11
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
INVALID_REQUIRED_ACKS = 21
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
#: Transactions (issue 38): a producer id that is not the transactional id's, a timeout past
#: ``transaction.max.timeout.ms``, a transaction still completing, a marker of an older
#: coordinator, a producer of an older epoch fenced by InitProducerId, an unknown transactional id.
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTION_COORDINATOR_FENCED = 52
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
GROUP_ID_NOT_FOUND = 69
TOPIC_DELETION_DISABLED = 73
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNSUPPORTED_COMPRESSION_TYPE = 76
STALE_BROKER_EPOCH = 77
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
OFFSET_NOT_AVAILABLE = 78
NON_EMPTY_GROUP = 68
POLICY_VIOLATION = 44
KAFKA_STORAGE_ERROR = 56
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85
GROUP_SUBSCRIBED_TO_TOPIC = 86
MISMATCHED_ENDPOINT_TYPE = 114
UNSUPPORTED_ENDPOINT_TYPE = 115
UNKNOWN_TOPIC_ID = 100
BROKER_ID_NOT_REGISTERED = 102
INCONSISTENT_TOPIC_ID = 103
REBOOTSTRAP_REQUIRED = 129
INVALID_RECORD = 87
UNSTABLE_OFFSET_COMMIT = 88
#: Share groups (KIP-932): an acknowledgement of a record its member does not hold; a share
#: session unknown, or of another epoch; the limit of share sessions reached.
INVALID_RECORD_STATE = 121
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
FENCED_STATE_EPOCH = 124
SHARE_SESSION_LIMIT_REACHED = 133


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
    if isinstance(exc, ValueError):
        # What the model refuses of a replica assignment (partitions not numbered from 0 on, a
        # broker named twice, a partition without replicas): a request's explicit assignment.
        return INVALID_REPLICA_ASSIGNMENT
    return UNKNOWN_SERVER_ERROR
