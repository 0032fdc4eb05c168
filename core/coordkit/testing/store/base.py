"""What every store test class shares: the per-test fixtures and the capability check."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from coordkit.store import ChildrenEvent, DataEvent, MetadataStore, SessionState, read_tree
from coordkit.testing.backends import StoreBackend, StoreFactory, skip_unless_applicable

KIT_MARKER = pytest.mark.coordkit_kit("store")


@KIT_MARKER
class StoreSuite:
    """Base of the store test classes. Fixtures (all per test): ``store_backend`` (the session's
    ``coordkit_store_backend``), ``store_url`` (a fresh namespace), ``open_session`` (opens more
    sessions on it, all closed after the test), ``store`` and ``other`` (two sessions)."""

    @pytest.fixture
    def store_backend(self, coordkit_store_backend: StoreBackend) -> StoreBackend:
        return coordkit_store_backend

    @pytest.fixture(autouse=True)
    def _coordkit_applicable(
        self, request: pytest.FixtureRequest, store_backend: StoreBackend
    ) -> None:
        skip_unless_applicable(store_backend, request.node)

    @pytest.fixture
    def store_url(self, store_backend: StoreBackend) -> str:
        return store_backend.new_url()

    @pytest.fixture
    def open_session(self, store_backend: StoreBackend, store_url: str) -> Iterator[StoreFactory]:
        """Open further sessions on the same namespace; all are closed after the test."""
        opened: list[MetadataStore] = []

        def factory(**options: Any) -> MetadataStore:
            store = store_backend.open(store_url, **options)
            opened.append(store)
            return store

        yield factory
        for store in opened:
            if store.state is not SessionState.CLOSED:
                store.close()

    @pytest.fixture
    def store(self, open_session: StoreFactory) -> MetadataStore:
        return open_session()

    @pytest.fixture
    def other(self, open_session: StoreFactory) -> MetadataStore:
        """A second session on the same namespace."""
        return open_session()


class Recorder:
    """A watch callback that keeps every event it receives (thread-safe)."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.lock = threading.Lock()

    def __call__(self, event: DataEvent | ChildrenEvent) -> None:
        with self.lock:
            self.events.append(event)

    def last(self) -> Any:
        with self.lock:
            return self.events[-1] if self.events else None

    def values(self) -> list[bytes | None]:
        with self.lock:
            return [e.data for e in self.events]

    def count(self) -> int:
        with self.lock:
            return len(self.events)


def snapshot(store: MetadataStore, root: str = "/") -> dict[str, tuple[bytes, int]]:
    """Every node under ``root``: path → (data, version)."""
    return {path: (data, stat.version) for path, (data, stat) in read_tree(store, root).items()}
