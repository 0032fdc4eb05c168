"""The partition leader election suite on every ``--coordkit-election`` NAME."""

from __future__ import annotations

from coordkit.testing.elections import PartitionElectionTests


class TestPartitionElection(PartitionElectionTests):
    """The partition leader election contract."""
