"""The store contract suite, as test classes to subclass (one per concept) or all at once.

::

    from coordkit.testing.store import StoreTests

    class TestMyStore(StoreTests):
        pass

The classes take their backend from the ``coordkit_store_backend`` fixture (see
:mod:`coordkit.testing`). Tests needing a capability the backend lacks are reported as not
applicable.
"""

from __future__ import annotations

from coordkit.testing.properties import (
    kit_settings,  # first: names the extra if hypothesis is missing
)
from coordkit.testing.store.base import Recorder, StoreSuite, snapshot
from coordkit.testing.store.bulk import StoreBulkTests
from coordkit.testing.store.clock import StoreClockTests
from coordkit.testing.store.durability import StoreDurabilityTests
from coordkit.testing.store.ephemeral import StoreEphemeralTests
from coordkit.testing.store.feeds import FeedRecorder, StoreFeedTests, TreeImage
from coordkit.testing.store.hosts import StoreMultiHostTests
from coordkit.testing.store.model import StoreModelTests
from coordkit.testing.store.nodes import StoreNodeTests
from coordkit.testing.store.processes import StoreProcessTests
from coordkit.testing.store.sequential import StoreSequentialTests
from coordkit.testing.store.sessions import StoreSessionTests
from coordkit.testing.store.transactions import StoreTransactionTests
from coordkit.testing.store.watches import StoreWatchTests

__all__ = [
    "FeedRecorder",
    "Recorder",
    "StoreBulkTests",
    "StoreClockTests",
    "StoreDurabilityTests",
    "StoreEphemeralTests",
    "StoreFeedTests",
    "StoreModelTests",
    "StoreMultiHostTests",
    "StoreNodeTests",
    "StoreProcessTests",
    "StoreSequentialTests",
    "StoreSessionTests",
    "StoreSuite",
    "StoreTests",
    "StoreTransactionTests",
    "StoreWatchTests",
    "TreeImage",
    "kit_settings",
    "snapshot",
]


class StoreTests(
    StoreNodeTests,
    StoreSessionTests,
    StoreEphemeralTests,
    StoreSequentialTests,
    StoreWatchTests,
    StoreFeedTests,
    StoreTransactionTests,
    StoreBulkTests,
    StoreModelTests,
    StoreProcessTests,
    StoreMultiHostTests,
    StoreDurabilityTests,
    StoreClockTests,
):
    """The whole store contract."""
