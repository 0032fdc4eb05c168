"""Claiming and releasing Kafka's controller nodes, shared by every controller election strategy.

Kafka (``KafkaZkClient.registerControllerAndIncrementControllerEpoch``): read ``/controller_epoch``
(create it holding ``0`` if missing), then in one multi create the ephemeral ``/controller`` and set
``/controller_epoch`` to epoch + 1 at the version read. NodeExists or BadVersion means another broker
won. The version the multi leaves on ``/controller_epoch`` is what the winner's writes check.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from coordkit import layout
from coordkit.clock import Clock
from coordkit.elections import ControllerTerm
from coordkit.errors import BadVersionError, LayoutError, NodeExistsError, NoNodeError
from coordkit.model import ControllerInfo
from coordkit.store import Create, Delete, MetadataStore, Op, SetData, Stat

log = logging.getLogger("coordkit.engine.controller")

INITIAL_CONTROLLER_EPOCH = 0

_reported: set[tuple[str, int, int]] = set()


def read_controller_epoch(store: MetadataStore) -> tuple[int, int]:
    """``(epoch, node version)`` of ``/controller_epoch``, creating it at epoch 0 if missing."""
    while True:
        try:
            data, stat = store.get(layout.CONTROLLER_EPOCH)
            return layout.CONTROLLER_EPOCH_VALUE.decode(data, layout.CONTROLLER_EPOCH).epoch, (
                stat.version
            )
        except NoNodeError:
            try:
                store.create(layout.CONTROLLER_EPOCH, str(INITIAL_CONTROLLER_EPOCH).encode())
            except NodeExistsError:
                pass


def read_controller(store: MetadataStore) -> tuple[ControllerInfo, Stat] | None:
    """The ``/controller`` node decoded, or ``None`` when no controller is registered."""
    try:
        data, stat = store.get(layout.CONTROLLER)
    except NoNodeError:
        return None
    try:
        return layout.CONTROLLER_INFO.decode(data, layout.CONTROLLER), stat
    except LayoutError as exc:
        # Every candidate and waiter reads it; say so once per value, not once per read.
        key = (store.url.redacted(), stat.czxid, stat.mzxid)
        if key not in _reported:
            if len(_reported) > 1000:
                _reported.clear()
            _reported.add(key)
            log.warning("%s; no controller can be elected until it is removed", exc)
        return None


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
    """Whether ``/controller`` names ``broker_id`` and belongs to this session."""
    current = read_controller(store)
    return (
        current is not None
        and current[0].broker_id == broker_id
        and current[1].ephemeral_owner == store.session_id
    )


def release_controller(store: MetadataStore, broker_id: int) -> bool:
    """Delete ``/controller`` if this session holds it for ``broker_id`` (a resignation)."""
    current = read_controller(store)
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
