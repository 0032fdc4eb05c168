"""Partition leader election strategies: Kafka's five, each exactly as its controller decides."""

from __future__ import annotations

import attrs

from coordkit.strategies.elections import (
    ElectionKind,
    LeaderAndIsr,
    PartitionElectionInput,
    controlled_shutdown_election,
    offline_election,
    preferred_replica_election,
    reassign_election,
)


@attrs.frozen
class OfflineElection:
    """The leader is gone: first live in-sync replica in assignment order (``unclean``: else the
    first live replica, accepting the loss of acknowledged records)."""

    name: str
    description: str
    unclean: bool
    kind: ElectionKind = ElectionKind.PARTITION_LEADER

    def elect(self, inp: PartitionElectionInput) -> LeaderAndIsr | None:
        return offline_election(inp, self.unclean)


@attrs.frozen
class ReassignElection:
    """After a reassignment: first live in-sync replica of the target replica list."""

    name: str = "reassign"
    description: str = "first live in-sync replica of the target assignment; ISR unchanged"
    kind: ElectionKind = ElectionKind.PARTITION_LEADER

    def elect(self, inp: PartitionElectionInput) -> LeaderAndIsr | None:
        return reassign_election(inp)


@attrs.frozen
class PreferredElection:
    """Leadership back to the preferred (first assigned) replica when it is live and in sync."""

    name: str = "preferred"
    description: str = "the first assigned replica, only if live and in the ISR; ISR unchanged"
    kind: ElectionKind = ElectionKind.PARTITION_LEADER

    def elect(self, inp: PartitionElectionInput) -> LeaderAndIsr | None:
        return preferred_replica_election(inp)


@attrs.frozen
class ControlledShutdownElection:
    """Leadership off brokers shutting down; the new ISR drops them."""

    name: str = "controlled-shutdown"
    description: str = (
        "first assigned replica live, in the ISR and not shutting down; ISR drops the leavers"
    )
    kind: ElectionKind = ElectionKind.PARTITION_LEADER

    def elect(self, inp: PartitionElectionInput) -> LeaderAndIsr | None:
        return controlled_shutdown_election(inp)


OFFLINE = OfflineElection(
    name="offline",
    description="first live in-sync replica in assignment order (clean); none: stay offline",
    unclean=False,
)
OFFLINE_UNCLEAN = OfflineElection(
    name="offline-unclean",
    description=(
        "first live in-sync replica, else the first live replica (unclean.leader.election.enable)"
    ),
    unclean=True,
)
REASSIGN = ReassignElection()
PREFERRED = PreferredElection()
CONTROLLED_SHUTDOWN = ControlledShutdownElection()

PARTITION_STRATEGIES = (OFFLINE, OFFLINE_UNCLEAN, REASSIGN, PREFERRED, CONTROLLED_SHUTDOWN)
