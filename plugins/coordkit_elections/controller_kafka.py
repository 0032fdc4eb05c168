"""Kafka's controller election: every broker watches ``/controller``; when it disappears, every
broker tries to create it (with the ``/controller_epoch`` bump in the same multi). One wins; the
others fail and read who did. Simple, but every failover wakes every broker (a herd)."""

from __future__ import annotations

from coordkit.engine.controllership import claim_controller, release_controller
from coordkit.kafka import layout
from coordkit.store import DataEvent, MetadataStore, Watch
from coordkit.strategies.elections import DeposedCallback, ElectedCallback, ElectionKind
from coordkit.support.clock import Clock
from coordkit_elections.candidate import CandidateBase

MAX_ATTEMPTS = 20


class KafkaCandidate(CandidateBase):
    strategy = "kafka"

    def __init__(
        self,
        store: MetadataStore,
        broker_id: int,
        clock: Clock,
        on_elected: ElectedCallback,
        on_deposed: DeposedCallback,
    ):
        super().__init__(store, broker_id, clock, on_elected, on_deposed)
        self._watch: Watch | None = None

    def _enter(self) -> None:
        self._mark_joined()
        if self._watch is None:
            self._arming("controller")
            self._watch = self.store.watch_data(
                layout.CONTROLLER, lambda e: self._post(self._controller_node, e)
            )

    def _controller_node(self, event: DataEvent) -> None:
        self._delivered("controller")
        if event.exists and event.data is not None and event.stat is not None:
            mine = self._mine(event.data, event.stat)
            if self._term is not None and not mine and not self._still_held():
                self._lose_term()
            elif self._term is None and mine:
                # Held by this session without a term (a resignation cut short): hand it back.
                release_controller(self.store, self.broker_id)
            return
        if self._still_held():
            return  # a stale event from before our own claim
        self._lose_term()
        self._attempt()

    def _try_for_controller(self) -> None:
        self._attempt()

    def _attempt(self) -> None:
        for _ in range(MAX_ATTEMPTS):
            if self._closed or self._term is not None:
                return
            self.attempts += 1
            term = claim_controller(self.store, self.broker_id, self.clock)
            if term is not None:
                self._win(term)
                return
            if self.store.exists(layout.CONTROLLER) is not None:
                # Someone holds it (or it is unreadable: the watch reported that); the watch
                # says when it goes.
                return

    def _resign(self) -> None:
        if self._term is None:
            return
        release_controller(self.store, self.broker_id)
        self._lose_term()
        # The watch reports /controller gone (if it was ours) and a new race starts.

    def _rejoin(self) -> None:
        self._mark_joined()
        if self.store.exists(layout.CONTROLLER) is None:
            self._attempt()

    def _leave(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._term is not None:
            release_controller(self.store, self.broker_id)


class KafkaControllerElection:
    """Strategy object registered as ``controller/kafka``."""

    kind = ElectionKind.CONTROLLER
    name = "kafka"
    description = (
        "every broker watches the ephemeral /controller and races to create it (with the "
        "/controller_epoch bump in one multi) when it disappears"
    )

    def candidate(
        self,
        store: MetadataStore,
        broker_id: int,
        clock: Clock,
        on_elected: ElectedCallback,
        on_deposed: DeposedCallback,
    ) -> KafkaCandidate:
        return KafkaCandidate(store, broker_id, clock, on_elected, on_deposed)
