"""The assignor suite (:class:`AssignorTests`) and the random groups it checks assignors on.

::

    from coordkit.testing.assignors import AssignorTests

    class TestMyAssignor(AssignorTests):
        @pytest.fixture
        def assignor(self):
            return MyAssignor()
"""

from __future__ import annotations

from coordkit.testing.assignors.groups import (
    claims,
    groups,
    owned_sets,
    subscribed_partitions,
    targets,
    topic_metadata,
    with_owned,
)
from coordkit.testing.assignors.suite import AssignorTests, AssignorTraits
from coordkit.testing.properties import (
    kit_settings,  # first: names the extra if hypothesis is missing
)

__all__ = [
    "AssignorTests",
    "AssignorTraits",
    "claims",
    "groups",
    "kit_settings",
    "owned_sets",
    "subscribed_partitions",
    "targets",
    "topic_metadata",
    "with_owned",
]
