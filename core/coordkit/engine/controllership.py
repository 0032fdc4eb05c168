"""Claiming and releasing Kafka's controller nodes, shared by every controller election strategy.

Kafka (``KafkaZkClient.registerControllerAndIncrementControllerEpoch``): read ``/controller_epoch``
(create it holding ``0`` if missing), then in one multi create the ephemeral ``/controller`` and set
``/controller_epoch`` to epoch + 1 at the version read. NodeExists or BadVersion means another broker
won. The version the multi leaves on ``/controller_epoch`` is what the winner's writes check.

A value in either node that no election can use (written by hand or by another tool) is never
rewritten or deleted here: every reader gets :class:`UnreadableControllerNodeError`, one line that
says what the node holds and how to clear it, and the candidates try again until it is cleared.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from coordkit.errors import BadVersionError, LayoutError, NodeExistsError, NoNodeError
from coordkit.kafka import layout
from coordkit.kafka.model import ControllerInfo
from coordkit.store import Create, Delete, MetadataStore, Op, SetData, Stat
from coordkit.strategies.elections import ControllerTerm
from coordkit.support.clock import Clock

T = TypeVar("T")

INITIAL_CONTROLLER_EPOCH = 0

#: The command that clears an unreadable controller node (:mod:`coordkit.cli.admin.delete_node`).
DELETE_NODE_COMMAND = "coordkit delete-node"
#: The most bytes of an unreadable value an explanation quotes.
QUOTED_BYTES = 100


class UnreadableControllerNodeError(LayoutError):
    """``/controller`` or ``/controller_epoch`` holds a value no election can use, so no controller
    can be elected until someone clears it. The cluster never rewrites or deletes the node (what it
    holds may be an operator's mistake worth seeing, or another tool's): it waits, and says so.

    ``str()`` is one line naming the node, what it holds instead of what, and how to clear it.

    :param stat: the node's stat when read: a new write (even of the same bytes) is a new problem.
    :param store_url: the store's URL (password redacted) for the command that deletes the node;
        ``None`` for a store private to its process (memory://), out of any command's reach.
    """

    def __init__(
        self, path: str, data: bytes, stat: Stat, problem: LayoutError, store_url: str | None
    ):
        super().__init__(path, problem.reason, field=problem.field)
        self.data = data
        self.stat = stat
        self.store_url = store_url

    def __str__(self) -> str:
        if self.path == layout.CONTROLLER_EPOCH:
            expected = "a controller epoch (a non-negative integer)"
            then = " (the next election then starts again at epoch 1)"
        else:
            expected = f"a controller registration ({self.detail})"
            then = ""
        how = ""
        if self.store_url is not None:
            how = f": `{DELETE_NODE_COMMAND} --store {self.store_url} {self.path}`"
        return (
            f"{self.path} holds {_quoted(self.data)}, not {expected}: no controller can be "
            f"elected until it is deleted{then}{how}"
        )

    def __reduce__(self) -> tuple[object, ...]:
        problem = LayoutError(self.path, self.reason, field=self.field)
        return (type(self), (self.path, self.data, self.stat, problem, self.store_url))


def _quoted(data: bytes) -> str:
    if len(data) <= QUOTED_BYTES:
        return repr(data)
    return f"{data[:QUOTED_BYTES]!r}... ({len(data):,} bytes)"


def _decoded(store: MetadataStore, path: str, codec: layout.Codec[T], data: bytes, stat: Stat) -> T:
    """The one place a controller node is decoded: a bad value becomes the error that explains
    it to whoever reads it (candidates, ``settled()``, ``cluster check``, the admin commands)."""
    try:
        return codec.decode(data, path)
    except LayoutError as exc:
        shared = store.characteristics.shared_across_processes
        url = store.url.redacted() if shared else None
        raise UnreadableControllerNodeError(path, data, stat, exc, url) from None


def controller_info(store: MetadataStore, data: bytes, stat: Stat) -> ControllerInfo:
    """A value of ``store``'s ``/controller`` (read, or delivered by a watch) decoded.

    :raises UnreadableControllerNodeError: it is something else.
    """
    return _decoded(store, layout.CONTROLLER, layout.CONTROLLER_INFO, data, stat)


def read_controller(store: MetadataStore) -> tuple[ControllerInfo, Stat] | None:
    """The ``/controller`` node decoded, or ``None`` when no controller is registered.

    :raises UnreadableControllerNodeError: it holds something else.
    """
    try:
        data, stat = store.get(layout.CONTROLLER)
    except NoNodeError:
        return None
    return controller_info(store, data, stat), stat


def stored_controller_epoch(store: MetadataStore) -> tuple[int, Stat] | None:
    """``/controller_epoch``'s epoch and stat, or ``None`` when the node does not exist.

    :raises UnreadableControllerNodeError: it holds something else.
    """
    try:
        data, stat = store.get(layout.CONTROLLER_EPOCH)
    except NoNodeError:
        return None
    epoch = _decoded(store, layout.CONTROLLER_EPOCH, layout.CONTROLLER_EPOCH_VALUE, data, stat)
    return epoch.epoch, stat


def read_controller_epoch(store: MetadataStore) -> tuple[int, int]:
    """``(epoch, node version)`` of ``/controller_epoch``, creating it at epoch 0 if missing.

    :raises UnreadableControllerNodeError: it holds something else.
    """
    while True:
        stored = stored_controller_epoch(store)
        if stored is not None:
            return stored[0], stored[1].version
        try:
            store.create(layout.CONTROLLER_EPOCH, str(INITIAL_CONTROLLER_EPOCH).encode())
        except NodeExistsError:
            pass


def check_controller_nodes(store: MetadataStore) -> None:
    """Read ``/controller`` and ``/controller_epoch`` without writing.

    :raises UnreadableControllerNodeError: one of them holds what no election can use.
    """
    read_controller(store)
    stored_controller_epoch(store)


def claim_controller(
    store: MetadataStore, broker_id: int, clock: Clock, guard: Sequence[Op] = ()
) -> ControllerTerm | None:
    """Try to become controller; ``None`` if another broker holds ``/controller`` or won first.

    :param guard: ops to check in the same multi (a latch strategy checks its queue position).
    """
    epoch, version = read_controller_epoch(store)
    info = ControllerInfo(broker_id=broker_id, timestamp=str(clock.wall_ms()))
    ops: list[Op] = [
        *guard,
        Create(layout.CONTROLLER, layout.CONTROLLER_INFO.encode(info), ephemeral=True),
        SetData(layout.CONTROLLER_EPOCH, str(epoch + 1).encode(), version),
    ]
    try:
        results = store.commit(ops)
    except (NodeExistsError, BadVersionError, NoNodeError):
        return None
    stat: Stat = results[-1]
    return ControllerTerm(broker_id=broker_id, epoch=epoch + 1, epoch_version=stat.version)


def holds_controller(store: MetadataStore, broker_id: int) -> bool:
    """Whether ``/controller`` names ``broker_id`` and belongs to this session (an unreadable one
    belongs to nobody)."""
    try:
        current = read_controller(store)
    except UnreadableControllerNodeError:
        return False
    return (
        current is not None
        and current[0].broker_id == broker_id
        and current[1].ephemeral_owner == store.session_id
    )


def release_controller(store: MetadataStore, broker_id: int) -> bool:
    """Delete ``/controller`` if this session holds it for ``broker_id`` (a resignation)."""
    try:
        current = read_controller(store)
    except UnreadableControllerNodeError:
        return False  # not ours: an unreadable node is the operator's to clear
    if current is None:
        return False
    info, stat = current
    if info.broker_id != broker_id or stat.ephemeral_owner != store.session_id:
        return False
    try:
        store.commit([Delete(layout.CONTROLLER, stat.version)])
    except (NoNodeError, BadVersionError):
        return False
    return True
