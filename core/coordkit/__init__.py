"""coordkit: the coordination layer of partitioned log systems, as pluggable parts.

The core defines the hook specifications (:mod:`coordkit.hookspecs`) and the plugin manager
(:mod:`coordkit.plugins`); Kafka's own model, znode layout and group coordinators
(:mod:`coordkit.kafka`); the metadata store contract with its paths, URLs, watches and change
feeds (:mod:`coordkit.store`); the strategy contracts plugins implement (:mod:`coordkit.strategies`);
the engine (:mod:`coordkit.engine`), ``coordkit serve`` (:mod:`coordkit.serve`) and Kafka's wire
protocol (:mod:`coordkit.protocol`); helpers every layer uses (:mod:`coordkit.support`). Stores,
strategies and the lab are plugins.

The names users import most are importable from ``coordkit`` itself (loaded when first used, so
that ``import coordkit`` stays cheap).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from coordkit import _moved
from coordkit.__about__ import __version__
from coordkit.hookspecs import NAME, hookimpl
from coordkit.plugins import get_plugin_manager, open_store

_moved.install()

#: Public name → the module that defines it.
_LAZY = {
    **dict.fromkeys(
        (
            "Assignor",
            "GroupAssignment",
            "GroupSubscription",
            "MemberSubscription",
            "RebalanceProtocol",
            "TopicMetadata",
        ),
        "coordkit.strategies.assignment",
    ),
    **dict.fromkeys(
        ("ControllerElection", "GroupLeaderSelection", "PartitionLeaderElection"),
        "coordkit.strategies.elections",
    ),
    **dict.fromkeys(("Partitioner", "PartitionerFactory"), "coordkit.strategies.partitioning"),
    **dict.fromkeys(("BrokerMetadata", "ReplicaPlacement"), "coordkit.strategies.placement"),
    **dict.fromkeys(
        ("OffsetAndMetadata", "OffsetStorage", "OffsetStorageFactory"),
        "coordkit.strategies.offsets",
    ),
    **dict.fromkeys(
        ("BrokerInfo", "PartitionState", "TopicAssignment", "TopicPartition"),
        "coordkit.kafka.model",
    ),
    **dict.fromkeys(("MetadataStore", "SessionState", "Stat"), "coordkit.store"),
    "StoreURL": "coordkit.store.urls",
    **dict.fromkeys(("Metric", "Workload"), "coordkit.lab"),
    **dict.fromkeys(
        ("CoordkitError", "StoreError", "NoNodeError", "NodeExistsError"), "coordkit.errors"
    ),
}

__all__ = [
    "NAME",
    "Assignor",
    "BrokerInfo",
    "BrokerMetadata",
    "ControllerElection",
    "CoordkitError",
    "GroupAssignment",
    "GroupLeaderSelection",
    "GroupSubscription",
    "MemberSubscription",
    "MetadataStore",
    "Metric",
    "NoNodeError",
    "NodeExistsError",
    "OffsetAndMetadata",
    "OffsetStorage",
    "OffsetStorageFactory",
    "PartitionLeaderElection",
    "PartitionState",
    "Partitioner",
    "PartitionerFactory",
    "RebalanceProtocol",
    "ReplicaPlacement",
    "SessionState",
    "Stat",
    "StoreError",
    "StoreURL",
    "TopicAssignment",
    "TopicMetadata",
    "TopicPartition",
    "Workload",
    "__version__",
    "get_plugin_manager",
    "hookimpl",
    "open_store",
]

if TYPE_CHECKING:
    from coordkit.errors import CoordkitError, NodeExistsError, NoNodeError, StoreError
    from coordkit.kafka.model import BrokerInfo, PartitionState, TopicAssignment, TopicPartition
    from coordkit.lab import Metric, Workload
    from coordkit.store import MetadataStore, SessionState, Stat
    from coordkit.store.urls import StoreURL
    from coordkit.strategies.assignment import (
        Assignor,
        GroupAssignment,
        GroupSubscription,
        MemberSubscription,
        RebalanceProtocol,
        TopicMetadata,
    )
    from coordkit.strategies.elections import (
        ControllerElection,
        GroupLeaderSelection,
        PartitionLeaderElection,
    )
    from coordkit.strategies.offsets import OffsetAndMetadata, OffsetStorage, OffsetStorageFactory
    from coordkit.strategies.partitioning import Partitioner, PartitionerFactory
    from coordkit.strategies.placement import BrokerMetadata, ReplicaPlacement


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'coordkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
