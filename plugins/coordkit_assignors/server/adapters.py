"""coordkit's classic (client-side) assignors offered as server-side ones.

:class:`ClassicAsServerAssignor` hands the classic assignor the group as a consumer leader would
see it: topics by name with their partition counts, racks and loads; members with their
subscriptions, racks, instance ids and, as what they own, their current target (all of one
generation). The result (with anything a cooperative assignor withholds counted as assigned: a
target is where members converge) is the new target. The classic assignor's declared promises
carry over: ``count_balanced`` becomes ``balanced``, ``sticky`` stays.
"""

from __future__ import annotations

import uuid
from typing import Any

from coordkit.strategies.assignment import (
    Assignor,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)
from coordkit.strategies.target_assignment import (
    GroupSpec,
    PartitionAssignorError,
    TargetAssignment,
    TopicDescriber,
)

#: The generation every member's current target is claimed in (one target, no older claims).
CURRENT_TARGET_GENERATION = 1


class ClassicAsServerAssignor:
    """A classic assignor computing server-side targets under the same name."""

    def __init__(self, classic: Assignor):
        self.classic = classic
        self.name = classic.name
        self.balanced = bool(getattr(classic, "count_balanced", True))
        self.sticky = bool(getattr(classic, "sticky", False))

    def __repr__(self) -> str:
        return f"ClassicAsServerAssignor({type(self.classic).__name__})"

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
        names = {t: d.name for t, d in topics.topics.items()}
        ids = {name: t for t, name in names.items()}
        if len(ids) != len(names):
            raise PartitionAssignorError(
                "two topics share a name; the classic assignor needs names"
            )
        metadata: dict[str, Any] = {}
        for d in topics.topics.values():
            metadata[d.name] = TopicMetadata(
                d.partitions,
                None
                if d.partition_racks is None
                else tuple(tuple(sorted(r)) for r in d.partition_racks),
                d.loads,
            )
        members = {}
        for member, spec in group.members.items():
            missing = [t for t in spec.subscribed_topic_ids if t not in names]
            if missing:
                raise PartitionAssignorError(
                    f"Members are subscribed to topic {missing[0]} which doesn't exist in the "
                    "topic metadata."
                )
            members[member] = MemberSubscription(
                [names[t] for t in spec.subscribed_topic_ids],
                instance_id=spec.instance_id,
                owned={names[t]: ps for t, ps in spec.assignment.items() if t in names},
                generation=CURRENT_TARGET_GENERATION,
                rack=spec.rack,
            )
        result = self.classic.assign(GroupSubscription(metadata, members))
        out: dict[str, dict[uuid.UUID, list[int]]] = {}
        for member in group.members:
            target: dict[uuid.UUID, list[int]] = {}
            for tp in [*result.partitions(member), *result.withheld(member)]:
                target.setdefault(ids[tp.topic], []).append(tp.partition)
            out[member] = {t: sorted(ps) for t, ps in target.items()}
        return TargetAssignment(out)
