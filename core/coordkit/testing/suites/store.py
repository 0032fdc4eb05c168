"""The whole store suite on every ``--coordkit-store`` URL."""

from __future__ import annotations

from coordkit.testing.store import StoreTests


class TestStore(StoreTests):
    """The store contract."""
