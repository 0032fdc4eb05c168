"""Server-side (KIP-848) assignors, registered through ``coordkit_register_server_assignors``.

Kafka 4's own ``uniform`` and ``range`` (reproducing the group coordinator's exactly), coordkit's
classic assignors offered server-side (``sticky``, ``weighted-sticky``, ``range-ceil``,
``roundrobin``) and ``rack-aware``, which prefers replicas on the member's rack.
"""

from __future__ import annotations

from coordkit_assignors.server.adapters import ClassicAsServerAssignor
from coordkit_assignors.server.rack_aware import ServerRackAwareAssignor
from coordkit_assignors.server.range import ServerRangeAssignor
from coordkit_assignors.server.uniform import ServerUniformAssignor

#: The classic assignors offered server-side too (cooperative-sticky's target is sticky's).
CLASSIC_NAMES = ("sticky", "weighted-sticky", "range-ceil", "roundrobin")

__all__ = [
    "CLASSIC_NAMES",
    "ClassicAsServerAssignor",
    "ServerRackAwareAssignor",
    "ServerRangeAssignor",
    "ServerUniformAssignor",
]
