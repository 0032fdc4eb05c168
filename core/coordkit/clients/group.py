"""The client-agnostic half of running a coordkit assignor inside a Kafka consumer.

:class:`ConsumerState` is one consumer's memory between rebalances (what it owns, in which
generation) and the JoinGroup metadata it sends; :func:`assign_group` is the group leader's work:
members' metadata (subscriptions, owned partitions, generations, user data) in, coordkit's
:class:`~coordkit.strategies.assignment.GroupSubscription` through the assignor, ``{member: {topic:
[partition, ...]}}`` out. The client modules (:mod:`coordkit.clients.kafka_python`,
:mod:`coordkit.clients.aiokafka`) only translate their objects to and from these.

Where owned partitions travel depends on the rebalance protocol the consumer runs, as in Kafka:

* **eager** (every member revokes everything before it rejoins): in the subscription's user data,
  as ``StickyAssignorUserData`` v1 (Java's ``StickyAssignor`` layout), so a coordkit ``sticky``
  member can share a group with Java consumers running Kafka's ``sticky``;
* **cooperative** (members keep their partitions while they rejoin): in the subscription's
  ``owned_partitions`` and ``generation_id`` fields (version 2), with the generation also as the
  int32 user data Java's ``cooperative-sticky`` writes. The leader then withholds any partition
  another member still owns; that member revokes it and the next round hands it over.

Assignors that ignore owned partitions (``range``, ``range-ceil``, ``roundrobin``) send no user
data, like Kafka's. The leader also stamps each assignment's user data with a generation (one
int32: one more than the newest generation any member claimed) for clients that do not tell an
assignor the generation (aiokafka).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from attrs import field, frozen

from coordkit.plugins import get_plugin_manager
from coordkit.protocol.consumer import (
    NO_GENERATION,
    Claim,
    UserDataError,
    decode_generation,
    decode_sticky_user_data,
    encode_generation,
    encode_sticky_user_data,
)
from coordkit.strategies.assignment import (
    Assignor,
    GroupSubscription,
    MemberSubscription,
    RebalanceProtocol,
    TopicMetadata,
)
from coordkit.support.terminal import visible

log = logging.getLogger(__name__)

#: Assignors that never read owned partitions: their members send no user data (as Kafka's).
STATELESS_ASSIGNORS = frozenset({"range", "range-ceil", "roundrobin"})
#: The subscription version a cooperative member sends (owned partitions and generation fields).
COOPERATIVE_SUBSCRIPTION_VERSION = 2

#: ``loads(topic, partition_count)``: per-partition loads for load-aware assignors
#: (``weighted-sticky``), or ``None`` for "every partition weighs 1".
PartitionLoads = Callable[[str, int], Sequence[float] | None]

Partitions = dict[str, tuple[int, ...]]


def lookup_assignor(name: str) -> Assignor:
    """The registered coordkit assignor ``name``; an unknown name raises
    :class:`~coordkit.errors.UnknownNameError` listing the registered ones."""
    if not isinstance(name, str):
        raise TypeError(f"an assignor name is a string, got {name!r}")
    return get_plugin_manager().assignor(name)


def choose_protocol(assignor: Assignor, requested: str | None, *, cooperative_ok: bool) -> str:
    """The rebalance protocol a consumer runs ``assignor`` under: ``requested`` (``"eager"`` or
    ``"cooperative"``) if the assignor supports it, else the assignor's first supported one that
    the client can run."""
    supported = [p.value for p in assignor.protocols]
    runnable = [p for p in supported if cooperative_ok or p != RebalanceProtocol.COOPERATIVE.value]
    if requested is not None:
        if requested not in {p.value for p in RebalanceProtocol}:
            raise ValueError(f"protocol must be 'eager' or 'cooperative', got {requested!r}")
        if requested not in runnable:
            why = "the assignor" if requested not in supported else "this client"
            raise ValueError(
                f"assignor {assignor.name!r} cannot run the {requested} rebalance protocol with "
                f"{why}; it supports: {', '.join(supported)}"
            )
        return requested
    if not runnable:
        raise ValueError(
            f"assignor {assignor.name!r} supports only {', '.join(supported)} rebalancing, "
            "which this client cannot run"
        )
    return runnable[0]


# -- one consumer --------------------------------------------------------------------------------


@frozen
class SubscriptionFields:
    """What a consumer puts in its JoinGroup metadata besides its topics."""

    version: int
    user_data: bytes | None
    owned: Partitions = field(factory=dict)
    generation: int = NO_GENERATION


class ConsumerState:
    """One consumer's assignor state: what it owns and in which generation.

    One instance per consumer: kafka-python makes one assignor object per consumer, and the
    aiokafka adapter is an object per consumer, so two consumers in one process never share it
    (the class-level state of aiokafka's own sticky assignor, aiokafka#1175, is what this avoids).
    """

    def __init__(self, assignor_name: str, protocol: str):
        self.assignor_name = assignor_name
        self.protocol = protocol
        #: ``None`` until the first assignment (then a member sends no user data, as Java's).
        self.owned: Partitions | None = None
        self.generation = NO_GENERATION

    @property
    def cooperative(self) -> bool:
        return self.protocol == RebalanceProtocol.COOPERATIVE.value

    def subscription(self) -> SubscriptionFields:
        owned = self.owned or {}
        if self.cooperative:
            return SubscriptionFields(
                COOPERATIVE_SUBSCRIPTION_VERSION,
                encode_generation(self.generation),
                owned,
                self.generation,
            )
        if self.owned is None or self.assignor_name in STATELESS_ASSIGNORS:
            return SubscriptionFields(0, None)
        return SubscriptionFields(0, encode_sticky_user_data(owned, self.generation))

    def on_assignment(
        self,
        partitions: Mapping[str, Iterable[int]],
        generation: int | None,
        user_data: bytes | None = None,
    ) -> None:
        """Remember an assignment. ``generation`` is the group's when the client knows it; when it
        does not (``None``) the leader's stamp in the assignment's user data stands in."""
        self.owned = {t: tuple(sorted(set(ps))) for t, ps in partitions.items() if ps}
        if generation is None:
            generation = NO_GENERATION
            if user_data:
                try:
                    generation = decode_generation(user_data)
                except UserDataError:
                    log.info("assignment user data is not a coordkit generation stamp; ignored")
        self.generation = generation

    def __repr__(self) -> str:
        owned = sum(len(ps) for ps in (self.owned or {}).values())
        return (
            f"ConsumerState({self.assignor_name!r}, {self.protocol}, owned={owned} partitions, "
            f"generation={self.generation})"
        )


# -- the group leader ----------------------------------------------------------------------------


def user_data_bytes(value: object) -> bytes | None:
    """A client's user-data field as bytes (``None`` when absent or not bytes at all)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return None


def topic_partition_counts(cluster: Any, topics: Iterable[str]) -> dict[str, int]:
    """Partition counts of ``topics`` from a kafka-python or aiokafka ``ClusterMetadata``; a
    topic without metadata is left out (and logged), as Kafka's assignors do."""
    counts = {}
    for topic in sorted(set(topics)):
        partitions = cluster.partitions_for_topic(topic)
        if partitions is None:
            log.warning("no metadata for subscribed topic %r; it is not assigned", topic)
            continue
        counts[topic] = len(partitions)
    return counts


@frozen
class JoinedMember:
    """A member as the leader reads it from the JoinGroup response.

    :param generation: the subscription's ``generation_id`` field, ``None`` before version 2.
    """

    member_id: str
    topics: tuple[str, ...]
    instance_id: str | None = None
    user_data: bytes | None = None
    owned: Partitions = field(factory=dict)
    generation: int | None = None
    rack: str | None = None


@frozen
class LeaderAssignment:
    """The leader's answer: each member's partitions, and the generation stamp to send along."""

    partitions: dict[str, Partitions]
    stamp: int


def member_claim(member: JoinedMember, assignor_name: str, *, cooperative: bool) -> Claim:
    """What ``member`` owned, read the way Kafka's assignors read it (see the module docs).

    User data that no layout reads is treated as "owns nothing" with one log line: it comes from
    another process and must not stop the leader.
    """
    if assignor_name in STATELESS_ASSIGNORS:
        return Claim()
    if cooperative or not member.user_data:
        if member.generation is not None or not member.user_data:
            generation = NO_GENERATION if member.generation is None else member.generation
            return Claim(dict(member.owned), generation)
        try:
            return Claim(dict(member.owned), decode_generation(member.user_data))
        except UserDataError as e:
            _log_bad_user_data(member, e)
            return Claim(dict(member.owned), NO_GENERATION)
    try:
        return decode_sticky_user_data(member.user_data)
    except UserDataError as e:
        _log_bad_user_data(member, e)
        return Claim()


def _log_bad_user_data(member: JoinedMember, error: UserDataError) -> None:
    log.warning(
        "member %s sent user data that cannot be read (%s); treating it as owning nothing",
        visible(member.member_id[:200]),
        visible(str(error)),
    )


def assign_group(
    assignor: Assignor,
    topics: Mapping[str, int],
    members: Sequence[JoinedMember],
    *,
    cooperative: bool,
    loads: PartitionLoads | None = None,
) -> LeaderAssignment:
    """Run ``assignor`` over ``members``.

    :param topics: partition counts of the subscribed topics that have metadata.
    :param cooperative: withhold partitions another member still owns (cooperative rebalancing).
    :param loads: per-partition loads for load-aware assignors.

    Owned partitions are kept only where they exist and their member still subscribes to the
    topic; a partition claimed twice by one member counts once.
    """
    claims = {m.member_id: member_claim(m, assignor.name, cooperative=cooperative) for m in members}
    topic_metadata = {}
    for topic, count in topics.items():
        topic_loads = loads(topic, count) if loads is not None else None
        topic_metadata[topic] = TopicMetadata(count, loads=topic_loads)
    group_members = {}
    for m in members:
        claim = claims[m.member_id]
        subscribed = set(m.topics)
        owned = {
            t: sorted({p for p in ps if 0 <= p < topics[t]})
            for t, ps in claim.owned.items()
            if t in subscribed and t in topics
        }
        group_members[m.member_id] = MemberSubscription(
            topics=m.topics,
            instance_id=m.instance_id,
            owned={t: ps for t, ps in owned.items() if ps},
            generation=claim.generation,
            rack=m.rack,
        )
    result = assignor.assign(GroupSubscription(topics=topic_metadata, members=group_members))
    out: dict[str, Partitions] = {}
    for m in members:
        out[m.member_id] = (
            {t: tuple(ps) for t, ps in result.by_topic(m.member_id).items()}
            if m.member_id in result
            else {}
        )
    if cooperative:
        # Kafka's partitionsTransferringOwnership: handed to a member that did not own it while
        # another member did. The owner revokes it first; the next round hands it over.
        claimers: dict[tuple[str, int], set[str]] = {}
        for member, sub in group_members.items():
            for t, ps in sub.owned.items():
                for p in ps:
                    claimers.setdefault((t, p), set()).add(member)
        out = {
            member: {
                t: kept
                for t, ps in parts.items()
                if (kept := tuple(p for p in ps if member in claimers.get((t, p), {member})))
            }
            for member, parts in out.items()
        }
    newest = max((c.generation for c in claims.values()), default=NO_GENERATION)
    return LeaderAssignment(out, max(newest, 0) + 1)
