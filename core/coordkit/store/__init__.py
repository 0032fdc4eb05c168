"""The metadata store contract: ZooKeeper's data model, because Kafka's layout assumes it.

Every backend (memory, ZooKeeper, Redis) implements :class:`MetadataStore`; the contract suite in
``tests/contract`` holds them all to the same behaviour. Errors come from :mod:`coordkit.errors` and
are re-exported here.
"""

from __future__ import annotations

from coordkit.errors import (
    AuthFailedError,
    BadVersionError,
    ConnectionLossError,
    DataTooLargeError,
    InvalidPathError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
    UnsupportedError,
)
from coordkit.store.data_model import (
    ANY_VERSION,
    MAX_DATA_SIZE,
    ReadOnlyError,
    SessionState,
    Stat,
    StatColumns,
    StoreCharacteristics,
)
from coordkit.store.events import (
    ChildrenCallback,
    ChildrenEvent,
    DataCallback,
    DataEvent,
    SessionListener,
    TreeCallback,
    TreeEvent,
    TreeEventKind,
    TreeWatch,
    Watch,
)
from coordkit.store.interface import MetadataStore, Transaction
from coordkit.store.ops import (
    Check,
    Create,
    Delete,
    Op,
    SetData,
    check_data,
    check_set_columns,
    describe_op,
    set_many_ops,
)
from coordkit.store.sessions import KeptSessionStore, SessionKeeper
from coordkit.store.tree import read_tree, tree_paths

__all__ = [
    "ANY_VERSION",
    "MAX_DATA_SIZE",
    "AuthFailedError",
    "BadVersionError",
    "Check",
    "ChildrenCallback",
    "ChildrenEvent",
    "ConnectionLossError",
    "Create",
    "DataCallback",
    "DataEvent",
    "DataTooLargeError",
    "Delete",
    "InvalidPathError",
    "KeptSessionStore",
    "MetadataStore",
    "NoAuthError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "ReadOnlyError",
    "SessionExpiredError",
    "SessionKeeper",
    "SessionListener",
    "SessionState",
    "SetData",
    "Stat",
    "StatColumns",
    "StoreCharacteristics",
    "StoreClosedError",
    "StoreError",
    "Transaction",
    "TreeCallback",
    "TreeEvent",
    "TreeEventKind",
    "TreeWatch",
    "UnsupportedError",
    "Watch",
    "check_data",
    "check_set_columns",
    "describe_op",
    "read_tree",
    "set_many_ops",
    "tree_paths",
]
