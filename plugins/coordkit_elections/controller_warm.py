"""Warm standby: every candidate keeps an image of the cluster current through the store's change
feed, so that the one that wins hands its controller the image instead of a bulk read of every
partition state (KRaft's property — failover that does not read the cluster — on ZooKeeper-shaped
stores).

The election itself is the leader latch (:mod:`.controller_latch`: candidates queue, a failover
wakes only the next in line; the winner claims ``/controller`` and bumps ``/controller_epoch`` in
one multi, so every write of the term is fenced exactly as with ``kafka`` and ``latch``). Beside
it each candidate follows ``/brokers`` with :meth:`~coordkit.store.MetadataStore.watch_tree` into
a :class:`~coordkit.engine.controller.image.MetadataImage`; a RESYNC from the feed (its start, a
lost session) has the candidate's worker re-read the subtree, off the store's event thread.

On winning, the candidate catches up before acting: the claim is a write on its own session, so
:meth:`~coordkit.store.TreeWatch.flush` after it delivers every change committed below
``/brokers`` before the claim's position (on ZooKeeper the feed reads just those nodes: only what
changed since the image's position is read). A re-read still pending is done there and then. The
caught-up image travels with the term (:attr:`ControllerTerm.image`) and the term's first
controller pass fills its context from it. An image that cannot be caught up (flush timed out,
re-read failing) is not handed over: the controller reads the store, as a cold one does.

A store without ``ordered_change_feed`` (Redis until its change stream lands) is refused when the
broker starts, with one line naming the characteristic: asking for warm standby and silently
getting cold failovers would hide exactly what the strategy promises.
"""

from __future__ import annotations

import logging
import threading
import time

import attrs

from coordkit.engine.controller.image import ROOT, MetadataImage
from coordkit.errors import UnsupportedError
from coordkit.store import MetadataStore, TreeEvent, TreeWatch
from coordkit.strategies.elections import (
    ControllerTerm,
    DeposedCallback,
    ElectedCallback,
    ElectionKind,
)
from coordkit.support.clock import Clock
from coordkit_elections.controller_latch import LatchCandidate

log = logging.getLogger("coordkit.strategies.elections")

#: Seconds a winner waits for its feed to deliver what preceded its claim.
CATCH_UP_TIMEOUT = 30.0
#: Seconds between attempts at a re-read that could not complete.
RESYNC_RETRY = 0.5


class WarmStandbyCandidate(LatchCandidate):
    """A latch candidate that keeps a :class:`MetadataImage` and hands it to its controller."""

    strategy = "warm-standby"

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        clock: Clock,
        on_elected: ElectedCallback,
        on_deposed: DeposedCallback,
        *,
        read_batch: int = 10_000,
    ):
        super().__init__(store, broker_id, clock, on_elected, on_deposed)
        self.image = MetadataImage(read_batch=read_batch)
        self._feed: TreeWatch | None = None
        #: Seconds the last win spent catching the image up (flush and any re-read).
        self.catch_up_seconds: float | None = None

    # -- the image ---------------------------------------------------------------------------------

    def _enter(self) -> None:
        if self._feed is None:
            self._feed = self.store.watch_tree(ROOT, self._on_event)
        super()._enter()

    def _on_event(self, event: TreeEvent) -> None:
        # The store's event thread: apply in memory only; a re-read goes to the worker.
        if self.image.apply(event):
            self._post(self._resync)

    def _resync(self) -> None:
        if not self.image.sync(self.store):
            timer = threading.Timer(RESYNC_RETRY, self._post, (self._resync,))
            timer.daemon = True
            timer.start()

    def _catch_up(self) -> MetadataImage | None:
        """After a winning claim: every change committed before it applied, or None."""
        started = time.perf_counter()
        feed = self._feed
        if feed is None or not feed.flush(timeout=CATCH_UP_TIMEOUT):
            log.warning(
                "warm-standby: broker %s could not catch its image up; its controller reads the "
                "store",
                self.broker_id,
            )
            return None
        if not self.image.sync(self.store):
            log.warning("warm-standby: broker %s could not re-read its image", self.broker_id)
            return None
        self.catch_up_seconds = time.perf_counter() - started
        log.info(
            "warm-standby: broker %s image at position %s after %.3fs of catch-up",
            self.broker_id,
            self.image.position,
            self.catch_up_seconds,
        )
        return self.image

    def _win(self, term: ControllerTerm) -> None:
        super()._win(attrs.evolve(term, image=self._catch_up()))

    def _leave(self) -> None:
        try:
            super()._leave()
        finally:
            feed, self._feed = self._feed, None
            if feed is not None:
                feed.cancel()


class WarmStandbyControllerElection:
    """Strategy object registered as ``controller/warm-standby``."""

    kind = ElectionKind.CONTROLLER
    name = "warm-standby"
    description = (
        "a leader latch whose candidates keep an image of brokers, topics and partition states "
        "current through the store's change feed; the winner loads from it (no bulk read)"
    )

    def candidate(
        self,
        store: MetadataStore,
        broker_id: int,
        clock: Clock,
        on_elected: ElectedCallback,
        on_deposed: DeposedCallback,
    ) -> WarmStandbyCandidate:
        """:raises UnsupportedError: the store has no ``ordered_change_feed``."""
        try:
            store.require("ordered_change_feed")
        except UnsupportedError as exc:
            raise UnsupportedError(
                f"controller election 'warm-standby' needs a store with ordered_change_feed: "
                f"{exc} (choose controller election 'kafka' or 'latch' for this store)"
            ) from None
        return WarmStandbyCandidate(store, broker_id, clock, on_elected, on_deposed)
