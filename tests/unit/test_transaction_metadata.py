"""A transactional id's state as the transaction coordinator keeps it in the store (issue 38):
Kafka's ``TransactionLogValue`` fields as JSON, every field of a stored value checked (a store is
not trusted), any transactional id one node name."""

from __future__ import annotations

import json

import pytest

from coordkit.errors import LayoutError
from coordkit.serve.transactions.metadata import (
    STATE_ROOT,
    TransactionMetadata,
    TxnState,
    state_path,
    transactional_id_of,
)


def _ongoing() -> TransactionMetadata:
    return TransactionMetadata("payments", 4000, 3, 60_000, TxnState.ONGOING,
                               {("t", 1), ("t", 0), ("u", 2)}, start_ms=10, last_update_ms=20)  # fmt: skip


def test_the_value_is_kafkas_transaction_log_value_fields() -> None:
    encoded = json.loads(_ongoing().encode())
    assert encoded == {
        "version": 0, "producerId": 4000, "producerEpoch": 3, "transactionTimeoutMs": 60_000,
        "transactionStatus": "Ongoing",
        "transactionPartitions": [{"topic": "t", "partitionIds": [0, 1]},
                                  {"topic": "u", "partitionIds": [2]}],
        "transactionLastUpdateTimestampMs": 20, "transactionStartTimestampMs": 10,
    }  # fmt: skip
    decoded = TransactionMetadata.decode("payments", "/p", _ongoing().encode(), 7)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.state, decoded.partitions,
            decoded.version) == (4000, 3, TxnState.ONGOING, {("t", 0), ("t", 1), ("u", 2)}, 7)  # fmt: skip


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"version": 1}, "version 1"),
        ({"producerId": -5}, "-5"),
        ({"producerEpoch": 40_000}, "40000"),
        ({"transactionTimeoutMs": 0}, "0 is not"),
        ({"transactionStatus": "Sleeping"}, "Sleeping"),
        ({"transactionPartitions": [{"topic": "", "partitionIds": [0]}]}, "topic ''"),
        ({"transactionPartitions": [{"topic": "t", "partitionIds": ["0"]}]}, "'0'"),
        ({"producerId": True}, "True"),
    ],
)
def test_a_stored_value_that_is_not_a_state_is_refused_naming_the_node(
    change: dict[str, object], why: str
) -> None:
    value = {**json.loads(_ongoing().encode()), **change}
    with pytest.raises(LayoutError, match=f"/coordkit/transaction_state/payments.*{why}"):
        TransactionMetadata.decode(
            "payments", state_path("payments"), json.dumps(value).encode(), 0
        )


def test_garbage_is_refused() -> None:
    with pytest.raises(LayoutError, match="not a transaction state"):
        TransactionMetadata.decode("x", state_path("x"), b"\xff{", 0)


@pytest.mark.parametrize("transactional_id", ["a/b", ".", "..", "zookeeper", "ü-id", "a%2Fb"])
def test_any_transactional_id_is_one_node_name(transactional_id: str) -> None:
    path = state_path(transactional_id)
    name = path.removeprefix(f"{STATE_ROOT}/")
    assert "/" not in name
    assert name not in (".", "..")
    assert name.isascii()
    assert transactional_id_of(name) == transactional_id
