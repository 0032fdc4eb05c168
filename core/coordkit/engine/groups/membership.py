"""One consumer group as its coordinator holds it: members and the classic state machine.

States and the transitions Kafka allows (``GroupMetadata.validPreviousStates``)::

    Empty ──join──▶ PreparingRebalance ──all rejoined / rebalance timeout──▶ CompletingRebalance
      ▲                  ▲      │ (no member left)                              │ leader's SyncGroup
      └──────────────────┼──────┘                                               ▼
                         └────────── member joins, leaves or times out ────── Stable

A :class:`Group` is plain data plus the rules that need no I/O (protocol vote, transitions,
conversion to and from the persisted form); :class:`~coordkit.engine.groups.coordinator.GroupCoordinator`
drives it under :attr:`Group.lock` and does the waiting, persisting and answering.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import Counter
from collections.abc import Iterable, Mapping

import attrs

from coordkit.engine.errors import EngineError
from coordkit.engine.groups.metadata import GroupMetadata, PersistedMember
from coordkit.engine.groups.protocol import (
    GroupState,
    JoinGroupResponse,
    Subscription,
    SyncGroupResponse,
)
from coordkit.kafka.model import TopicPartition

_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupTransitionError(EngineError):
    """A coordinator bug: a transition the classic protocol does not allow."""


class Member:
    """A group member: its join request, assignment and liveness.

    :ivar deadline: clock time after which the member is removed (session timeout).
    :ivar join_future: set while the member waits in a join round (JoinGroup long-poll).
    :ivar sync_future: set while the member waits for the leader's assignment.
    :ivar metadata: protocol name → opaque metadata (wire clients; stored, never parsed).
    :ivar raw_assignment: the opaque assignment the leader sent for it (wire clients).
    """

    __slots__ = (
        "assignment",
        "client_host",
        "client_id",
        "deadline",
        "group_instance_id",
        "join_future",
        "join_order",
        "member_id",
        "metadata",
        "protocols",
        "raw_assignment",
        "rebalance_timeout",
        "session_timeout",
        "subscription",
        "sync_future",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        session_timeout: float,
        rebalance_timeout: float,
        protocols: tuple[str, ...],
        subscription: Subscription,
        join_order: int,
        *,
        metadata: Mapping[str, bytes] | None = None,
        client_host: str = "",
    ):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.session_timeout = session_timeout
        self.rebalance_timeout = rebalance_timeout
        self.protocols = protocols
        self.subscription = subscription
        self.join_order = join_order
        self.metadata: dict[str, bytes] = dict(metadata or {})
        self.client_host = client_host
        self.raw_assignment: bytes | None = None
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.deadline = 0.0
        self.join_future: concurrent.futures.Future[JoinGroupResponse] | None = None
        self.sync_future: concurrent.futures.Future[SyncGroupResponse] | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def vote(self, candidates: Iterable[str]) -> str:
        """Its most preferred protocol among ``candidates``."""
        allowed = set(candidates)
        return next(p for p in self.protocols if p in allowed)

    def same_join(
        self,
        protocols: tuple[str, ...],
        subscription: Subscription,
        metadata: Mapping[str, bytes] | None = None,
    ) -> bool:
        return (
            self.protocols == protocols
            and self.subscription == subscription
            and self.metadata == dict(metadata or {})
        )

    def to_persisted(self) -> PersistedMember:
        return PersistedMember(
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            client_id=self.client_id,
            session_timeout=self.session_timeout,
            rebalance_timeout=self.rebalance_timeout,
            protocols=self.protocols,
            topics=self.subscription.topics,
            assignment=self.assignment,
            join_order=self.join_order,
            client_host=self.client_host,
            metadata=self.metadata,
            raw_assignment=self.raw_assignment,
        )

    def __repr__(self) -> str:
        return f"<Member {self.member_id} instance={self.group_instance_id}>"


@attrs.define
class RebalanceEpisode:
    """From the first reason to rebalance until a stable assignment (possibly several rounds)."""

    started: float
    reason: str
    rounds: int = 0


class Group:
    """A group's coordinator-side state; every access holds :attr:`lock`."""

    def __init__(self, group_id: str, partition: int):
        self.group_id = group_id
        self.partition = partition
        self.lock = threading.RLock()
        self.state = GroupState.EMPTY
        self.generation = 0
        self.protocol_type = ""
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.static: dict[str, str] = {}  # group.instance.id → member id
        # Member ids handed out with MEMBER_ID_REQUIRED, not joined yet → clock deadline.
        self.pending: dict[str, float] = {}
        self.next_join_order = 0
        # Join-phase deadlines (clock time): the round ends at ``join_deadline`` at the latest,
        # and not before ``not_before`` (group.initial.rebalance.delay.ms for an empty group).
        self.join_deadline = 0.0
        self.not_before = 0.0
        self.initial_delay_limit = 0.0
        self.episode: RebalanceEpisode | None = None
        self.topic_partitions: dict[str, int] = {}

    # -- state machine -------------------------------------------------------------------------

    def transition(self, target: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalGroupTransitionError(
                f"group {self.group_id!r}: cannot go from {self.state.value} to {target.value}"
            )
        self.state = target

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    # -- members -------------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = self.protocol_type or "consumer"
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance = member.group_instance_id
        if instance is not None and self.static.get(instance) == member_id:
            del self.static[instance]
        if self.leader == member_id:
            self.leader = None
        return member

    def take_join_order(self) -> int:
        self.next_join_order += 1
        return self.next_join_order

    def by_join_order(self) -> list[Member]:
        return sorted(self.members.values(), key=lambda m: m.join_order)

    def all_joined(self) -> bool:
        return (
            bool(self.members)
            and not self.pending
            and all(m.awaiting_join for m in self.members.values())
        )

    def rebalance_timeout(self) -> float:
        return max((m.rebalance_timeout for m in self.members.values()), default=0.0)

    # -- protocol selection --------------------------------------------------------------------

    def candidate_protocols(self, extra: tuple[str, ...] | None = None) -> set[str]:
        """Protocols every member supports (and ``extra``, a joining member's list, too)."""
        lists = [set(m.protocols) for m in self.members.values()]
        if extra is not None:
            lists.append(set(extra))
        if not lists:
            return set()
        common = lists[0]
        for protocols in lists[1:]:
            common &= protocols
        return common

    def supports(self, protocol_type: str, protocols: tuple[str, ...], replacing: str = "") -> bool:
        """Kafka's ``supportsProtocols``: an empty group takes any non-empty list; otherwise the
        type must match and the joining member must share a protocol with every other member."""
        others = [m for m in self.members.values() if m.member_id != replacing]
        if not others:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        common = set(protocols)
        for member in others:
            common &= set(member.protocols)
        return bool(common)

    def select_protocol(self) -> str:
        """Every member votes for its first choice among the protocols all support; most votes
        wins. Ties go to the protocol the earliest-joined member prefers (Kafka leaves them to
        hash order)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalGroupTransitionError(
                f"group {self.group_id!r}: members share no protocol (joins should have been refused)"
            )
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        preference = self.by_join_order()[0].protocols
        tied = [p for p in preference if votes.get(p) == best]
        return tied[0] if tied else sorted(p for p, n in votes.items() if n == best)[0]

    # -- persistence ---------------------------------------------------------------------------

    def to_metadata(self) -> GroupMetadata:
        return GroupMetadata(
            group_id=self.group_id,
            generation=self.generation,
            protocol_type=self.protocol_type or "consumer",
            protocol=self.protocol,
            leader=self.leader,
            members=[m.to_persisted() for m in self.by_join_order()],
        )

    @classmethod
    def from_metadata(cls, metadata: GroupMetadata, partition: int, now: float) -> Group:
        """A group as a new coordinator resumes it: Stable with its members if it had any (each
        gets a fresh session deadline), else Empty; the generation carries on."""
        group = cls(metadata.group_id, partition)
        group.generation = metadata.generation
        group.protocol_type = metadata.protocol_type
        group.protocol = metadata.protocol
        group.leader = metadata.leader
        for persisted in metadata.members:
            member = Member(
                persisted.member_id,
                persisted.group_instance_id,
                persisted.client_id,
                persisted.session_timeout,
                persisted.rebalance_timeout,
                persisted.protocols,
                Subscription(persisted.topics, generation=metadata.generation),
                persisted.join_order,
                metadata=persisted.metadata,
                client_host=persisted.client_host,
            )
            member.assignment = persisted.assignment
            member.raw_assignment = persisted.raw_assignment
            member.deadline = now + persisted.session_timeout
            group.add(member)
            group.next_join_order = max(group.next_join_order, persisted.join_order)
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group
