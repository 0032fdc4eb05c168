"""The group-coordinator suite on every ``--coordkit-group-coordinator`` NAME."""

from __future__ import annotations

from coordkit.testing.elections import GroupCoordinatorSelectionTests


class TestGroupCoordinatorSelection(GroupCoordinatorSelectionTests):
    """The group-coordinator strategy contract."""
