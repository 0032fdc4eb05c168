"""Group history: every ownership change and rebalance of every group, with invariant checks.

A :class:`GroupHistory` observes coordinators (join rounds, stored assignments, completed
rebalances) and consumers (partitions assigned, revoked, lost; consumers starting and stopping).
:meth:`GroupHistory.check` raises :class:`GroupInvariantError` naming every violation of:

* no partition owned by two members of a group in the same generation;
* no generation assigning a partition to two members;
* cooperative groups never revoke and assign one partition in the same round (no member is handed
  a partition another member said it owned when it joined that generation);
* every completed rebalance assigns every partition of the subscribed topics exactly once;
* a member only revokes what it owns, and generations only go forward.

It also measures what the lab and the benchmarks report: rebalance durations and rounds, and
partitions without an owner while the group has running consumers (count and partition-seconds).
"""

from __future__ import annotations

import enum
import threading
from collections import Counter
from collections.abc import Iterable

from attrs import frozen

from coordkit.engine.errors import EngineError
from coordkit.engine.groups.events import AssignmentRound, GroupObserver, RebalanceCompleted
from coordkit.kafka.model import TopicPartition


class GroupInvariantError(EngineError, AssertionError):
    """The recorded history of a group breaks one of the protocol's guarantees."""


class ChangeKind(enum.Enum):
    ASSIGNED = "assigned"
    REVOKED = "revoked"
    LOST = "lost"  # given up without a commit (crash, fenced, out of the group)
    CONSUMER_STARTED = "consumer-started"
    CONSUMER_STOPPED = "consumer-stopped"
    UNIVERSE = "universe"  # the group's subscribed partitions, from a stored assignment


@frozen
class OwnershipChange:
    """One entry of a group's log (``member_id`` is the client id for consumer start/stop)."""

    time: float
    kind: ChangeKind
    member_id: str
    generation: int
    partitions: frozenset[TopicPartition]


@frozen
class Unavailability:
    """Partitions without an owner while the group had running consumers.

    :param partitions: distinct partitions that were unowned at some point of the interval.
    :param partition_seconds: the integral of the unowned count over the interval.
    """

    partitions: int
    partition_seconds: float


class _Replay:
    """Ownership reconstructed from a group's log, step by step."""

    def __init__(self) -> None:
        self.owners: Counter[TopicPartition] = Counter()
        self.universe: frozenset[TopicPartition] = frozenset()
        self.unowned: set[TopicPartition] = set()
        self.running = 0

    def apply(self, change: OwnershipChange) -> None:
        kind = change.kind
        if kind is ChangeKind.ASSIGNED:
            for tp in change.partitions:
                self.owners[tp] += 1
                self.unowned.discard(tp)
        elif kind in (ChangeKind.REVOKED, ChangeKind.LOST):
            for tp in change.partitions:
                if self.owners[tp] > 0:
                    self.owners[tp] -= 1
                if self.owners[tp] == 0 and tp in self.universe:
                    self.unowned.add(tp)
        elif kind is ChangeKind.CONSUMER_STARTED:
            self.running += 1
        elif kind is ChangeKind.CONSUMER_STOPPED:
            self.running -= 1
        else:
            self.universe = change.partitions
            self.unowned = {tp for tp in self.universe if self.owners[tp] == 0}

    @property
    def counting(self) -> bool:
        return self.running > 0


class GroupHistory(GroupObserver):
    """Records groups' ownership changes and rebalances (see the module documentation)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._log: dict[str, list[OwnershipChange]] = {}
        self._owners: dict[str, dict[TopicPartition, dict[str, int]]] = {}
        self._rounds: dict[str, list[AssignmentRound]] = {}
        self._joins: dict[str, list[tuple[int, float]]] = {}
        self._rebalances: list[RebalanceCompleted] = []
        self._violations: list[str] = []

    # -- observing -----------------------------------------------------------------------------

    def _append(self, group_id: str, change: OwnershipChange) -> None:
        self._log.setdefault(group_id, []).append(change)

    def consumer_started(self, group_id: str, client_id: str, time: float) -> None:
        with self._lock:
            self._append(
                group_id,
                OwnershipChange(time, ChangeKind.CONSUMER_STARTED, client_id, -1, frozenset()),
            )

    def consumer_stopped(self, group_id: str, client_id: str, crashed: bool, time: float) -> None:
        with self._lock:
            self._append(
                group_id,
                OwnershipChange(time, ChangeKind.CONSUMER_STOPPED, client_id, -1, frozenset()),
            )

    def partitions_assigned(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        partitions: frozenset[TopicPartition],
        time: float,
    ) -> None:
        with self._lock:
            owners = self._owners.setdefault(group_id, {})
            for tp in sorted(partitions):
                holders = owners.setdefault(tp, {})
                for other, other_generation in holders.items():
                    if other != member_id and other_generation == generation:
                        self._violations.append(
                            f"group {group_id!r}: partition {tp} owned by {other} and {member_id} "
                            f"in the same generation {generation}"
                        )
                holders[member_id] = generation
            self._append(
                group_id,
                OwnershipChange(time, ChangeKind.ASSIGNED, member_id, generation, partitions),
            )

    def partitions_revoked(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        partitions: frozenset[TopicPartition],
        lost: bool,
        time: float,
    ) -> None:
        with self._lock:
            owners = self._owners.setdefault(group_id, {})
            for tp in sorted(partitions):
                holders = owners.get(tp, {})
                if member_id not in holders:
                    self._violations.append(
                        f"group {group_id!r}: member {member_id} gave up {tp}, which it did not own"
                    )
                holders.pop(member_id, None)
            kind = ChangeKind.LOST if lost else ChangeKind.REVOKED
            self._append(group_id, OwnershipChange(time, kind, member_id, generation, partitions))

    def join_completed(
        self, group_id: str, generation: int, protocol: str | None, leader: str | None,
        members: tuple[str, ...], time: float,
    ) -> None:  # fmt: skip
        with self._lock:
            joins = self._joins.setdefault(group_id, [])
            if joins and generation <= joins[-1][0]:
                self._violations.append(
                    f"group {group_id!r}: generation went from {joins[-1][0]} to {generation}"
                )
            joins.append((generation, time))

    def assignment_synced(self, round_: AssignmentRound) -> None:
        group = round_.group_id
        problems: list[str] = []
        seen: dict[TopicPartition, str] = {}
        for member, parts in sorted(round_.assigned.items()):
            for tp in sorted(parts):
                if tp in seen:
                    problems.append(
                        f"group {group!r}: generation {round_.generation} assigns {tp} to both "
                        f"{seen[tp]} and {member}"
                    )
                seen[tp] = member
        if round_.cooperative:
            owned_by = {tp: m for m, parts in round_.owned.items() for tp in parts}
            for member, parts in sorted(round_.assigned.items()):
                for tp in sorted(parts):
                    owner = owned_by.get(tp)
                    if owner is not None and owner != member:
                        problems.append(
                            f"group {group!r}: cooperative generation {round_.generation} assigns "
                            f"{tp} to {member} while {owner} still owned it (revoked and assigned "
                            "in the same round)"
                        )
        universe = frozenset(
            TopicPartition(t, p) for t, n in round_.topic_partitions.items() for p in range(n)
        )
        with self._lock:
            self._violations.extend(problems)
            self._rounds.setdefault(group, []).append(round_)
            self._append(
                group,
                OwnershipChange(round_.time, ChangeKind.UNIVERSE, "", round_.generation, universe),
            )

    def rebalance_completed(self, record: RebalanceCompleted) -> None:
        with self._lock:
            self._rebalances.append(record)
            rounds = [
                r
                for r in self._rounds.get(record.group_id, ())
                if r.generation == record.generation
            ]
            if not rounds:
                return
            universe = {
                TopicPartition(t, p)
                for t, n in rounds[-1].topic_partitions.items()
                for p in range(n)
            }
            assigned = [tp for parts in record.assignment.values() for tp in parts]
            missing = universe - set(assigned)
            if record.assignment and missing:
                self._violations.append(
                    f"group {record.group_id!r}: stable generation {record.generation} leaves "
                    f"{len(missing)} partition(s) unassigned, e.g. {sorted(missing)[:5]}"
                )

    # -- checks --------------------------------------------------------------------------------

    def violations(self) -> list[str]:
        with self._lock:
            return list(self._violations)

    def check(self) -> None:
        """Raise :class:`GroupInvariantError` listing every violation recorded so far."""
        problems = self.violations()
        if problems:
            shown = "\n  ".join(problems[:20])
            more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
            raise GroupInvariantError(
                f"{len(problems)} group invariant violation(s):\n  {shown}{more}"
            )

    def check_owned(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Raise unless every one of ``partitions`` has exactly one owner in ``group_id`` now (what
        a stable group guarantees)."""
        expected = set(partitions)
        owners = self.owners(group_id)
        missing = sorted(expected - set(owners))
        doubled = sorted(tp for tp, members in owners.items() if len(members) > 1)
        problems = []
        if missing:
            problems.append(f"{len(missing)} partition(s) without an owner, e.g. {missing[:5]}")
        if doubled:
            problems.append(
                f"{len(doubled)} partition(s) with several owners, e.g. "
                + ", ".join(f"{tp}: {sorted(owners[tp])}" for tp in doubled[:5])
            )
        if problems:
            raise GroupInvariantError(f"group {group_id!r}: " + "; ".join(problems))

    # -- reading -------------------------------------------------------------------------------

    def owners(self, group_id: str) -> dict[TopicPartition, dict[str, int]]:
        """Partition → {member: generation} of the consumers owning it now."""
        with self._lock:
            return {
                tp: dict(holders)
                for tp, holders in self._owners.get(group_id, {}).items()
                if holders
            }

    def changes(self, group_id: str) -> list[OwnershipChange]:
        with self._lock:
            return list(self._log.get(group_id, ()))

    def rounds(self, group_id: str) -> list[AssignmentRound]:
        with self._lock:
            return list(self._rounds.get(group_id, ()))

    def generations(self, group_id: str) -> list[int]:
        """Generations the coordinators began, in order."""
        with self._lock:
            return [g for g, _ in self._joins.get(group_id, ())]

    def rebalances(self, group_id: str | None = None) -> list[RebalanceCompleted]:
        with self._lock:
            return [r for r in self._rebalances if group_id is None or r.group_id == group_id]

    def unavailability(
        self, group_id: str, start: float = float("-inf"), end: float | None = None
    ) -> Unavailability:
        """Unowned partitions of ``group_id`` within ``[start, end]`` (``end``: the last change)."""
        log = self.changes(group_id)
        replay = _Replay()
        ever: set[TopicPartition] = set()
        seconds = 0.0
        last = start
        for change in log:
            if end is not None and change.time > end:
                break
            if change.time > start:
                if replay.counting:
                    seconds += (change.time - max(last, start)) * len(replay.unowned)
                last = change.time
            replay.apply(change)
            if change.time >= start and replay.counting:
                ever |= replay.unowned
        if end is not None and end > last and replay.counting:
            seconds += (end - max(last, start)) * len(replay.unowned)
        return Unavailability(len(ever), seconds)

    def fully_owned_at(self, group_id: str, after: float) -> float | None:
        """The first time at or after ``after`` when every subscribed partition had an owner."""
        replay = _Replay()
        for change in self.changes(group_id):
            replay.apply(change)
            if change.time >= after and replay.universe and not replay.unowned:
                return change.time
        return None
