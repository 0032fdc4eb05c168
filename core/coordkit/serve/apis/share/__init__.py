"""Share groups (KIP-932): the group coordinator's share-group apis and the share-partition
leader's record apis, one module per family.

* :mod:`.group_apis`: ShareGroupHeartbeat, ShareGroupDescribe (the share-group coordinator).
* :mod:`.partition_apis`: ShareFetch, ShareAcknowledge and the share-group offset admin apis
  (the share-partition leader and its persisted state).
"""

from __future__ import annotations

from typing import Any

from coordkit.serve.apis.share.group_apis import SHARE_GROUP_APIS
from coordkit.serve.apis.share.partition_apis import SHARE_PARTITION_APIS

#: api name → (lowest version, highest version, handler), merged into the dispatcher's table.
SHARE_APIS: dict[str, tuple[int, int, Any]] = {**SHARE_GROUP_APIS, **SHARE_PARTITION_APIS}
