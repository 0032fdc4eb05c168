"""Transactions: the transaction coordinator's apis (InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions,
ListTransactions) and the partition leader's WriteTxnMarkers (issue 38), one module per api.

* :mod:`.write_txn_markers`: WriteTxnMarkers (a partition leader appends a coordinator's marker).
"""

from __future__ import annotations

from typing import Any

from coordkit.serve.apis.transactions import write_txn_markers

#: api name → (lowest version, highest version, handler); filled as the apis are served.
TRANSACTION_APIS: dict[str, tuple[int, int, Any]] = {
    "WriteTxnMarkers": (*write_txn_markers.VERSIONS, write_txn_markers.handle_write_txn_markers),
}
