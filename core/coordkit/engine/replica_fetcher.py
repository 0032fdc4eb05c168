"""A broker's replication duties on a background thread (Kafka's ``ReplicaFetcherThread`` plus the
leader's ISR maintenance in ``Partition.maybeShrinkIsr`` / ``maybeExpandIsr``).

Every ``replica.fetch.wait.max.ms`` the broker's followers fetch what their leaders appended, and
as a leader it proposes ISR changes (followers whose broker stopped fetching for
``replica.lag.time.max.ms`` leave, caught-up followers join) and writes them through its own
session, fenced on each state node's version and leader epoch. A write that fails (the store is
unreachable, the leadership moved) is simply proposed again on a later round: the proposals are
computed from the model's current state each time.
"""

from __future__ import annotations

import logging
import threading

from coordkit.engine.broker import Broker
from coordkit.engine.config import EngineConfig
from coordkit.engine.replication import ReplicationModel
from coordkit.errors import StoreError

log = logging.getLogger("coordkit.engine.replication")


class ReplicaFetcher:
    """Runs ``broker``'s fetches and ISR maintenance until :meth:`stop`.

    :meth:`pause` stops fetching without stopping the broker (a follower that falls behind:
    its leaders shrink it out of their ISRs after ``replica.lag.time.max.ms``).
    """

    def __init__(self, broker: Broker, model: ReplicationModel, config: EngineConfig):
        self.broker = broker
        self.model = model
        self.interval = min(config.replica_fetch_wait_max, config.replica_lag_time_max / 2)
        self.lag_time_max = config.replica_lag_time_max
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"coordkit-replica-fetcher-{broker.broker_id}", daemon=True
        )
        self.rounds = 0
        self.isr_writes = 0

    def start(self) -> ReplicaFetcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)

    def pause(self) -> None:
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    def _run(self) -> None:
        failures = 0
        while not self._stop.wait(self.interval):
            if not self.broker.alive:
                return
            try:
                self.run_once()
                failures = 0
            except StoreError as exc:
                failures += 1
                # The store is unreachable or the session is changing: try again next round.
                (log.debug if failures > 1 else log.info)(
                    "broker %s: ISR change not written (%s); retrying", self.broker.broker_id, exc
                )
            except Exception:
                log.exception("broker %s: replication round failed", self.broker.broker_id)

    def run_once(self) -> int:
        """One round: fetch, then write this broker's ISR changes as leader; returns writes."""
        broker_id = self.broker.broker_id
        if not self._paused.is_set():
            self.model.fetch(broker_id)
        self.rounds += 1
        proposals = self.model.isr_proposals(broker_id, self.lag_time_max)
        if not proposals:
            return 0
        try:
            written = self.broker.alter_isr(proposals)
        finally:
            self.model.settled(proposals)
        self.isr_writes += len(written)
        return len(written)
