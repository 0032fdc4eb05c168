"""Consumer groups on the engine: Kafka's classic group protocol, and Kafka 4's consumer group
protocol (KIP-848) in :mod:`~coordkit.engine.groups.modern`.

* :mod:`~coordkit.engine.groups.protocol` — requests, responses, error codes, group states;
* :mod:`~coordkit.engine.groups.membership` — a group's members and state machine;
* :mod:`~coordkit.engine.groups.coordinator` — the coordinator each broker hosts for the
  offsets-topic partitions it leads;
* :mod:`~coordkit.engine.groups.metadata` — persisted group metadata (``/coordkit/groups/G``);
* :mod:`~coordkit.engine.groups.planning` — the leader's assignment, eager versus cooperative;
* :mod:`~coordkit.engine.groups.topic_metadata` — the metadata an assignment was computed from,
  and the watches that tell the leader when it changed;
* :mod:`~coordkit.engine.groups.consumer` — the consumer client;
* :mod:`~coordkit.engine.groups.events`, :mod:`~coordkit.engine.groups.history` — observers, and
  the recorder that checks the protocol's invariants.
"""

from coordkit.engine.groups.config import ConsumerConfig
from coordkit.engine.groups.consumer import (
    CommitFailedError,
    Consumer,
    ConsumerError,
    ConsumerState,
)
from coordkit.engine.groups.coordinator import GroupCoordinator
from coordkit.engine.groups.events import (
    AssignmentRound,
    GroupObserver,
    GroupObservers,
    RebalanceCompleted,
)
from coordkit.engine.groups.history import (
    ChangeKind,
    GroupHistory,
    GroupInvariantError,
    OwnershipChange,
    Unavailability,
)
from coordkit.engine.groups.hosting import offsets_partition_for
from coordkit.engine.groups.metadata import GROUPS_ROOT, GroupMetadata, group_path
from coordkit.engine.groups.protocol import (
    ErrorCode,
    GroupDescription,
    GroupListing,
    GroupState,
    MemberDescription,
    Subscription,
)
from coordkit.strategies.elections import GroupLeaderSelection, LeaderCandidate

__all__ = [
    "GROUPS_ROOT",
    "AssignmentRound",
    "ChangeKind",
    "CommitFailedError",
    "Consumer",
    "ConsumerConfig",
    "ConsumerError",
    "ConsumerState",
    "ErrorCode",
    "GroupCoordinator",
    "GroupDescription",
    "GroupHistory",
    "GroupInvariantError",
    "GroupLeaderSelection",
    "GroupListing",
    "GroupMetadata",
    "GroupObserver",
    "GroupObservers",
    "GroupState",
    "LeaderCandidate",
    "MemberDescription",
    "OwnershipChange",
    "RebalanceCompleted",
    "Subscription",
    "Unavailability",
    "group_path",
    "offsets_partition_for",
]
