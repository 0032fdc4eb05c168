"""A leader latch: candidates queue as ephemeral sequential nodes and each watches only the node
just ahead of it, so a failover wakes exactly one broker (the next in line) instead of all of them.

The head of the queue claims Kafka's ``/controller`` and bumps ``/controller_epoch`` in one multi
that also checks its own queue node still exists, so the epochs stay monotonic and the layout is
Kafka's. The queue lives under ``/controller_candidates`` (outside Kafka's layout).
"""

from __future__ import annotations

from coordkit.engine.controllership import claim_controller, release_controller
from coordkit.errors import BadVersionError, NoNodeError
from coordkit.kafka import layout
from coordkit.store import Check, DataEvent, Delete, MetadataStore, Watch, paths
from coordkit.strategies.elections import DeposedCallback, ElectedCallback, ElectionKind
from coordkit.support.clock import Clock
from coordkit_elections.candidate import CandidateBase

CANDIDATES = "/controller_candidates"
PREFIX = "c-"


class LatchCandidate(CandidateBase):
    strategy = "latch"

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        clock: Clock,
        on_elected: ElectedCallback,
        on_deposed: DeposedCallback,
    ):
        super().__init__(store, broker_id, clock, on_elected, on_deposed)
        self._node: str | None = None
        self._predecessor: str | None = None
        self._predecessor_watch: Watch | None = None
        self._controller_watch: Watch | None = None

    # -- the queue -------------------------------------------------------------------------------

    def _enter(self) -> None:
        if self._node is not None:
            return
        self._mark_joined()
        self.store.ensure_path(CANDIDATES)
        self._node = self.store.create(
            f"{CANDIDATES}/{PREFIX}", str(self.broker_id).encode(), ephemeral=True, sequential=True
        )
        self._evaluate()

    def _evaluate(self) -> None:
        if self._closed or self._node is None:
            return
        queue = sorted(c for c in self.store.children(CANDIDATES) if c.startswith(PREFIX))
        mine = paths.basename(self._node)
        if mine not in queue:
            # Our node went with a session (or was removed): queue again on the current one.
            self._lose_term()
            self._watch_predecessor(None)
            self._watch_controller(False)
            self._node = None
            self._enter()
            return
        position = queue.index(mine)
        if position > 0:
            self._watch_controller(False)
            self._watch_predecessor(f"{CANDIDATES}/{queue[position - 1]}")
            return
        self._watch_predecessor(None)
        if self._term is None:
            self.attempts += 1
            term = claim_controller(
                self.store, self.broker_id, self.clock, guard=[Check(self._node, 0)]
            )
            if term is not None:
                self._win(term)
        # The head watches /controller: to see it is deposed, or when a leftover holder leaves.
        self._watch_controller(True)

    def _try_for_controller(self) -> None:
        self._evaluate()

    def _watch_predecessor(self, path: str | None) -> None:
        if path == self._predecessor:
            return
        if self._predecessor_watch is not None:
            self._predecessor_watch.cancel()
            self._predecessor_watch = None
            self._unwatched(f"predecessor:{self._predecessor}")
        self._predecessor = path
        if path is not None:
            self._arming(f"predecessor:{path}")

            def changed(event: DataEvent, watched: str = path) -> None:
                self._post(self._predecessor_node, watched, event)

            self._predecessor_watch = self.store.watch_data(path, changed)

    def _predecessor_node(self, path: str, event: DataEvent) -> None:
        if path != self._predecessor:
            return
        self._delivered(f"predecessor:{path}")
        if not event.exists:
            self._evaluate()

    def _watch_controller(self, on: bool) -> None:
        if on and self._controller_watch is None:
            self._arming("controller")
            self._controller_watch = self.store.watch_data(
                layout.CONTROLLER, lambda e: self._post(self._controller_node, e)
            )
        elif not on and self._controller_watch is not None:
            self._controller_watch.cancel()
            self._controller_watch = None
            self._unwatched("controller")

    def _controller_node(self, event: DataEvent) -> None:
        self._delivered("controller")
        if event.exists and event.data is not None and event.stat is not None:
            mine = self._mine(event.data, event.stat)
            if self._term is not None and not mine and not self._still_held():
                self._lose_term()
            return
        if self._still_held():
            return
        self._lose_term()
        self._evaluate()

    # -- leaving and coming back -------------------------------------------------------------------

    def _drop_node(self) -> None:
        self._watch_predecessor(None)
        self._watch_controller(False)
        node, self._node = self._node, None
        if node is not None:
            try:
                self.store.commit([Delete(node, 0)])
            except (NoNodeError, BadVersionError):
                pass

    def _resign(self) -> None:
        if self._term is None:
            return
        release_controller(self.store, self.broker_id)
        self._lose_term()
        # To the back of the queue; the next candidate is woken by our node's deletion.
        self._drop_node()
        self._enter()

    def _rejoin(self) -> None:
        self._lose_term()
        if self._node is not None:
            stat = self.store.exists(self._node)
            if stat is not None and stat.ephemeral_owner == self.store.session_id:
                self._mark_joined()
                self._evaluate()
                return
        self._watch_predecessor(None)
        self._watch_controller(False)
        self._node = None  # ephemeral: gone with the old session
        self._enter()

    def _leave(self) -> None:
        if self._term is not None:
            release_controller(self.store, self.broker_id)
        self._drop_node()


class LatchControllerElection:
    """Strategy object registered as ``controller/latch``."""

    kind = ElectionKind.CONTROLLER
    name = "latch"
    description = (
        "candidates queue as ephemeral sequential nodes, each watching only its predecessor; the "
        "head claims /controller (no herd on failover)"
    )

    def candidate(
        self,
        store: MetadataStore,
        broker_id: int,
        clock: Clock,
        on_elected: ElectedCallback,
        on_deposed: DeposedCallback,
    ) -> LatchCandidate:
        return LatchCandidate(store, broker_id, clock, on_elected, on_deposed)
