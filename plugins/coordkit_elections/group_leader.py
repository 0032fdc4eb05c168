"""Group-leader strategies: which member of a consumer group computes the assignment.

* ``kafka`` — the first member to join leads; while it stays it keeps leading; when it leaves, the
  earliest-joined remaining member takes over (a restarted static member keeps its place).
* ``lowest-id`` — the member with the lowest ``group.instance.id`` (static members first, in Java
  string order), else the lowest member id, re-chosen every round: a static group gets the same
  leader whatever order its members start in, at the price of moving leadership when a lower id
  joins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import attrs

from coordkit.strategies.assignment import java_string_key
from coordkit.strategies.elections import ElectionKind, LeaderCandidate


def _require(members: Sequence[LeaderCandidate], strategy: str) -> None:
    if not members:
        raise ValueError(f"group-leader strategy {strategy!r}: no members to choose from")


@attrs.frozen
class KafkaGroupLeader:
    name: ClassVar[str] = "kafka"
    description: ClassVar[str] = (
        "first member to join; when it leaves, the earliest-joined remaining member"
    )
    kind: ClassVar[ElectionKind] = ElectionKind.GROUP_LEADER

    def choose_leader(self, current: str | None, members: Sequence[LeaderCandidate]) -> str:
        _require(members, self.name)
        if current is not None and any(m.member_id == current for m in members):
            return current
        return min(members, key=lambda m: m.join_order).member_id


@attrs.frozen
class LowestIdGroupLeader:
    name: ClassVar[str] = "lowest-id"
    description: ClassVar[str] = (
        "lowest group.instance.id (static members first), else lowest member id, every round"
    )
    kind: ClassVar[ElectionKind] = ElectionKind.GROUP_LEADER

    def choose_leader(self, current: str | None, members: Sequence[LeaderCandidate]) -> str:
        _require(members, self.name)

        def key(m: LeaderCandidate) -> tuple[int, bytes, bytes]:
            static = m.group_instance_id is not None
            return (
                0 if static else 1,
                java_string_key(m.group_instance_id or ""),
                java_string_key(m.member_id),
            )

        return min(members, key=key).member_id


GROUP_LEADER_STRATEGIES = (KafkaGroupLeader(), LowestIdGroupLeader())
