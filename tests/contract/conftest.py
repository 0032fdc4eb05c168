from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from coordkit.store import MetadataStore, SessionState
from harness.backends import Backend, StoreFactory


@pytest.fixture
def store_url(backend: Backend) -> str:
    return backend.new_url()


@pytest.fixture
def open_session(backend: Backend, store_url: str) -> Iterator[StoreFactory]:
    """Open further sessions on the same namespace; all are closed after the test."""
    opened: list[MetadataStore] = []

    def factory(**options: Any) -> MetadataStore:
        store = backend.open(store_url, **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        if store.state is not SessionState.CLOSED:
            store.close()


@pytest.fixture
def store(open_session: StoreFactory) -> MetadataStore:
    return open_session()


@pytest.fixture
def other(open_session: StoreFactory) -> MetadataStore:
    """A second session on the same namespace."""
    return open_session()
