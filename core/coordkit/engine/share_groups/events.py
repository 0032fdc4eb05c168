"""What the share-group coordinator tells the share-partition side (KIP-932).

Kafka's ``SharePartitionManager`` releases the records a member had acquired when the member
leaves its share group (or is fenced by its session timeout), and deleting a share group deletes
its share-partition state. The coordinator does not know the share partitions; it tells whoever
registered a :class:`ShareGroupListener` (the broker's share-partition manager) through
:class:`ShareGroupListeners`. Listener failures are logged, never raised into the coordinator,
which has already stored the change.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol, runtime_checkable

log = logging.getLogger("coordkit.engine.share_groups")

__all__ = ["ShareGroupListener", "ShareGroupListeners"]


@runtime_checkable
class ShareGroupListener(Protocol):
    """Told of share-group membership ends. Called on the coordinator's thread after the change
    is stored, outside the group's lock: keep it quick, hand heavy work to another thread."""

    def on_member_left(self, group_id: str, member_id: str) -> None:
        """A member left (ShareGroupHeartbeat with epoch -1) or was fenced (session timeout):
        the records it acquired may be released at once."""

    def on_group_deleted(self, group_id: str) -> None:
        """The share group was deleted (DeleteGroups): its share-partition state goes too."""


class ShareGroupListeners:
    """The listeners registered on one coordinator; the coordinator calls :meth:`member_left`
    and :meth:`group_deleted`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: tuple[ShareGroupListener, ...] = ()

    def add(self, listener: ShareGroupListener) -> None:
        with self._lock:
            if listener not in self._listeners:
                self._listeners = (*self._listeners, listener)

    def remove(self, listener: ShareGroupListener) -> None:
        with self._lock:
            self._listeners = tuple(x for x in self._listeners if x is not listener)

    def __len__(self) -> int:
        return len(self._listeners)

    def member_left(self, group_id: str, member_id: str) -> None:
        for listener in self._listeners:
            try:
                listener.on_member_left(group_id, member_id)
            except Exception:
                log.exception("share group %r: listener failed on member %r leaving",
                              group_id, member_id)  # fmt: skip

    def group_deleted(self, group_id: str) -> None:
        for listener in self._listeners:
            try:
                listener.on_group_deleted(group_id)
            except Exception:
                log.exception("share group %r: listener failed on its deletion", group_id)
