"""ShareGroupHeartbeat and ShareGroupDescribe: the share-group coordinator's apis (issue 37)."""

from __future__ import annotations

from typing import Any

#: api name → (lowest version, highest version, handler); filled as the apis are served.
SHARE_GROUP_APIS: dict[str, tuple[int, int, Any]] = {}
