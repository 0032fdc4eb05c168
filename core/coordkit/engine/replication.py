"""A replication model: log end offsets per replica, the high watermark, acks=all.

No record bytes move; each partition keeps the log end offset (LEO) of every replica and its high
watermark (HW = the minimum LEO over the ISR; it only moves forward while the leader's log is the
truth). A produce appends to the leader; a replication round lets every live follower fetch up to
the leader's LEO; records below the HW are acknowledged (acks=all: every ISR member has them).

When a new leader is elected, every replica's log is cut back to the new leader's LEO (Kafka's
followers truncate to the leader epoch boundary). A clean election never cuts below the HW, since the
new leader was in the ISR; an unclean one can, and the acknowledged records between its LEO and the
HW are counted as lost. That is what the lab reports for unclean election.

The model observes the engine (:class:`~coordkit.engine.events.EngineObserver`): partition states
written by controllers and leaders, brokers stopping and registering.

Replication runs by itself: each broker's :class:`~coordkit.engine.replica_fetcher.ReplicaFetcher`
calls :meth:`ReplicationModel.fetch` (its followers catch up) and
:meth:`ReplicationModel.isr_proposals` (as leader: followers whose broker stopped fetching for
``replica.lag.time.max.ms`` leave the ISR, caught-up followers join it), then writes the changes
through its own session. While a change is in flight the high watermark counts the *maximal* ISR
(current members plus those being added), as Kafka's AlterPartition does, so no record is
acknowledged that a member about to join the ISR lacks. Per-broker indexes keep a fetch round's
cost proportional to what was appended, and a broker stopping or registering proportional to what
it leads, not to the number of partitions.

With :attr:`ReplicationModel.external_fetch` (``coordkit serve``, whose replicas hold real
records) the fetchers move nothing: log ends come from :meth:`ReplicationModel.report_log_ends`
as records are really copied; the high watermark and ISR maintenance work as above.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import attrs

from coordkit.engine.events import EngineObserver, StateChange
from coordkit.engine.states import TP
from coordkit.kafka.model import NO_LEADER, BrokerInfo
from coordkit.support.clock import Clock, SystemClock


class PartitionLog:
    """One partition's replicas as the model sees them."""

    __slots__ = (
        "acked",
        "adding",
        "hw",
        "isr",
        "isr_since",
        "leader",
        "leader_epoch",
        "leader_since",
        "leo",
        "lost",
        "min_isr",
        "replicas",
        "truncated",
        "zk_version",
    )

    def __init__(self) -> None:
        self.leader = NO_LEADER
        self.leader_epoch = -1
        #: When the model saw the current leader take over (Kafka resets every follower's
        #: ``lastCaughtUpTimeMs`` to that moment in ``Partition.makeLeader``).
        self.leader_since = 0.0
        self.zk_version = -1
        self.isr: tuple[int, ...] = ()
        #: When the model saw the ISR last set (a follower outside it joins only by a fetch
        #: after that: Kafka's leaders expand an ISR in a follower's fetch).
        self.isr_since = 0.0
        self.replicas: tuple[int, ...] = ()
        self.leo: dict[int, int] = {}
        self.hw = 0
        self.acked = 0  # records ever acknowledged
        self.lost = 0  # acknowledged records cut off by unclean elections
        self.truncated = 0  # unacknowledged records cut off by elections
        self.adding: tuple[int, ...] = ()  # members an in-flight ISR change adds
        #: The topic's ``min.insync.replicas``.
        self.min_isr = 1

    def effective_min_isr(self) -> int:
        """Kafka's ``Partition.effectiveMinIsr``: ``min.insync.replicas``, but never more than
        the replicas there are (a larger setting is not refused, it is capped)."""
        return min(self.min_isr, len(self.replicas) or len(self.isr))

    def under_min_isr(self) -> bool:
        return len(self.isr) < self.effective_min_isr()

    def advance_hw(self) -> int:
        """Recompute the HW from the maximal ISR; returns newly acknowledged records. Under
        ``min.insync.replicas`` it stays (Kafka 3.7+, KAFKA-15583: a record is not committed
        while fewer replicas than that are in sync)."""
        if not self.isr or self.under_min_isr():
            return 0
        hw = min(self.leo.get(r, 0) for r in (*self.isr, *self.adding))
        if hw <= self.hw:
            return 0
        gained = hw - self.hw
        self.hw = hw
        self.acked += gained
        return gained


@attrs.frozen
class IsrProposal:
    """An ISR change a partition leader wants to write (Kafka's AlterIsr item).

    :param leader_epoch: the leader epoch it was decided under; the write is refused when the
        state node shows another (the leadership moved meanwhile).
    """

    tp: TP
    leader: int
    leader_epoch: int
    add: tuple[int, ...] = ()
    remove: tuple[int, ...] = ()


@attrs.frozen
class ReplicationTotals:
    """Totals over every partition.

    :param produced: records appended to leaders.
    :param rejected: records refused because the partition had no live leader.
    :param acked: records acknowledged under acks=all.
    :param acked_lost: acknowledged records lost to unclean elections.
    :param truncated: unacknowledged records cut off by elections (never promised to anyone).
    :param unclean_elections: leader changes to a replica outside the ISR.
    """

    produced: int
    rejected: int
    acked: int
    acked_lost: int
    truncated: int
    unclean_elections: int


class ReplicationModel(EngineObserver):
    """The logs of every partition of one cluster."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self._logs: dict[TP, PartitionLog] = {}
        self._down: set[int] = set()
        self._lock = threading.Lock()
        #: Counts the batches of partition states taken in: a follower of other processes
        #: looks at its leaders again when it moves, not only every fetch wait.
        self.states_seen = 0
        self.produced = 0
        self.rejected = 0
        self.unclean_elections = 0
        # Unavailability: since when each partition has had no live leader.
        self._offline_since: dict[TP, float] = {}
        self._offline_seconds = 0.0
        self._offline_windows = 0
        self._longest_offline = 0.0
        # Per broker: partitions with records it has not fetched yet, partitions where it is a
        # replica outside the ISR, partitions where it is an ISR member; when it last fetched.
        self._behind: dict[int, set[TP]] = {}
        self._outside: dict[int, set[TP]] = {}
        self._inside: dict[int, set[TP]] = {}
        self._last_fetch: dict[int, float] = {}
        # Per broker: partitions it leads (a broker stopping or registering touches only those).
        self._led: dict[int, set[TP]] = {}
        #: ``min.insync.replicas`` of topics without their own (see :meth:`set_min_isr`).
        self.min_isr_default = 1
        self._min_isr: dict[str, int] = {}
        #: Replicas hold real records elsewhere (``coordkit serve``): :meth:`fetch` moves nothing,
        #: log ends come from :meth:`report_log_ends` as real fetches copy the records.
        self.external_fetch = False

    def _went_offline(self, tp: TP) -> None:
        if tp not in self._offline_since:
            self._offline_since[tp] = self.clock.monotonic()
            self._offline_windows += 1

    def _came_online(self, tp: TP) -> None:
        since = self._offline_since.pop(tp, None)
        if since is not None:
            window = self.clock.monotonic() - since
            self._offline_seconds += window
            self._longest_offline = max(self._longest_offline, window)

    # -- engine events -------------------------------------------------------------------------

    def partition_states_changed(self, changes: Sequence[StateChange]) -> None:
        with self._lock:
            self.states_seen += 1
            for change in changes:
                log = self._logs.get(change.tp)
                if log is None:
                    log = self._logs[change.tp] = PartitionLog()
                    log.min_isr = self._min_isr.get(change.tp[0], self.min_isr_default)
                current = change.current
                # Writes of one partition can reach observers out of order across threads.
                if (current.leader_epoch, current.zk_version) <= (log.leader_epoch, log.zk_version):
                    continue
                if change.replicas:
                    for gone in set(log.replicas) - set(change.replicas):
                        for index in (self._behind, self._outside, self._inside):
                            index.get(gone, set()).discard(change.tp)
                    for new in set(change.replicas) - set(log.replicas):
                        # A replica a reassignment adds starts empty: it has everything to fetch.
                        self._behind.setdefault(new, set()).add(change.tp)
                    log.replicas = change.replicas
                if current.leader not in (log.leader, NO_LEADER):
                    self._truncate_to(log, log.leo.get(current.leader, 0))
                    if change.unclean:
                        self.unclean_elections += 1
                leader_moved = current.leader != log.leader
                if leader_moved:
                    log.leader_since = self.clock.monotonic()
                    self._led.get(log.leader, set()).discard(change.tp)
                    if current.leader != NO_LEADER:
                        self._led.setdefault(current.leader, set()).add(change.tp)
                log.leader = current.leader
                log.leader_epoch = current.leader_epoch
                log.zk_version = current.zk_version
                if current.isr != log.isr:
                    log.isr_since = self.clock.monotonic()
                log.isr = current.isr
                log.adding = tuple(r for r in log.adding if r not in current.isr)
                for replica in (*log.replicas, *current.isr):
                    log.leo.setdefault(replica, 0)
                self._index(change.tp, log, leader_moved)
                log.advance_hw()
                if log.leader == NO_LEADER or log.leader in self._down:
                    self._went_offline(change.tp)
                else:
                    self._came_online(change.tp)

    def _index(self, tp: TP, log: PartitionLog, leader_moved: bool) -> None:
        isr = set(log.isr)
        for replica in set(log.replicas) | isr:
            if replica in isr:
                self._inside.setdefault(replica, set()).add(tp)
                self._outside.get(replica, set()).discard(tp)
            else:
                self._outside.setdefault(replica, set()).add(tp)
                self._inside.get(replica, set()).discard(tp)
            if leader_moved and replica != log.leader:
                # A new leader may hold records its followers lack.
                self._behind.setdefault(replica, set()).add(tp)

    def _unindex(self, tp: TP) -> None:
        for index in (self._behind, self._outside, self._inside, self._led):
            for members in index.values():
                members.discard(tp)

    def partition_states_known(self, states: Sequence[StateChange]) -> None:
        # States a new controller loaded: learn the partitions this model has not seen written.
        self.partition_states_changed(states)

    @staticmethod
    def _truncate_to(log: PartitionLog, offset: int) -> None:
        longest = max(log.leo.values(), default=0)
        if longest > max(offset, log.hw):
            log.truncated += longest - max(offset, log.hw)
        for replica, leo in log.leo.items():
            if leo > offset:
                log.leo[replica] = offset
        if log.hw > offset:
            log.lost += log.hw - offset
            log.hw = offset

    def broker_stopped(self, broker_id: int, controlled: bool) -> None:
        with self._lock:
            self._down.add(broker_id)
            for tp in self._led.get(broker_id, ()):
                self._went_offline(tp)

    def broker_registered(self, broker_id: int, info: BrokerInfo, session_id: int) -> None:
        with self._lock:
            self._down.discard(broker_id)
            self._last_fetch[broker_id] = self.clock.monotonic()
            for tp in self._led.get(broker_id, ()):
                self._came_online(tp)

    def set_min_isr(self, topic: str, min_isr: int) -> list[TP]:
        """``topic``'s ``min.insync.replicas`` (as its config says); returns the partitions whose
        high watermark moved (it may, once no longer held under the minimum)."""
        moved: list[TP] = []
        with self._lock:
            self._min_isr[topic] = min_isr
            for tp, log in self._logs.items():
                if tp[0] == topic:
                    log.min_isr = min_isr
                    if log.advance_hw():
                        moved.append(tp)
        return moved

    def topic_deleted(self, topic: str) -> None:
        with self._lock:
            self._min_isr.pop(topic, None)
            for tp in [tp for tp in self._logs if tp[0] == topic]:
                del self._logs[tp]
                self._unindex(tp)
                self._came_online(tp)

    # -- driving the model ---------------------------------------------------------------------

    def produce(self, tp: TP, records: int) -> int:
        """Append ``records`` to the partition's leader; returns how many were accepted."""
        return 0 if self.append(tp, records) is None else records

    def append(self, tp: TP, records: int, leader: int | None = None) -> int | None:
        """Append ``records`` as broker ``leader`` serving a produce request would (``None``:
        whichever broker leads the partition).

        :returns: the offset of the first record appended, or ``None`` when refused: the
            partition is unknown, has no live leader, or is not led by ``leader`` (the sender's
            metadata is stale).
        """
        with self._lock:
            log = self._logs.get(tp)
            if log is None or log.leader == NO_LEADER or log.leader in self._down:
                self.rejected += records
                return None
            if leader is not None and leader != log.leader:
                return None
            before = log.leo.get(log.leader, 0)
            # Records cut off later were appended above what any other replica has.
            log.leo[log.leader] = before + records
            for replica in log.replicas:
                if replica != log.leader:
                    self._behind.setdefault(replica, set()).add(tp)
            self.produced += records
            log.advance_hw()
            return before

    def replicate(self, partitions: Iterable[TP] | None = None) -> list[tuple[TP, int]]:
        """One fetch round: live followers catch up with their leader and the HW advances.

        :returns: ``(partition, follower)`` pairs of caught-up followers outside the ISR, which
            the partition's leader may now add to it.
        """
        ready: list[tuple[TP, int]] = []
        with self._lock:
            chosen = list(self._logs) if partitions is None else list(partitions)
            for tp in chosen:
                log = self._logs.get(tp)
                if log is None or log.leader == NO_LEADER or log.leader in self._down:
                    continue
                target = log.leo.get(log.leader, 0)
                for replica in log.replicas or log.isr:
                    if replica == log.leader or replica in self._down:
                        continue
                    log.leo[replica] = target
                    self._behind.get(replica, set()).discard(tp)
                    if replica not in log.isr:
                        ready.append((tp, replica))
                log.advance_hw()
        return ready

    def fetch(self, follower: int) -> int:
        """One fetch round of broker ``follower``'s replica fetcher: it catches up with the leader
        of every partition it has records to fetch for. Returns partitions fetched."""
        with self._lock:
            if follower in self._down or self.external_fetch:
                return 0
            self._last_fetch[follower] = self.clock.monotonic()
            pending = self._behind.pop(follower, None)
            if not pending:
                return 0
            left: set[TP] = set()
            fetched = 0
            for tp in pending:
                log = self._logs.get(tp)
                if log is None or follower not in log.replicas:
                    continue
                if log.leader == NO_LEADER or log.leader in self._down:
                    left.add(tp)  # nothing to fetch from until a leader is back
                    continue
                if log.leader == follower:
                    continue
                log.leo[follower] = log.leo.get(log.leader, 0)
                log.advance_hw()
                fetched += 1
            if left:
                self._behind.setdefault(follower, set()).update(left)
            return fetched

    def report_log_ends(
        self, replica: int, ends: dict[TP, int], *, fetched: bool, appended: int = 0
    ) -> list[TP]:
        """Where broker ``replica``'s real logs end (with :attr:`external_fetch`): as leader after
        an append of ``appended`` records, or as follower after a fetch round (``fetched``: the
        broker fetches, which keeps it in its leaders' ISRs). Returns the partitions whose high
        watermark moved."""
        moved: list[TP] = []
        with self._lock:
            if replica in self._down:
                return moved
            if fetched:
                self._last_fetch[replica] = self.clock.monotonic()
            self.produced += appended
            for tp, end in ends.items():
                log = self._logs.get(tp)
                if log is None or replica not in (*log.replicas, *log.isr):
                    continue
                log.leo[replica] = end
                if replica == log.leader:
                    for follower in log.replicas:
                        if follower != replica and log.leo.get(follower, 0) < end:
                            self._behind.setdefault(follower, set()).add(tp)
                elif end >= log.leo.get(log.leader, 0):
                    self._behind.get(replica, set()).discard(tp)
                if log.advance_hw():
                    moved.append(tp)
        return moved

    def partitions(self) -> list[tuple[TP, PartitionLog]]:
        """Every partition the model knows, with its replicas' state (live objects)."""
        with self._lock:
            return list(self._logs.items())

    def down(self, broker_id: int) -> bool:
        """Whether broker ``broker_id`` stopped (and has not registered again)."""
        return broker_id in self._down

    def isr_proposals(self, leader: int, lag_time_max: float) -> list[IsrProposal]:
        """ISR changes broker ``leader`` should write for the partitions it leads (Kafka's
        ``maybeShrinkIsr`` / ``maybeExpandIsr``): followers whose broker has not fetched for
        ``lag_time_max`` seconds leave; caught-up followers (log end at or past the high watermark)
        whose broker fetches join. Each proposal is marked in flight until :meth:`settled`."""
        with self._lock:
            if leader in self._down:
                return []
            now = self.clock.monotonic()
            removals: dict[TP, list[int]] = {}
            additions: dict[TP, list[int]] = {}
            if self.external_fetch:
                self._unheard_followers(leader, now, lag_time_max, removals)
            for follower, last in self._last_fetch.items():
                if follower == leader:
                    continue
                # As Kafka's leaders, judge by fetches alone: a broker that died is the
                # controller's to handle long before its lag time runs out.
                if now - last > lag_time_max:
                    for tp in self._inside.get(follower, ()):
                        log = self._logs.get(tp)
                        if (
                            log is not None
                            and log.leader == leader
                            and follower in log.isr
                            and len(log.isr) > 1
                        ):
                            removals.setdefault(tp, []).append(follower)
                    continue
                if follower in self._down:
                    continue
                for tp in self._outside.get(follower, ()):
                    log = self._logs.get(tp)
                    if (
                        log is not None
                        and log.leader == leader
                        and follower in log.replicas
                        and follower not in log.adding
                        and tp not in self._behind.get(follower, ())
                        and log.leo.get(follower, 0) >= log.hw
                        # A fetch since it left the ISR: a broker that died since its last
                        # fetch (its registration not yet gone here) is not taken back in.
                        and last >= log.isr_since
                    ):
                        additions.setdefault(tp, []).append(follower)
            out: list[IsrProposal] = []
            for tp in sorted(set(removals) | set(additions)):
                log = self._logs[tp]
                add = tuple(sorted(additions.get(tp, ())))
                remove = tuple(sorted(removals.get(tp, ())))
                if remove and len(set(log.isr) - set(remove)) == 0:
                    remove = ()
                if not add and not remove:
                    continue
                log.adding = tuple(sorted({*log.adding, *add}))
                out.append(IsrProposal(tp, leader, log.leader_epoch, add, remove))
            return out

    def _unheard_followers(
        self, leader: int, now: float, lag_time_max: float, removals: dict[TP, list[int]]
    ) -> None:
        """Adds to ``removals`` the followers never heard fetching (a broker of another
        ``coordkit serve`` process whose fetches have not come) that lack records of a partition
        ``leader`` has led for longer than ``lag_time_max``: Kafka's leader drops a follower
        whose last caught-up time — at the latest, when the leader took over — is older than
        the lag time and whose log ends before the leader's (``Replica.isCaughtUp``). Without
        this, such a follower would hold the high watermark, and acks=all, for ever.

        Only with :attr:`external_fetch`: an engine-only model of one process among several
        stands for the other processes' fetches itself. The partitions looked at are those the
        follower is behind on (records appended since), not every partition it holds."""
        for follower, behind in self._behind.items():
            if follower == leader or follower in self._last_fetch:
                continue
            for tp in behind:
                log = self._logs.get(tp)
                if (
                    log is not None
                    and log.leader == leader
                    and follower in log.isr
                    and len(log.isr) > 1
                    and log.leo.get(follower, 0) < log.leo.get(leader, 0)
                    and now - log.leader_since > lag_time_max
                ):
                    removals.setdefault(tp, []).append(follower)

    def settled(self, proposals: Iterable[IsrProposal]) -> None:
        """The ISR changes ``proposals`` were written or given up: stop counting their added
        members in the maximal ISR (a written change already moved them into the ISR)."""
        with self._lock:
            for proposal in proposals:
                log = self._logs.get(proposal.tp)
                if log is not None and proposal.add:
                    log.adding = tuple(r for r in log.adding if r not in proposal.add)

    # -- reading -------------------------------------------------------------------------------

    def log(self, tp: TP) -> PartitionLog | None:
        return self._logs.get(tp)

    def leadership(self, tp: TP) -> tuple[int, int] | None:
        """``(leader, leader_epoch)`` of ``tp`` read together (a state change sets one after the
        other under the lock: read apart, a new leader could be paired with the old epoch)."""
        with self._lock:
            log = self._logs.get(tp)
            return None if log is None else (log.leader, log.leader_epoch)

    def offline(self) -> list[TP]:
        """Partitions that cannot take writes now (no leader, or its broker is down)."""
        with self._lock:
            return sorted(
                tp
                for tp, log in self._logs.items()
                if log.leader == NO_LEADER or log.leader in self._down
            )

    def unavailability(self) -> tuple[int, float]:
        """``(times a partition lost its live leader, partition-seconds without one)``, counting
        windows still open up to now."""
        with self._lock:
            now = self.clock.monotonic()
            open_seconds = sum(now - since for since in self._offline_since.values())
            return self._offline_windows, self._offline_seconds + open_seconds

    def longest_offline(self) -> float:
        """The longest time one partition has been without a live leader (open windows count
        up to now)."""
        with self._lock:
            now = self.clock.monotonic()
            open_windows = (now - since for since in self._offline_since.values())
            return max(self._longest_offline, max(open_windows, default=0.0))

    def totals(self) -> ReplicationTotals:
        with self._lock:
            logs = list(self._logs.values())
            return ReplicationTotals(
                produced=self.produced,
                rejected=self.rejected,
                acked=sum(log.acked for log in logs),
                acked_lost=sum(log.lost for log in logs),
                truncated=sum(log.truncated for log in logs),
                unclean_elections=self.unclean_elections,
            )
