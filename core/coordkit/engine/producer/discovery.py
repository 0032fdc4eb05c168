"""Producer-to-broker balancing (seed 000): which brokers a producer sends to.

* ``static`` — the four-layer (L4) load balancer: the producer's address (``ip:port``) hashes to
  one broker of a list fixed at start; it never learns of brokers added or removed, so once that
  broker dies every send fails, and brokers added later are never used;
* ``zookeeper`` — follow ``/brokers/ids`` with a children watch: brokers that register are used
  as soon as the watch delivers them, brokers whose registration vanished are dropped.

The producer sends a partition's batches to its leader only when discovery connects it to that
broker; partitions led elsewhere are unavailable to it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from coordkit.engine.producer.errors import ProducerError
from coordkit.errors import UnknownNameError
from coordkit.kafka import layout
from coordkit.store import ChildrenEvent, MetadataStore, Watch
from coordkit.store.paths import numeric_name
from coordkit.strategies.partitioning import murmur2, to_positive


@runtime_checkable
class BrokerDiscovery(Protocol):
    """The brokers a producer connects to."""

    @property
    def name(self) -> str: ...

    @property
    def follows_changes(self) -> bool:
        """Learns of brokers coming and going (so an unreachable leader may be cured by waiting
        for fresh metadata); a static mapping never does."""
        ...

    def brokers(self) -> frozenset[int]:
        """Brokers this producer sends to now."""
        ...

    def describe(self) -> str:
        """A short description for error messages."""
        ...

    def close(self) -> None: ...


class StaticDiscovery:
    """The four-layer mapping: ``address`` → one broker of ``bootstrap``, for good.

    :param address: the producer's ``ip:port`` (hashed with murmur2, as an L4 balancer hashes the
        connection's source).
    :param bootstrap: the broker list configured at start (order matters, as in a VIP's pool).
    """

    name = "static"
    follows_changes = False

    def __init__(self, address: str, bootstrap: Sequence[int]):
        pool = list(dict.fromkeys(bootstrap))
        if not pool:
            raise ProducerError(
                f"static broker discovery for producer {address}: the fixed broker list is empty"
            )
        if not address:
            raise ProducerError("static broker discovery needs the producer's address (ip:port)")
        self.address = address
        self.pool = tuple(pool)
        self.broker = pool[to_positive(murmur2(address.encode())) % len(pool)]

    def brokers(self) -> frozenset[int]:
        return frozenset((self.broker,))

    def describe(self) -> str:
        return (
            f"static producer {self.address} (pinned to broker {self.broker} of fixed list "
            f"{list(self.pool)})"
        )

    def close(self) -> None:
        return None


def _broker_ids(children: Iterable[str]) -> frozenset[int]:
    return frozenset(b for c in children if (b := numeric_name(c)) is not None)


class ZooKeeperDiscovery:
    """Follows ``/brokers/ids`` through a children watch on ``store``.

    :param on_change: called (on the store's event thread) with the new broker set.
    """

    name = "zookeeper"
    follows_changes = True

    def __init__(
        self,
        store: MetadataStore,
        on_change: Callable[[frozenset[int]], None] | None = None,
    ):
        self._store = store
        self._on_change = on_change
        self._lock = threading.Lock()
        self.changes = 0
        # Read once now so the first send does not wait for the watch's first delivery.
        store.ensure_path(layout.BROKER_IDS)
        self._brokers = _broker_ids(store.children(layout.BROKER_IDS))
        self._watch: Watch | None = store.watch_children(layout.BROKER_IDS, self._changed)

    def _changed(self, event: ChildrenEvent) -> None:
        brokers = _broker_ids(event.children or ())
        with self._lock:
            if brokers == self._brokers:
                return
            self._brokers = brokers
            self.changes += 1
        if self._on_change is not None:
            self._on_change(brokers)

    def brokers(self) -> frozenset[int]:
        with self._lock:
            return self._brokers

    def describe(self) -> str:
        return f"producer following {layout.BROKER_IDS} (brokers {sorted(self.brokers())})"

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None


#: Broker discovery names (seed 000's two producer load-balancing methods).
DISCOVERY_NAMES = ("static", "zookeeper")


def open_discovery(
    name: str,
    store: MetadataStore,
    *,
    address: str = "",
    bootstrap: Sequence[int] = (),
    on_change: Callable[[frozenset[int]], None] | None = None,
) -> BrokerDiscovery:
    """The broker discovery called ``name``: ``static`` needs ``address`` and ``bootstrap``."""
    if name == "static":
        return StaticDiscovery(address, bootstrap)
    if name == "zookeeper":
        return ZooKeeperDiscovery(store, on_change)
    raise UnknownNameError("broker discovery", name, list(DISCOVERY_NAMES))
