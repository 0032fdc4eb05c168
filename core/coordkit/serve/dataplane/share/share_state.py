"""The persisted state of one share partition (what Kafka's share coordinator keeps per group,
topic and partition in ``__share_group_state``: ``ShareGroupOffset`` with its
``PersisterStateBatch`` list), as value objects.

Only settled facts are persisted, as in Kafka: an acquisition is not written (Kafka writes on
acknowledgement, release and lock expiry), so a record acquired but not acknowledged when its
leader fails is delivered again with the delivery count it had before that acquisition.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from coordkit.serve.dataplane.share.in_flight import RecordState


def _non_negative(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be at least 0, got {value}")


def _batches(value: Iterable[StateBatch]) -> tuple[StateBatch, ...]:
    return tuple(value)


@attrs.frozen
class StateBatch:
    """Offsets ``first_offset..last_offset`` in one state with one delivery count (Kafka's
    ``PersisterStateBatch``)."""

    first_offset: int = attrs.field(validator=_non_negative)
    last_offset: int
    delivery_state: RecordState = attrs.field(converter=RecordState)
    delivery_count: int = attrs.field(validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        if self.last_offset < self.first_offset:
            raise ValueError(
                f"state batch {self.first_offset}..{self.last_offset}: last offset before first"
            )
        if self.delivery_state in (RecordState.ACQUIRED, RecordState.ARCHIVING):
            # Neither is ever persisted (an acquisition is not written; no dead-letter queue).
            raise ValueError(f"state batch in state {self.delivery_state.name}")


@attrs.frozen
class ShareState:
    """A share partition's persisted state: its start offset, the leader epoch of the leader
    that wrote it, the state epoch (bumped when the group's offsets are reset or deleted) and
    the state batches from the start offset on, in offset order, not overlapping."""

    start_offset: int = attrs.field(validator=_non_negative)
    leader_epoch: int = -1
    state_epoch: int = 0
    batches: tuple[StateBatch, ...] = attrs.field(default=(), converter=_batches)

    def __attrs_post_init__(self) -> None:
        previous = self.start_offset - 1
        for batch in self.batches:
            if batch.first_offset <= previous:
                raise ValueError(
                    f"state batch {batch.first_offset}..{batch.last_offset} overlaps, is out of "
                    f"order or lies before the start offset {self.start_offset}"
                )
            previous = batch.last_offset
