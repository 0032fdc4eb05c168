"""What one run of the broker-scaling workload draws from its seed: the cluster, its topics and
the changes (brokers added or removed, a rack lost); shared by the workload and the engine run."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from coordkit.strategies.placement import TP

ADD, REMOVE, LOSE_RACK = "add-broker", "remove-broker", "lose-rack"

Assignment = dict[str, dict[int, tuple[int, ...]]]


@attrs.frozen
class ScalingEvent:
    """One change: ``kind`` is ``add-broker``, ``remove-broker`` or ``lose-rack``; ``brokers``
    the broker added, the broker removed, or the brokers the lost ``rack`` held."""

    kind: str
    brokers: tuple[int, ...]
    rack: str | None = None

    def label(self) -> str:
        where = f" (rack {self.rack})" if self.rack is not None else ""
        match self.kind:
            case "add-broker":
                return f"add broker {self.brokers[0]}{where}"
            case "remove-broker":
                return f"remove broker {self.brokers[0]}{where}"
        return f"lose rack {self.rack} (brokers {', '.join(map(str, self.brokers))})"


@attrs.frozen
class ScalingCase:
    """Everything a run draws from its seed.

    :param racks: every broker that ever exists → its rack (``None`` without racks).
    :param initial: the brokers the cluster starts with.
    :param sizes: GB per partition.
    :param placement_seed: seeds the strategies' initial placement (Kafka's random start).
    """

    racks: Mapping[int, str | None]
    initial: tuple[int, ...]
    topics: int
    partitions: int
    replication_factor: int
    sizes: Mapping[TP, float]
    events: tuple[ScalingEvent, ...]
    placement_seed: int
    records: int
    max_moving: int

    def topic_names(self) -> list[str]:
        return [topic_name(t) for t in range(self.topics)]


def topic_name(index: int) -> str:
    return f"scale-{index:03d}"
