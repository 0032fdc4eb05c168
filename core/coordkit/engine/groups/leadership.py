"""Which member leads a group: the contract of group-leader strategies (kind ``group-leader``).

The coordinator asks the configured strategy at the end of every join round, over the members that
rejoined, in the order they first joined the group (a static member that restarts keeps its
place). Kafka's rule (strategy ``kafka``): the first member to join leads; when the leader leaves,
another member takes over. Strategies are plugins registered with ``coordkit_register_elections``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from attrs import field, frozen, validators

from coordkit.elections import ElectionKind


@frozen
class LeaderCandidate:
    """A member that completed the join round.

    :param join_order: when it first joined the group (smaller is earlier).
    """

    member_id: str = field(validator=validators.min_len(1))
    group_instance_id: str | None
    join_order: int


@runtime_checkable
class GroupLeaderSelection(Protocol):
    """A group-leader strategy."""

    kind: ElectionKind
    name: str
    description: str

    def choose_leader(self, current: str | None, members: Sequence[LeaderCandidate]) -> str:
        """The leader's member id among ``members`` (non-empty, earliest joined first).

        :param current: the leader of the previous generation if it rejoined, else ``None``.
        """
        ...
