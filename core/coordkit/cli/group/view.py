"""What ``coordkit group`` shows: snapshots of a running group, rendered as rich tables or JSON.

A :class:`GroupSnapshot` is the same for both consumers; the legacy ZooKeeper consumer has no
coordinator, generation or leader (shown as ``-``) and adds rebalance attempts, owner-node
conflicts and store operations, the cost the group coordinator removed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from attrs import field, frozen, validators
from rich.console import Group

from coordkit.cli.tables import Column, FittedTable, Kind
from coordkit.engine.instrument import OpCounts
from coordkit.kafka.model import TopicPartition


def compact_partitions(partitions: Iterable[TopicPartition]) -> str:
    """Partitions per topic with runs collapsed: ``t0[0-4,7] t1[2]`` (``-`` when none)."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = []
    for topic, numbers in by_topic.items():
        runs: list[str] = []
        start = previous = numbers[0]
        for number in [*numbers[1:], None]:
            if number is not None and number == previous + 1:
                previous = number
                continue
            runs.append(str(start) if start == previous else f"{start}-{previous}")
            if number is not None:
                start = previous = number
        out.append(f"{topic}[{','.join(runs)}]")
    return " ".join(out) or "-"


def _partitions(value: Iterable[TopicPartition]) -> frozenset[TopicPartition]:
    return frozenset(value)


@frozen
class MemberRow:
    """One consumer of the group.

    :param consumer: the consumer's number on the command line (``leave:I`` names it).
    :param member_id: the coordinator's member id (legacy: the consumer id).
    :param instance_id: ``group.instance.id`` of a static member (legacy: ``consumer.id``).
    :param status: the consumer's own state (``stable``, ``joining``, ``crashed``, ...).
    :param partitions: what the group assigns it (legacy: the owner nodes its threads hold).
    :param lag: records between its positions and the high watermarks of what it owns.
    """

    consumer: int = field(validator=validators.ge(0))
    member_id: str
    instance_id: str | None
    status: str
    partitions: frozenset[TopicPartition] = field(converter=_partitions)
    lag: int = field(validator=validators.ge(0))


@frozen
class RebalanceRow:
    """A rebalance completed during a step.

    :param generation: the generation it completed (legacy: ``None``).
    :param rounds: join rounds (legacy: rebalances run by the consumers, one per woken consumer).
    :param duration: seconds from its start to its stable assignment.
    :param unowned: distinct partitions without an owner meanwhile (counted from the step's start,
        so a crash's partitions count from the crash, not from its detection).
    :param partition_seconds: the integral of the unowned count over that time.
    :param attempts: legacy only: rebalance attempts over every consumer.
    :param conflicts: legacy only: owner nodes found held by another thread.
    :param store_ops: legacy only: store operations the rebalances cost.
    """

    generation: int | None
    reason: str
    rounds: int = field(validator=validators.ge(0))
    duration: float
    unowned: int = field(validator=validators.ge(0))
    partition_seconds: float
    attempts: int | None = None
    conflicts: int | None = None
    store_ops: OpCounts | None = None


def _members(value: Iterable[MemberRow]) -> tuple[MemberRow, ...]:
    return tuple(value)


def _rebalances(value: Iterable[RebalanceRow]) -> tuple[RebalanceRow, ...]:
    return tuple(value)


@frozen
class GroupSnapshot:
    """The group after a step (or at one tick of the live view).

    :param state: the coordinator's group state (legacy: ``Stable`` or ``Rebalancing``).
    :param leader: the member id of the group leader.
    :param coordinator: the broker coordinating the group.
    :param rebalances: rebalances completed since the previous snapshot.
    """

    label: str
    group_id: str
    state: str
    generation: int | None
    protocol: str | None
    leader: str | None
    coordinator: int | None
    members: tuple[MemberRow, ...] = field(converter=_members)
    rebalances: tuple[RebalanceRow, ...] = field(factory=tuple, converter=_rebalances)
    legacy: bool = False

    def consumer_of(self, member_id: str | None) -> int | None:
        for row in self.members:
            if row.member_id == member_id:
                return row.consumer
        return None


# -- tables ------------------------------------------------------------------------------------


def _text(value: object) -> str:
    return "-" if value is None else str(value)


def _ops(counts: OpCounts | None) -> str:
    return "-" if counts is None else f"{counts.round_trips}/{counts.reads}/{counts.writes}"


def render_snapshot(snapshot: GroupSnapshot) -> Group:
    """The group after a step as tables that fit the terminal: the group, its members, and the
    rebalances the step caused."""
    leader = snapshot.consumer_of(snapshot.leader)
    head = FittedTable(
        [
            Column("group"),
            Column("state"),
            Column("generation", Kind.NUMBER, "gen"),
            Column("protocol"),
            Column("leader"),
            Column("coordinator"),
        ],
        [
            [
                snapshot.group_id,
                snapshot.state,
                _text(snapshot.generation),
                _text(snapshot.protocol),
                "-"
                if snapshot.leader is None
                else f"c{leader}"
                if leader is not None
                else snapshot.leader,
                "-" if snapshot.coordinator is None else f"broker {snapshot.coordinator}",
            ]
        ],
        title=snapshot.label,
    )
    members = FittedTable(
        [
            Column("consumer"),
            Column("member id"),
            Column("instance id"),
            Column("status"),
            Column("partitions", Kind.TEXT),
            Column("lag", Kind.NUMBER),
        ],
        [
            [
                f"c{row.consumer}{'*' if row.member_id == snapshot.leader else ''}",
                row.member_id or "-",
                _text(row.instance_id),
                row.status,
                compact_partitions(row.partitions),
                str(row.lag),
            ]
            for row in snapshot.members
        ],
    )
    parts = [head, members]
    if snapshot.rebalances:
        columns = [
            Column("rebalance"),
            Column("reason", Kind.TEXT),
            Column("rounds", Kind.NUMBER),
            Column("duration", Kind.NUMBER),
            Column("unowned", Kind.NUMBER),
            Column("partition-s", Kind.NUMBER),
        ]
        if snapshot.legacy:
            columns += [
                Column("attempts", Kind.NUMBER),
                Column("conflicts", Kind.NUMBER),
                Column("store ops (trips/reads/writes)", Kind.NUMBER, "ops t/r/w"),
            ]
        rows = []
        for r in snapshot.rebalances:
            cells = [
                "-" if r.generation is None else f"generation {r.generation}",
                r.reason,
                str(r.rounds),
                f"{r.duration:.3f}s",
                str(r.unowned),
                f"{r.partition_seconds:.2f}",
            ]
            if snapshot.legacy:
                cells += [_text(r.attempts), _text(r.conflicts), _ops(r.store_ops)]
            rows.append(cells)
        parts.append(FittedTable(columns, rows))
    return Group(*parts)


# -- JSON ----------------------------------------------------------------------------------------


def snapshot_json(snapshot: GroupSnapshot) -> dict[str, Any]:
    return {
        "step": snapshot.label,
        "group": snapshot.group_id,
        "state": snapshot.state,
        "generation": snapshot.generation,
        "protocol": snapshot.protocol,
        "leader": snapshot.leader,
        "leader_consumer": snapshot.consumer_of(snapshot.leader),
        "coordinator": snapshot.coordinator,
        "members": [
            {
                "consumer": row.consumer,
                "member_id": row.member_id,
                "instance_id": row.instance_id,
                "status": row.status,
                "partitions": sorted(str(tp) for tp in row.partitions),
                "lag": row.lag,
            }
            for row in snapshot.members
        ],
        "rebalances": [
            {
                "generation": r.generation,
                "reason": r.reason,
                "rounds": r.rounds,
                "duration_s": r.duration,
                "unowned_partitions": r.unowned,
                "partition_seconds": r.partition_seconds,
                "attempts": r.attempts,
                "conflicts": r.conflicts,
                "store_ops": None if r.store_ops is None else r.store_ops.as_dict(),
            }
            for r in snapshot.rebalances
        ],
    }
