"""Transactions: the transaction coordinator's apis (InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions,
ListTransactions) and the partition leader's WriteTxnMarkers (issue 38)."""

from __future__ import annotations

from typing import Any

#: api name → (lowest version, highest version, handler); filled as the apis are served.
TRANSACTION_APIS: dict[str, tuple[int, int, Any]] = {}
