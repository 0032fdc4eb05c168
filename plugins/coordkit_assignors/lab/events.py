"""What happens to a consumer group between two rebalances.

A workload is an initial group plus a sequence of these events; the simulation applies each one and
rebalances. Events are attrs value objects so a sequence is reproducible, comparable and printable.
``kind`` is a short stable label (report charts group by it); ``describe()`` is the one-line text
stored in the results.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from attrs import field, frozen


def _topics(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(value))


def _floats(value: Iterable[float] | None) -> tuple[float, ...] | None:
    return None if value is None else tuple(float(x) for x in value)


def _racks(value: Iterable[Iterable[str]] | None) -> tuple[tuple[str, ...], ...] | None:
    return None if value is None else tuple(tuple(r) for r in value)


@frozen
class MemberJoined:
    """A new consumer joins (a dynamic member unless ``instance_id`` is set)."""

    kind: ClassVar[str] = "join"
    member: str
    topics: tuple[str, ...] = field(converter=_topics)
    rack: str | None = None
    instance_id: str | None = None

    def describe(self) -> str:
        return f"{self.member} joins ({len(self.topics)} topics)"


@frozen
class MemberLeft:
    """A consumer leaves cleanly (LeaveGroup): it commits and releases what it owned."""

    kind: ClassVar[str] = "leave"
    member: str

    def describe(self) -> str:
        return f"{self.member} leaves"


@frozen
class MemberCrashed:
    """A consumer dies without leaving: after its session times out its partitions are orphaned
    (never revoked, offsets not committed)."""

    kind: ClassVar[str] = "crash"
    member: str

    def describe(self) -> str:
        return f"{self.member} crashes"


@frozen
class PartitionsAdded:
    """``count`` partitions are added to ``topic`` (Kafka only ever grows a topic).

    :param loads: loads of the new partitions; default: the mean of the topic's existing loads.
    :param replica_racks: racks of the new partitions; default: the existing pattern repeated.
    """

    kind: ClassVar[str] = "add-partitions"
    topic: str
    count: int
    loads: tuple[float, ...] | None = field(default=None, converter=_floats)
    replica_racks: tuple[tuple[str, ...], ...] | None = field(default=None, converter=_racks)

    def describe(self) -> str:
        return f"{self.topic} +{self.count} partitions"


@frozen
class TopicCreated:
    """A topic is created; ``subscribers`` pick it up in this rebalance (pattern subscriptions)."""

    kind: ClassVar[str] = "create-topic"
    topic: str
    partitions: int
    subscribers: tuple[str, ...] = field(default=(), converter=_topics)
    loads: tuple[float, ...] | None = field(default=None, converter=_floats)
    replica_racks: tuple[tuple[str, ...], ...] | None = field(default=None, converter=_racks)

    def describe(self) -> str:
        return f"{self.topic} created ({self.partitions} partitions)"


@frozen
class TopicDeleted:
    """A topic is deleted. Subscriptions still name it; assignors skip topics without metadata."""

    kind: ClassVar[str] = "delete-topic"
    topic: str

    def describe(self) -> str:
        return f"{self.topic} deleted"


@frozen
class SubscriptionChanged:
    """A member changes what it subscribes to (the group becomes heterogeneous)."""

    kind: ClassVar[str] = "resubscribe"
    member: str
    topics: tuple[str, ...] = field(converter=_topics)

    def describe(self) -> str:
        return f"{self.member} subscribes to {len(self.topics)} topics"


GroupEvent = (
    MemberJoined
    | MemberLeft
    | MemberCrashed
    | PartitionsAdded
    | TopicCreated
    | TopicDeleted
    | SubscriptionChanged
)

#: Every event kind, in the order the report lists them.
EVENT_KINDS: tuple[str, ...] = (
    MemberJoined.kind,
    MemberLeft.kind,
    MemberCrashed.kind,
    PartitionsAdded.kind,
    TopicCreated.kind,
    TopicDeleted.kind,
    SubscriptionChanged.kind,
)
