"""Replica placement as a strategy kind: where a topic's partition replicas go, and how to move
existing ones when the brokers change.

A placement strategy (registered through ``coordkit_register_placements``, looked up with
``get_plugin_manager().placement(name)``) answers two questions:

* :meth:`ReplicaPlacement.place` — replica lists for new partitions (a new topic, or a partition
  increase, given the topic's existing partitions);
* :meth:`ReplicaPlacement.rebalance` — for a whole cluster (:class:`ClusterLayout`), the partitions
  whose replica lists should change and their new lists: the plan ``coordkit reassign --generate``
  prints and the controller executes through ``/admin/reassign_partitions``.

The first replica of each list is the partition's preferred leader, so every strategy decides the
leader distribution too. Lists never repeat a broker and have the requested replication factor.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import attrs

#: A partition: ``(topic, partition)``.
TP = tuple[str, int]


@attrs.frozen
class BrokerMetadata:
    """A broker as placement sees it: its id and ``broker.rack`` (``None`` when unset)."""

    id: int
    rack: str | None = None


def brokers_from(racks: Mapping[int, str | None] | Sequence[int]) -> list[BrokerMetadata]:
    """Broker metadata sorted by id, from ``{id: rack}`` or plain ids."""
    if isinstance(racks, Mapping):
        return sorted((BrokerMetadata(b, r) for b, r in racks.items()), key=lambda m: m.id)
    return [BrokerMetadata(b) for b in sorted(racks)]


@attrs.frozen
class ClusterLayout:
    """What a rebalance plan starts from.

    :param brokers: the brokers replicas may be placed on (a removed broker is simply absent).
    :param assignment: topic → partition → replica list (as ``/brokers/topics/T`` holds it).
    :param sizes: bytes per partition (missing: 1), so a strategy can prefer moving small ones.
    """

    brokers: tuple[BrokerMetadata, ...]
    assignment: Mapping[str, Mapping[int, tuple[int, ...]]]
    sizes: Mapping[TP, float] = attrs.field(factory=dict)

    def rack_of(self) -> dict[int, str | None]:
        return {b.id: b.rack for b in self.brokers}

    def size(self, tp: TP) -> float:
        return self.sizes.get(tp, 1.0)


@runtime_checkable
class ReplicaPlacement(Protocol):
    """A replica placement strategy (see the module docstring)."""

    name: str
    description: str

    def place(
        self,
        brokers: Sequence[BrokerMetadata],
        partitions: int,
        replication_factor: int,
        *,
        existing: Mapping[int, Sequence[int]] | None = None,
        rng: random.Random | None = None,
        topic: str = "",
    ) -> dict[int, list[int]]:
        """Replica lists for ``partitions`` new partitions of ``topic``, numbered after its
        ``existing`` ones (from 0 for a new topic); ``rng`` seeds strategies that draw.

        :raises InvalidPartitionsError: ``partitions`` < 1.
        :raises InvalidReplicationFactorError: the factor is < 1 or above the brokers' number.
        """
        ...

    def rebalance(self, layout: ClusterLayout) -> dict[TP, tuple[int, ...]]:
        """Partitions whose replica list should change, with their new lists (unchanged
        partitions are left out; an empty plan means nothing to move)."""
        ...


def moved_replicas(layout: ClusterLayout, plan: Mapping[TP, Sequence[int]]) -> int:
    """Replicas a plan adds to brokers that did not hold them (each is one copy of the data)."""
    moved = 0
    for (topic, partition), replicas in plan.items():
        before = set(layout.assignment.get(topic, {}).get(partition, ()))
        moved += sum(1 for r in replicas if r not in before)
    return moved
