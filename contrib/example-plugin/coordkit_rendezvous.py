"""A third-party coordkit plugin in one module: the ``rendezvous`` assignor.

Each partition goes to the subscribed member with the highest hash of (member, partition) —
rendezvous hashing — so when a member leaves only its own partitions move. It does not balance
counts exactly; compare it with the built-ins in the lab.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, ClassVar

from coordkit import hookimpl
from coordkit.strategies.assignment import GroupAssignment, GroupSubscription, RebalanceProtocol


def _weight(member: str, topic: str, partition: int) -> bytes:
    return hashlib.blake2b(f"{member}\x00{topic}\x00{partition}".encode(), digest_size=8).digest()


class RendezvousAssignor:
    name: ClassVar[str] = "rendezvous"
    protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)
    # What the conformance kit (coordkit.testing) holds it to beyond every assignor's properties.
    sticky: ClassVar[bool] = True
    count_balanced: ClassVar[bool] = False

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        space = group.space()
        assigned: dict[str, list[int]] = {member: [] for member in group.member_order()}
        for topic in space.topics:
            subscribers = [m for m in assigned if topic in group.members[m].topics]
            if not subscribers:
                continue
            base = space.base(topic)
            for partition in range(space.count(topic)):
                winner = max(subscribers, key=lambda m: _weight(m, topic, partition))
                assigned[winner].append(base + partition)
        return GroupAssignment.from_indices(space, assigned)


@hookimpl
def coordkit_register_assignors(register: Callable[[Any], None]) -> None:
    register(RendezvousAssignor())
