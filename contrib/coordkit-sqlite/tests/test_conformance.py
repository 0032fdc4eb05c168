"""The sqlite store passes coordkit's whole store contract suite."""

from __future__ import annotations

from coordkit.testing.store import StoreTests


class TestSqliteStore(StoreTests):
    """Every test of the kit's store suite, on the backend of ``conftest.py``."""
