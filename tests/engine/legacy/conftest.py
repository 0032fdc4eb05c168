"""Legacy-consumer fixtures (the world itself is in :mod:`engine.legacy.world`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from coordkit.store import MetadataStore
from engine.legacy.world import LegacyWorld


@pytest.fixture
def world(open_session: Callable[[], MetadataStore]) -> Iterator[LegacyWorld]:
    instance = LegacyWorld(open_session)
    yield instance
    instance.close()
