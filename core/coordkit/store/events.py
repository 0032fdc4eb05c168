"""What watches and change feeds deliver: data and children events, the watch handles, and the
ordered events of a subtree's change feed (:meth:`MetadataStore.watch_tree`)."""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    pass

from coordkit.store.data_model import SessionState, Stat

# -- watches ------------------------------------------------------------------------------------


@attrs.frozen
class DataEvent:
    """The state of a watched node: ``stat is None`` when the node does not exist."""

    path: str
    data: bytes | None
    stat: Stat | None

    @property
    def exists(self) -> bool:
        return self.stat is not None


@attrs.frozen
class ChildrenEvent:
    """The children of a watched node: ``children is None`` when the node does not exist."""

    path: str
    children: tuple[str, ...] | None
    stat: Stat | None

    @property
    def exists(self) -> bool:
        return self.children is not None


class Watch(abc.ABC):
    """A registered watch; :meth:`cancel` stops further deliveries."""

    path: str

    @abc.abstractmethod
    def cancel(self) -> None: ...


DataCallback = Callable[[DataEvent], Any]
ChildrenCallback = Callable[[ChildrenEvent], Any]
SessionListener = Callable[[SessionState], Any]


# -- change feeds -------------------------------------------------------------------------------


class TreeEventKind(enum.Enum):
    """What a :class:`TreeEvent` reports."""

    CREATED = "created"
    CHANGED = "changed"
    DELETED = "deleted"
    #: Changes may have been missed (the feed started, a session or connection was lost, history
    #: was trimmed): re-read the subtree; every change after the event's position follows.
    RESYNC = "resync"


def _check_position(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative int, got {value!r}")


@attrs.frozen
class TreeEvent:
    """One entry of a change feed (:meth:`MetadataStore.watch_tree`).

    ``position`` is a point in the store's history (ZooKeeper's zxid; memory's own counter; Redis's
    global revision), never decreasing along a feed:

    * CREATED / CHANGED: ``data`` and ``stat`` are the node's state at ``position`` (at least as
      new as the change reported; exactly the change's own state where the store keeps history,
      ``change_feed_history``). A store without history reads the state after the notice; if
      the node was deleted again before that read, both are None (:attr:`state_known` is False)
      and its DELETED follows.
    * DELETED: the node was deleted at or before ``position`` (exactly at it with history).
    * RESYNC: no ``data``/``stat``; everything after ``position`` follows, anything up to it may
      have been missed.
    """

    kind: TreeEventKind = attrs.field(validator=attrs.validators.instance_of(TreeEventKind))
    path: str = attrs.field(validator=attrs.validators.instance_of(str))
    position: int = attrs.field(validator=_check_position)
    data: bytes | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(bytes))
    )
    stat: Stat | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(Stat))
    )

    def __attrs_post_init__(self) -> None:
        has_state = self.kind in (TreeEventKind.CREATED, TreeEventKind.CHANGED)
        if (self.data is None) != (self.stat is None) and has_state:
            raise ValueError(f"{self.path}: a {self.kind.value} event needs both data and stat")
        if not has_state and (self.data is not None or self.stat is not None):
            raise ValueError(f"{self.path}: a {self.kind.value} event carries no data or stat")

    @property
    def state_known(self) -> bool:
        """Whether a CREATED/CHANGED event carries the node's state (False: the node was gone
        before the store could read it; its DELETED follows)."""
        return self.stat is not None

    def newer_than(self, held: Stat | None) -> bool:
        """Whether this event changes an image that holds the node at ``held`` (None: absent),
        the rule for merging a feed with a read of the tree: a state newer than the held one,
        or a delete after it. RESYNC is always news."""
        return self.newer_than_mzxid(None if held is None else held.mzxid)

    def newer_than_mzxid(self, held: int | None) -> bool:
        """:meth:`newer_than` for an image that keeps only the ``mzxid`` of what it holds (None:
        absent): the rule compares nothing else."""
        match self.kind:
            case TreeEventKind.RESYNC:
                return True
            case TreeEventKind.DELETED:
                return held is not None and held < self.position
        if self.stat is None:
            return False  # gone before it could be read: the DELETED that follows is the news
        return held is None or held < self.stat.mzxid


class TreeWatch(Watch):
    """A running change feed: :meth:`cancel` stops it, :meth:`flush` waits for it to catch up."""

    #: Position of the last event delivered to the callback (None before the first).
    position: int | None = None

    @abc.abstractmethod
    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every change the client had been told of when called has been delivered to
        the callback (False on timeout). After a write on the same client returns, this covers
        every change below the path committed before that write (run from a callback, it
        delivers what is waiting first)."""


TreeCallback = Callable[[TreeEvent], Any]
