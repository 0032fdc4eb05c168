"""Random consumer groups for the assignor properties, and the readings the properties share.

The groups are what a coordinator hands an assignor in practice, awkward parts included: topics
without partitions, members subscribed to topics with no metadata, static members, ownership claims
from old generations, claims of the same partition by two members, claims of partitions that no
longer exist (a deleted topic, a partition number past the count), racks and per-partition loads.
"""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import strategies as st

from coordkit.kafka.model import TopicPartition
from coordkit.strategies.assignment import (
    DEFAULT_GENERATION,
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)

TOPIC_NAMES = ("t0", "t1", "t2", "t3")
#: Subscribed by some members, known to no one: assignors must ignore it.
TOPIC_WITHOUT_METADATA = "no-metadata"
#: Claimed by some members, gone from the metadata (a deleted topic).
DELETED_TOPIC = "deleted"
#: Member ids whose Java (UTF-16) order differs from Python's code point order.
MEMBER_ALPHABET = "abAB-_\uff5e\U00010000"

__all__ = [
    "TOPIC_NAMES",
    "claims",
    "groups",
    "owned_sets",
    "subscribed_partitions",
    "targets",
    "topic_metadata",
    "with_owned",
]


@st.composite
def topic_metadata(draw: st.DrawFn, *, racks: bool = True, loads: bool = True) -> TopicMetadata:
    count = draw(st.integers(0, 12))
    replica_racks = (
        draw(
            st.none()
            | st.lists(
                st.lists(st.sampled_from("abc"), max_size=3, unique=True),
                min_size=count,
                max_size=count,
            )
        )
        if racks
        else None
    )
    partition_loads = (
        draw(
            st.none()
            | st.lists(
                st.floats(0, 100, allow_nan=False, allow_infinity=False),
                min_size=count,
                max_size=count,
            )
        )
        if loads
        else None
    )
    return TopicMetadata(count, replica_racks=replica_racks, loads=partition_loads)


@st.composite
def groups(
    draw: st.DrawFn,
    *,
    identical: bool = False,
    owned: bool = True,
    racks: bool = True,
    loads: bool = True,
    stale_claims: bool = True,
    min_members: int = 1,
) -> GroupSubscription:
    """A random group.

    :param identical: every member subscribes to the same topics.
    :param owned: members claim partitions they owned (else nobody owns anything).
    :param racks: topics may have replica racks and members a rack.
    :param loads: topics may carry per-partition loads.
    :param stale_claims: claims may name partitions that do not exist any more.
    :param min_members: at least this many members (at most six).
    """
    topics = {
        name: draw(topic_metadata(racks=racks, loads=loads))
        for name in TOPIC_NAMES[: draw(st.integers(0, len(TOPIC_NAMES)))]
    }
    subscribable = [*topics, TOPIC_WITHOUT_METADATA]
    member_ids = draw(
        st.lists(
            st.text(MEMBER_ALPHABET, min_size=1, max_size=3),
            min_size=min_members,
            max_size=6,
            unique=True,
        )
    )
    instance_ids = iter(
        draw(
            st.lists(
                st.text("ix", min_size=1, max_size=3),
                unique=True,
                min_size=len(member_ids),
                max_size=len(member_ids),
            )
        )
    )
    shared = draw(st.lists(st.sampled_from(subscribable), unique=True)) if identical else None
    existing = [(t, p) for t, meta in topics.items() for p in range(meta.partitions)]
    gone = [(DELETED_TOPIC, 0)] + [(t, meta.partitions) for t, meta in topics.items()]
    claimable = existing + (gone if stale_claims else [])
    members = {}
    for member in member_ids:
        claimed = (
            draw(st.lists(st.sampled_from(claimable), unique=True)) if owned and claimable else []
        )
        members[member] = MemberSubscription(
            shared
            if shared is not None
            else draw(st.lists(st.sampled_from(subscribable), unique=True)),
            instance_id=next(instance_ids) if draw(st.booleans()) else None,
            owned=[TopicPartition(t, p) for t, p in claimed],
            generation=draw(st.sampled_from([DEFAULT_GENERATION, 1, 2, 3])),
            rack=draw(st.none() | st.sampled_from("abcd")) if racks else None,
        )
    return GroupSubscription(topics, members)


def targets(assignment: GroupAssignment) -> Iterator[tuple[str, TopicPartition]]:
    """(member, partition) for everything assigned to a member or withheld for it."""
    for member in assignment.members:
        for tp in assignment.partitions(member):
            yield member, tp
        for tp in assignment.withheld(member):
            yield member, tp


def subscribed_partitions(group: GroupSubscription) -> set[TopicPartition]:
    """Every partition of a topic that has metadata and at least one subscriber."""
    wanted = {t for sub in group.members.values() for t in sub.topics}
    return {
        TopicPartition(t, p)
        for t, meta in group.topics.items()
        if t in wanted
        for p in range(meta.partitions)
    }


def claims(group: GroupSubscription) -> dict[str, set[TopicPartition]]:
    """What each member says it owns (stale claims included)."""
    return {
        member: {TopicPartition(t, p) for t, parts in sub.owned.items() for p in parts}
        for member, sub in group.members.items()
    }


def owned_sets(assignment: GroupAssignment) -> dict[str, set[TopicPartition]]:
    """What each member is assigned this round (withheld partitions excluded)."""
    return {member: set(assignment.partitions(member)) for member in assignment.members}


def with_owned(
    group: GroupSubscription,
    owners: dict[str, list[TopicPartition]],
    generation: int,
) -> GroupSubscription:
    """The next round: the same subscriptions, each member owning ``owners[member]``."""
    return GroupSubscription(
        group.topics,
        {
            m: MemberSubscription(
                s.topics,
                instance_id=s.instance_id,
                owned=owners.get(m, []),
                generation=generation,
                rack=s.rack,
            )
            for m, s in group.members.items()
        },
    )
