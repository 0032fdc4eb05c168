"""The partitioner suite on every ``--coordkit-partitioner`` NAME."""

from __future__ import annotations

from coordkit.testing.partitioners import PartitionerTests


class TestPartitioner(PartitionerTests):
    """The partitioner contract."""
