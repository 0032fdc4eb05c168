"""Every built-in partitioner through the conformance kit's partitioner suite
(coordkit.testing.partitioners), the suite third-party partitioners run."""

from __future__ import annotations

from typing import Any

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.testing.partitioners import PartitionerTests

BUILT_IN = ("explicit", "murmur2", "round-robin", "sticky", "uniform-sticky")


class TestBuiltInPartitioners(PartitionerTests):
    @pytest.fixture(params=BUILT_IN)
    def partitioner_factory(self, request: pytest.FixtureRequest) -> Any:
        return get_plugin_manager().partitioner(request.param)


def test_every_built_in_partitioner_runs_the_kit() -> None:
    registered = {
        r.name
        for r in get_plugin_manager().partitioners
        if r.value.build.__module__.startswith("coordkit_partitioners")
    }
    assert registered == set(BUILT_IN)
