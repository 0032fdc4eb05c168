"""Whether a cluster of in-process brokers has settled: the controller named in the store runs
here at the stored epoch, has loaded, knows every registered broker and topic (or ignores it as
unreadable), has nothing left to do, and every live broker is registered (:func:`settlement`, what
:meth:`~coordkit.engine.cluster.Cluster.settled` answers)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs

from coordkit.engine.broker import Broker
from coordkit.engine.controllership import (
    UnreadableControllerNodeError,
    read_controller,
    stored_controller_epoch,
)
from coordkit.engine.invariants import Violation
from coordkit.kafka import layout
from coordkit.store import MetadataStore
from coordkit.store.tree import children


@attrs.frozen
class Settlement:
    """What :meth:`~coordkit.engine.cluster.Cluster.settled` found: truthy when settled.

    :param waiting_for: why it is not settled yet (empty when it is).
    :param ignored: unreadable nodes the controller is leaving alone.
    :param blocked_by: the unreadable controller node that stops every election: the cluster
        cannot settle until someone clears it (``waiting_for`` is its explanation).
    """

    settled: bool
    waiting_for: str = ""
    ignored: tuple[Violation, ...] = ()
    blocked_by: UnreadableControllerNodeError | None = None

    def __bool__(self) -> bool:
        return self.settled


def settlement(
    store: MetadataStore,
    brokers: Mapping[int, Broker],
    live: Iterable[int],
    registered: Callable[[], Iterable[int]],
) -> Settlement:
    """Whether the controller named in the store runs here at the stored epoch, has loaded,
    knows every registered broker and every topic (or ignores it as unreadable), and has
    nothing left to do; and every live broker is registered.

    Never raises on what the store holds: the result is falsy with the reason it waits for
    (an unreadable ``/controller`` or ``/controller_epoch`` blocks every election until an
    operator clears it: :attr:`Settlement.blocked_by`), and lists the unreadable nodes the
    controller is ignoring.
    """
    # An unreadable node comes first, and a missing epoch before the controller's own state:
    # they stay until an operator acts, while a controller they leave retrying flips between
    # busy and idle.
    try:
        current = read_controller(store)
        stored_epoch = stored_controller_epoch(store)
    except UnreadableControllerNodeError as exc:
        return Settlement(False, str(exc), blocked_by=exc)
    if current is None:
        return Settlement(False, "no controller is elected")
    info = current[0]
    holder = brokers.get(info.broker_id)
    controller = holder.controller if holder is not None and holder.alive else None
    if controller is None:
        return Settlement(False, f"controller {info.broker_id} is not running here")
    ignored = controller.ignored()
    if stored_epoch is None:
        return Settlement(False, f"{layout.CONTROLLER_EPOCH} is missing", ignored)
    epoch = stored_epoch[0]
    if not controller.idle():
        reason = "is retrying after a failed pass" if controller.retrying() else "is busy"
        return Settlement(False, f"controller {info.broker_id} {reason}", ignored)
    if epoch != controller.epoch:
        return Settlement(
            False,
            f"controller epoch {controller.epoch} is not the stored epoch {epoch}",
            ignored,
        )
    ignored_brokers, ignored_topics = controller.ignored_names()
    names = set(children(store, layout.BROKER_IDS))
    if {str(b) for b in controller.known_brokers} | ignored_brokers != names:
        return Settlement(False, "the controller has not seen every broker change", ignored)
    if controller.known_topics | ignored_topics != set(children(store, layout.BROKER_TOPICS)):
        return Settlement(False, "the controller has not seen every topic change", ignored)
    known = set(registered())
    missing = [b for b in live if b not in known]
    if missing:
        return Settlement(False, f"live brokers {missing} are not registered", ignored)
    # Read again after every check: a pass that ran since the first read (one that found a
    # garbage topic, say) may have added to it, and a settled answer must list it.
    ignored = controller.ignored()
    if not controller.idle():
        return Settlement(False, f"controller {info.broker_id} is busy", ignored)
    return Settlement(True, "", ignored)
