"""ShareFetch, ShareAcknowledge and the share-group offset admin apis: the share-partition
leader's apis (issue 37)."""

from __future__ import annotations

from typing import Any

#: api name → (lowest version, highest version, handler); filled as the apis are served.
SHARE_PARTITION_APIS: dict[str, tuple[int, int, Any]] = {}
