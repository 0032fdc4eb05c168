"""Offsets committed inside a transaction, held by the group's coordinator until the
transaction ends (Kafka's ``GroupMetadata.prepareTxnOffsetCommit`` and
``completePendingTxnOffsetCommit``).

TxnOffsetCommit puts a producer's offsets of a group here; they are nobody's committed offsets
yet. The transaction coordinator then writes its marker to the group's ``__consumer_offsets``
partition, whose leader is the group's coordinator: with a commit marker the producer's pending
offsets of the groups of that partition are stored as the groups' committed offsets (through the
group coordinator's offset storage), with an abort marker they are dropped. Offsets committed
inside a transaction so become visible with its commit and never without it.

Pending offsets live in the coordinator's memory, as Kafka's do between the offsets' append and
the marker; a coordinator that fails over loses them (Kafka's successor reads them back from
``__consumer_offsets``, coordkit's does not: the transaction's commit then leaves the group's
committed offsets where they were, a difference docs/serve.md lists).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from coordkit.kafka.model import TopicPartition
from coordkit.strategies.offsets import OffsetAndMetadata

Offsets = dict[TopicPartition, OffsetAndMetadata]


class PendingTxnOffsets:
    """One broker's pending transactional offsets: producer id → group → offsets."""

    def __init__(self) -> None:
        self._pending: dict[int, dict[str, Offsets]] = {}
        self._epochs: dict[int, int] = {}

    def epoch_of(self, producer_id: int) -> int:
        """The newest epoch of ``producer_id`` seen committing offsets (-1: none)."""
        return self._epochs.get(producer_id, -1)

    def add(
        self,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> None:
        self._epochs[producer_id] = max(producer_epoch, self.epoch_of(producer_id))
        self._pending.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def pending(self, producer_id: int, in_partition: Callable[[str], bool]) -> dict[str, Offsets]:
        """The producer's pending offsets of the groups ``in_partition`` selects."""
        groups = self._pending.get(producer_id, {})
        return {group: dict(offsets) for group, offsets in groups.items() if in_partition(group)}

    def discard(self, producer_id: int, groups: list[str]) -> None:
        """Forget the producer's pending offsets of ``groups`` (stored, or aborted)."""
        found = self._pending.get(producer_id)
        if found is None:
            return
        for group in groups:
            found.pop(group, None)
        if not found:
            del self._pending[producer_id]
