"""The store contract suite is coordkit.testing's (tests/contract/test_store.py runs it): this
points the kit at the ``--backend`` stores (memory, a private ZooKeeper server, a private
redis-server)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from coordkit.testing import StoreBackend
from harness.backends import ClockedMemoryBackend
from harness.redis_server import RedisBackend

#: Backends the contract suite builds for itself, so that every capability it can offer applies:
#: memory sessions on a manual clock, Redis with every write fsynced (durable). The engine tests
#: keep the plain ones.
OWN_BACKENDS: dict[str, Callable[[], StoreBackend]] = {
    "memory": ClockedMemoryBackend,
    "redis": lambda: RedisBackend(durable=True),
}


@pytest.fixture(scope="session")
def coordkit_store_backend(
    backend_name: str, request: pytest.FixtureRequest
) -> Iterator[StoreBackend]:
    """The ``--backend`` store as the kit sees it."""
    make = OWN_BACKENDS.get(backend_name)
    if make is None:
        yield request.getfixturevalue("backend")
        return
    own = make()
    try:
        yield own
    finally:
        own.close()
