"""The assignor suite on every ``--coordkit-assignor`` NAME."""

from __future__ import annotations

from coordkit.testing.assignors import AssignorTests


class TestAssignor(AssignorTests):
    """The assignor contract."""
