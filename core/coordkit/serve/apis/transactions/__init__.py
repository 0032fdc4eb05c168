"""Transactions: the transaction coordinator's apis (InitProducerId with a transactional id is
:mod:`coordkit.serve.apis.init_producer_id`'s) and the partition leader's WriteTxnMarkers
(issue 38), one module per family.

* :mod:`.coordinator_apis`: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn;
* :mod:`.listing`: DescribeTransactions, ListTransactions;
* :mod:`.txn_offset_commit`: TxnOffsetCommit (the group coordinator's);
* :mod:`.write_txn_markers`: WriteTxnMarkers (a partition leader appends a coordinator's marker).
"""

from __future__ import annotations

from typing import Any

from coordkit.serve.apis.transactions import (
    coordinator_apis,
    listing,
    txn_offset_commit,
    write_txn_markers,
)

#: api name → (lowest version, highest version, handler), merged into the dispatcher's table.
TRANSACTION_APIS: dict[str, tuple[int, int, Any]] = {
    "AddPartitionsToTxn": (*coordinator_apis.ADD_PARTITIONS_VERSIONS,
                           coordinator_apis.handle_add_partitions_to_txn),
    "AddOffsetsToTxn": (*coordinator_apis.ADD_OFFSETS_VERSIONS,
                        coordinator_apis.handle_add_offsets_to_txn),
    "EndTxn": (*coordinator_apis.END_TXN_VERSIONS, coordinator_apis.handle_end_txn),
    "DescribeTransactions": (*listing.DESCRIBE_VERSIONS, listing.handle_describe_transactions),
    "ListTransactions": (*listing.LIST_VERSIONS, listing.handle_list_transactions),
    "TxnOffsetCommit": (*txn_offset_commit.VERSIONS, txn_offset_commit.handle_txn_offset_commit),
    "WriteTxnMarkers": (*write_txn_markers.VERSIONS, write_txn_markers.handle_write_txn_markers),
}  # fmt: skip
