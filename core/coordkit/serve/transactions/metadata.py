"""A transactional id's state (Kafka's ``TransactionMetadata`` and ``TransactionState``), and how
it is kept in the metadata store.

The states and their moves are Kafka's: ``Empty`` → ``Ongoing`` (partitions added) →
``PrepareCommit`` / ``PrepareAbort`` (EndTxn, or the coordinator aborting a timed-out or fenced
transaction) → ``CompleteCommit`` / ``CompleteAbort`` once every partition has its marker → back
to ``Ongoing`` with the next partitions added. ``PrepareEpochFence`` is Kafka's name for an
``Ongoing`` transaction a new InitProducerId fences: it is aborted with the producer's next epoch.

**The store layout.** Each transactional id is one node, ``/coordkit/transaction_state/<id>``
(the id percent-encoded, dots too, so that any id is one node name), holding JSON with the
fields of Kafka's ``TransactionLogValue`` (``__transaction_state``'s records)::

    {"version":0,"producerId":4000,"producerEpoch":3,"transactionTimeoutMs":60000,
     "transactionStatus":"Ongoing","transactionPartitions":[{"topic":"t","partitionIds":[0,1]}],
     "transactionLastUpdateTimestampMs":1700000000000,"transactionStartTimestampMs":1700000000000}

Every write is checked against the node's version the coordinator last read or wrote, so a
coordinator that lost its partition (another broker wrote since) cannot overwrite its
successor: it answers NOT_COORDINATOR. Why the store and not ``__transaction_state``'s records:
coordkit's group coordinator keeps group state and offsets in the store too (no offsets topic
log is read back), so a coordinator moves to another broker or process by reading the store,
the same way for both coordinators, on every backend.
"""

from __future__ import annotations

import enum
import json
import urllib.parse
from collections.abc import Iterable

import attrs

from coordkit.engine.states import TP
from coordkit.errors import LayoutError
from coordkit.support import jsontext

STATE_ROOT = "/coordkit/transaction_state"
VALUE_VERSION = 0
#: Kafka's ``RecordBatch.NO_PRODUCER_EPOCH`` and the epoch past which a producer id is rotated.
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 2**15 - 1
_MAX_INT64 = 2**63 - 1


class TxnState(enum.Enum):
    """Kafka's ``TransactionState`` (its names are what DescribeTransactions answers)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def completed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


def state_path(transactional_id: str) -> str:
    """The node of ``transactional_id``."""
    name = urllib.parse.quote(transactional_id, safe="").replace(".", "%2E")
    return f"{STATE_ROOT}/{name}"


def transactional_id_of(name: str) -> str:
    """The transactional id a node name under :data:`STATE_ROOT` stands for."""
    return urllib.parse.unquote(name)


@attrs.define(eq=False)
class TransactionMetadata:
    """One transactional id's state as its coordinator keeps it (mutable: the coordinator moves
    it under the id's lock). ``version``: the store node's version (``None``: not written)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TP] = attrs.field(factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    version: int | None = None
    #: Markers being written (or a write pending): other requests get CONCURRENT_TRANSACTIONS.
    pending: bool = False

    def encode(self) -> bytes:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return json.dumps(
            {"version": VALUE_VERSION, "producerId": self.producer_id,
             "producerEpoch": self.producer_epoch, "transactionTimeoutMs": self.timeout_ms,
             "transactionStatus": self.state.value,
             "transactionPartitions": [{"topic": t, "partitionIds": p}
                                       for t, p in by_topic.items()],
             "transactionLastUpdateTimestampMs": self.last_update_ms,
             "transactionStartTimestampMs": self.start_ms},
            separators=(",", ":"),
        ).encode()  # fmt: skip

    @classmethod
    def decode(
        cls, transactional_id: str, path: str, data: bytes, version: int
    ) -> TransactionMetadata:
        """The state a node holds (a store is not trusted: every field is checked).

        :raises LayoutError: not a transaction state of this layout.
        """
        try:
            obj = jsontext.loads(data)
            if obj["version"] != VALUE_VERSION:
                raise ValueError(f"version {obj['version']!r}, expected {VALUE_VERSION}")
            partitions = set(_partitions(obj["transactionPartitions"]))
            found = cls(
                transactional_id,
                producer_id=_long(obj["producerId"], 0),
                producer_epoch=_long(obj["producerEpoch"], NO_PRODUCER_EPOCH, MAX_PRODUCER_EPOCH),
                timeout_ms=_long(obj["transactionTimeoutMs"], 1, 2**31 - 1),
                state=TxnState(obj["transactionStatus"]),
                partitions=partitions,
                start_ms=_long(obj["transactionStartTimestampMs"], -1),
                last_update_ms=_long(obj["transactionLastUpdateTimestampMs"], -1),
                version=version,
            )
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise LayoutError(path, f"not a transaction state ({exc})") from None
        return found


def _long(value: object, low: int, high: int = _MAX_INT64) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{value!r} is not a whole number in [{low}, {high}]")
    return value


def _partitions(entries: object) -> Iterable[TP]:
    if not isinstance(entries, list):
        raise TypeError("transactionPartitions is not a list")
    for entry in entries:
        topic = entry["topic"]
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic {topic!r}")
        for partition in entry["partitionIds"]:
            yield topic, _long(partition, 0, 2**31 - 1)
