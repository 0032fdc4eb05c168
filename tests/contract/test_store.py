"""The store contract suite (coordkit.testing.store) on every built-in store backend."""

from __future__ import annotations

import pytest

from coordkit.testing import Capability, StoreBackend
from coordkit.testing.backends import capabilities_of
from coordkit.testing.store import StoreTests

#: What each built-in backend offers the suite, so that none loses a capability (and with it a
#: share of the suite) unnoticed.
EXPECTED_CAPABILITIES = {
    "memory": set(Capability)
    - {
        Capability.DURABLE,
        Capability.SHARED_ACROSS_PROCESSES,
        Capability.MULTI_HOST,
        Capability.RESTART_SERVER,
    },
    # ZooKeeper's feed cannot replay history: it resumes by RESYNC.
    "zookeeper": set(Capability) - {Capability.ADVANCE_CLOCK, Capability.CHANGE_FEED_HISTORY},
    "redis": set(Capability) - {Capability.ADVANCE_CLOCK},
}


class TestStore(StoreTests):
    """Every test of the kit's store suite."""


def test_built_in_backends_declare_their_capabilities(
    backend_name: str, coordkit_store_backend: StoreBackend
) -> None:
    assert set(capabilities_of(coordkit_store_backend)) == EXPECTED_CAPABILITIES[backend_name]


@pytest.mark.parametrize("capability", list(Capability))
def test_every_capability_is_offered_by_some_built_in_backend(capability: Capability) -> None:
    assert any(capability in offered for offered in EXPECTED_CAPABILITIES.values())
