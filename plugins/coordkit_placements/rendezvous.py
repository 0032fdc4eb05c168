"""``rendezvous``: each partition's replicas are the brokers that score highest for it.

Rendezvous (highest-random-weight) hashing in CRUSH's ``straw2`` form (Weil et al., "CRUSH:
Controlled, Scalable, Decentralized Placement of Replicated Data", SC'06; Ceph's straw2 bucket):
every broker draws ``ln(u) / weight`` with ``u`` a uniform hash of (topic, partition, broker), and
the highest draws win, in order, so the first is the preferred leader. Racks stay distinct while
the partition does not use every rack (a draw on a used rack is skipped).

Nothing is stored and nothing is random: the same brokers give the same placement, and a broker
joining takes over exactly the replicas it now outscores — about RF/N of them — while a broker
leaving hands only its own replicas to the next-highest draws. Balance is statistical (each broker
gets a 1/N share in expectation), not within one replica.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence

from coordkit.engine.errors import InvalidPartitionsError, InvalidReplicationFactorError
from coordkit.strategies.placement import TP, BrokerMetadata, ClusterLayout


def _draw(topic: str, partition: int, broker: int, weight: float = 1.0) -> float:
    digest = hashlib.blake2b(f"{topic}\x00{partition}\x00{broker}".encode(), digest_size=8)
    u = (int.from_bytes(digest.digest(), "big") + 0.5) / 2.0**64
    return math.log(u) / weight


def rank(topic: str, partition: int, brokers: Sequence[BrokerMetadata], factor: int) -> list[int]:
    """The ``factor`` brokers with the highest draws for ``topic``-``partition``, racks distinct
    while the partition does not use every rack."""
    ordered = sorted(brokers, key=lambda b: (-_draw(topic, partition, b.id), b.id))
    n_racks = len({b.rack for b in brokers if b.rack is not None})
    chosen: list[int] = []
    racks: set[str | None] = set()
    skipped: list[BrokerMetadata] = []
    for broker in ordered:
        if len(chosen) == factor:
            break
        if n_racks and broker.rack in racks and len(racks) < n_racks:
            skipped.append(broker)
            continue
        chosen.append(broker.id)
        racks.add(broker.rack)
    for broker in skipped:  # racks exhausted: fill from the best draws skipped
        if len(chosen) == factor:
            break
        chosen.append(broker.id)
    return chosen


class RendezvousPlacement:
    name = "rendezvous"
    description = (
        "rendezvous hashing (CRUSH straw2): replicas are the highest hash draws per partition; a "
        "broker joining moves about RF/N of the replicas, deterministic, no state"
    )

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
        if partitions <= 0:
            raise InvalidPartitionsError(
                f"number of partitions must be larger than 0, got {partitions}"
            )
        if not 0 < replication_factor <= len(brokers):
            raise InvalidReplicationFactorError(
                f"replication factor: {replication_factor} larger than available brokers: "
                f"{len(brokers)}"
                if replication_factor > 0
                else f"replication factor must be larger than 0, got {replication_factor}"
            )
        first = len(existing or {})
        return {
            p: rank(topic, p, brokers, replication_factor) for p in range(first, first + partitions)
        }

    def rebalance(self, layout: ClusterLayout) -> dict[TP, tuple[int, ...]]:
        plan: dict[TP, tuple[int, ...]] = {}
        for topic in sorted(layout.assignment):
            for partition, replicas in sorted(layout.assignment[topic].items()):
                wanted = tuple(rank(topic, partition, layout.brokers, len(replicas)))
                if wanted != tuple(replicas):
                    plan[(topic, partition)] = wanted
        return plan
