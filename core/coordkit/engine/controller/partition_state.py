"""Partition leadership (Kafka's ``PartitionStateMachine``): plans and fenced, batched writes.

Planning decides, from the context's states, what one partition's state should become: a new
partition gets its first leader, a partition whose leader is gone gets an offline election (clean
or, where the topic allows it, unclean), and dead replicas leave the ISR. Other parts (controlled
shutdown, preferred election) plan with their own elections and persist through the same writer.

Persisting writes plans in batches of ``write_batch_ops`` behind the controller's epoch check,
each state write conditional on the version of the node the decision was based on; a batch whose
state moved underneath is re-read in one bulk read and decided again. On a networked store several
batches are in flight at once (``write_concurrency``), except batches creating a topic's
``partitions`` node, which go first. Any other failure leaves the pass, which is then re-planned
from the store.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, cast

from coordkit.engine import states
from coordkit.engine.config import UNCLEAN_LEADER_ELECTION_ENABLE, EngineConfig
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.partition_map import PartitionInfo, needs_attention
from coordkit.engine.errors import ControllerFencedError, StateConflictError
from coordkit.engine.events import Observers, StateChange
from coordkit.engine.fencing import FencedWriter
from coordkit.engine.states import TP, LeaderIsr
from coordkit.engine.strategies import Strategies
from coordkit.errors import BadVersionError, LayoutError, NodeExistsError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import NO_LEADER
from coordkit.store import Create, Op
from coordkit.strategies.elections import (
    ElectionReason,
    PartitionElectionInput,
    PartitionLeaderElection,
    new_partition_election,
)

#: Rounds of conflicting state writes retried before a pass gives up (and is tried again later).
MAX_ROUNDS = 100

F = TypeVar("F", bound=Callable[..., Any])


def bulk(method: F) -> F:
    """Pause Python's cyclic garbage collector while a bulk phase allocates 100,000s of small
    objects (its full collections would otherwise stall a failover for seconds); reference
    counting still frees memory meanwhile. Only the outermost pause turns collection back on."""

    @functools.wraps(method)
    def paused(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return method(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return cast(F, paused)


class Plan:
    """A state to write for one partition, and how to decide again if its node moved."""

    __slots__ = ("bump", "isr", "leader", "part", "reason", "replan", "tp")

    def __init__(
        self,
        tp: TP,
        leader: int,
        isr: tuple[int, ...],
        reason: ElectionReason | None,
        replan: Callable[[TP], Plan | None],
        part: PartitionInfo | None = None,
        *,
        bump: bool = True,
    ):
        self.tp = tp
        self.leader = leader
        self.isr = isr
        self.reason = reason
        self.replan = replan
        #: Whether the write starts a new leader epoch (every controller decision does; a
        #: leader's own ISR change, asked by AlterPartition, keeps its epoch).
        self.bump = bump
        #: The context's partition the plan was decided from, if the planner had it at hand
        #: (batching then skips a lookup per partition: 1,333,334 in a large shutdown).
        self.part = part


class _Batch:
    """One multi of state writes: the plans, and either their ops (creates, with which plan owns
    which op) or, when every plan rewrites an existing state, the writes as columns (one set per
    plan, for :meth:`~coordkit.store.MetadataStore.set_many`)."""

    __slots__ = (
        "creates_partitions_node",
        "data",
        "new_partition_nodes",
        "ops",
        "owners",
        "parts",
        "paths",
        "plans",
        "versions",
    )

    def __init__(self, *, sets: bool = False) -> None:
        self.plans: list[Plan] = []
        #: Each plan's partition, as the context holds it (its state is updated in place).
        self.parts: list[PartitionInfo] = []
        self.ops: list[Op] = []
        self.owners: list[int] = []
        self.new_partition_nodes: set[str] = set()
        self.creates_partitions_node = False
        self.paths: list[str] | None = [] if sets else None
        self.data: list[bytes] = []
        self.versions: list[int] = []

    def __len__(self) -> int:
        return len(self.ops) if self.paths is None else len(self.paths)

    def path_at(self, index: int) -> str:
        return self.ops[index].path if self.paths is None else self.paths[index]

    def owner_at(self, index: int) -> int:
        """The index of the plan that owns op ``index``."""
        return self.owners[index] if self.paths is None else index


class PartitionStateMachine:
    """Plans and writes partition states for one controller term."""

    def __init__(
        self,
        context: ControllerContext,
        writer: FencedWriter,
        *,
        config: EngineConfig,
        observers: Observers,
        broker_id: int,
        epoch: int,
        write_concurrency: int,
        strategies: Strategies,
    ):
        self.context = context
        self.writer = writer
        self.config = config
        self.observers = observers
        self.broker_id = broker_id
        self.epoch = epoch
        self._write_concurrency = write_concurrency
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._offline_default = strategies.partition_election(config.offline_election)
        self._offline_clean = strategies.partition_election("offline")
        self._offline_unclean = strategies.partition_election("offline-unclean")
        self._unclean_override: dict[str, bool | None] = {}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)

    def forget_topic(self, topic: str) -> None:
        self._unclean_override.pop(topic, None)

    # -- liveness: new partitions, offline partitions, dead replicas ---------------------------

    @bulk
    def elect_leaders(self, tps: Iterable[TP], live: frozenset[int]) -> list[StateChange]:
        """First leaders for new partitions and offline elections for partitions whose leader is
        not in ``live`` (availability first: ISRs are not shrunk here)."""
        chosen = [tp for tp in tps if self.context.actionable(tp)]
        self.prefetch_unclean(chosen, live)
        return self.persist(self.plan_liveness(tp, live, shrink=False) for tp in chosen)

    @bulk
    def reconcile_liveness(self, tps: Iterable[TP], live: frozenset[int]) -> list[StateChange]:
        """Leaders as :meth:`elect_leaders`, and dead replicas out of the ISRs."""
        chosen = [tp for tp in tps if self.context.actionable(tp)]
        self.prefetch_unclean(chosen, live)
        return self.persist(self.plan_liveness(tp, live) for tp in chosen)

    def needs_attention(self, tp: TP, live: frozenset[int]) -> bool:
        """Whether :meth:`plan_liveness` could plan a write for ``tp`` (a cheap filter)."""
        part = self.context.parts.get(tp)
        return part is not None and needs_attention(part, live)

    def plan_liveness(self, tp: TP, live: frozenset[int], shrink: bool = True) -> Plan | None:
        """New partitions get their first leader; partitions whose leader is gone get an offline
        election; dead replicas leave the ISR (unless ``shrink`` is off: leaders only)."""
        part = self.context.parts.get(tp)
        if part is None or tp in self.context.unreadable_states:
            return None
        state = part.state

        def again(t: TP) -> Plan | None:
            return self.plan_liveness(t, live, shrink)

        if state is None:
            first = new_partition_election(part.replicas, live)
            if first is None:
                return None  # stays new until a replica is live
            return Plan(tp, first.leader, first.isr, first.reason, again, part)
        if state.leader in live:
            if not shrink or all(r in live for r in state.isr):
                return None
            isr = tuple(r for r in state.isr if r in live) or state.isr
            return Plan(tp, state.leader, isr, None, again, part)
        result = self._offline_strategy(tp[0]).elect(
            PartitionElectionInput(part.replicas, state.isr, live)
        )
        if result is not None:
            return Plan(tp, result.leader, result.isr, result.reason, again, part)
        # No eligible replica: leaderless. Keep the last ISR members so that a clean election
        # waits for one of them (Kafka never empties the ISR).
        isr = tuple(r for r in state.isr if r in live) or state.isr
        if state.leader == NO_LEADER and isr == state.isr:
            return None
        return Plan(tp, NO_LEADER, isr, None, again, part)

    def prefetch_unclean(self, tps: Sequence[TP], live: frozenset[int]) -> None:
        """Read the unclean-election override of topics that have partitions without a live ISR
        member (as Kafka does, only for those)."""
        parts = self.context.parts
        topics = {
            tp[0]
            for tp in tps
            if (state := parts[tp].state) is not None
            and state.leader not in live
            and live.isdisjoint(state.isr)
        }
        if not topics:
            return
        names = sorted(topics)
        paths = [f"{layout.CONFIG_TOPICS}/{t}" for t in names]
        for topic, path, result in zip(names, paths, self.context.get_many(paths), strict=True):
            override: bool | None = None
            if not isinstance(result, StoreError):
                try:
                    value = layout.TOPIC_CONFIG.decode(result[0], path).config.get(
                        UNCLEAN_LEADER_ELECTION_ENABLE
                    )
                except LayoutError as exc:
                    self.context.unreadable.record(path, exc.detail)
                    value = None
                if value is not None:
                    override = value.strip().lower() == "true"
            self._unclean_override[topic] = override

    def _offline_strategy(self, topic: str) -> PartitionLeaderElection:
        override = self._unclean_override.get(topic)
        if override is None:
            return self._offline_default
        return self._offline_unclean if override else self._offline_clean

    # -- persisting ----------------------------------------------------------------------------

    def persist(self, plans: Iterable[Plan | None]) -> list[StateChange]:
        """Write planned states in fenced, version-checked batches; re-plan on conflicts.

        :raises ControllerFencedError: a newer controller exists (after reporting what was
            written).
        :raises StateConflictError: states kept moving for :data:`MAX_ROUNDS` rounds.
        :raises StoreError: any other failure; the pass is re-planned from the store.
        """
        pending: Iterable[Plan | None] = plans
        changes: list[StateChange] = []
        failures: list[BaseException] = []  # a failure stops the round's writes (see _write)
        rounds = 0
        try:
            while True:
                rounds += 1
                if rounds > MAX_ROUNDS:
                    raise StateConflictError(
                        f"controller {self.broker_id}: state writes keep conflicting"
                    )
                retry: list[Plan] = []
                for batch, outcome in self._write(pending, failures):
                    if isinstance(outcome, _Conflict):
                        retry.extend(self._after_conflict(batch, outcome.error))
                    elif isinstance(outcome, BaseException):
                        failures.append(outcome)
                    else:
                        changes.extend(self._applied(batch, outcome))
                if failures:
                    # Fencing wins over anything else: the term is over.
                    fenced = [f for f in failures if isinstance(f, ControllerFencedError)]
                    raise (fenced or failures)[0]
                if not retry:
                    break
                pending = retry
        finally:
            self.observers.partition_states_changed(changes)
        return changes

    def _write(
        self, plans: Iterable[Plan | None], failures: Sequence[BaseException]
    ) -> Iterator[tuple[_Batch, Any]]:
        """Commit ``plans`` batch by batch as they are planned, yielding each batch's outcome
        in order: the next batches are planned (by the caller's generator) and encoded while
        earlier ones are in flight, so the controller's work overlaps the store's. A batch that
        creates a ``partitions`` node is committed alone, after everything before it. Once the
        caller has ``failures``, nothing more is planned or sent; what is in flight is still
        yielded."""
        window = self._write_concurrency
        flight: collections.deque[tuple[_Batch, concurrent.futures.Future[Any]]] = (
            collections.deque()
        )
        try:
            for batch in self._batches(p for p in plans if p is not None):
                if window <= 1 or batch.creates_partitions_node:
                    while flight:
                        done, future = flight.popleft()
                        yield done, future.result()
                    if failures:
                        return
                    yield batch, self._commit_batch(batch)
                else:
                    flight.append((batch, self._executor().submit(self._commit_batch, batch)))
                    if len(flight) >= window:
                        done, future = flight.popleft()
                        yield done, future.result()
                if failures:
                    break
        except Exception:
            # Planning failed (an election raised): what is in flight is committed or failing;
            # land it in the context before the error leaves the pass.
            while flight:
                done, future = flight.popleft()
                yield done, future.result()
            raise
        while flight:
            done, future = flight.popleft()
            yield done, future.result()

    def _batches(self, plans: Iterable[Plan]) -> Iterator[_Batch]:
        """Plans in multis of ``write_batch_ops``, each batch yielded when full: rewrites of
        existing states in batches of columns, first states (creates) in batches of ops."""
        limit = self.config.write_batch_ops
        parts = self.context.parts
        encode = states.StateEncoder(self.epoch)
        path_of = states.state_path
        sets = _Batch(sets=True)
        creates = _Batch()
        claimed: set[str] = set()  # partitions nodes some batch of this round creates
        for plan in plans:
            part = plan.part
            if part is None:
                part = parts[plan.tp]
            state = part.state
            if state is not None:
                if len(sets.plans) >= limit:
                    yield sets
                    sets = _Batch(sets=True)
                assert sets.paths is not None
                sets.paths.append(path_of(plan.tp))
                sets.data.append(encode(plan.leader, state.leader_epoch + plan.bump, plan.isr))
                sets.versions.append(state.zk_version)
                sets.plans.append(plan)
                sets.parts.append(part)
                continue
            if len(creates.ops) >= limit:
                yield creates
                creates = _Batch()
            plan_ops = self._creates_for(plan, claimed, creates)
            creates.ops.extend(plan_ops)
            creates.owners.extend([len(creates.plans)] * len(plan_ops))
            creates.plans.append(plan)
            creates.parts.append(part)
        yield from (batch for batch in (creates, sets) if batch.plans)

    def _commit_batch(self, batch: _Batch) -> list[Any] | _Conflict | BaseException:
        try:
            if batch.paths is not None:
                written = self.writer.set_many(batch.paths, batch.data, batch.versions)
                return written.column("version")
            return self.writer.commit(batch.ops)
        except (BadVersionError, NodeExistsError, NoNodeError) as exc:
            return _Conflict(exc)
        except (ControllerFencedError, StoreError) as exc:
            return exc

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self._write_concurrency, thread_name_prefix=f"coordkit-controller-{self.broker_id}"
            )
        return self._pool

    def _after_conflict(self, batch: _Batch, exc: StoreError) -> list[Plan]:
        """Plans to retry after ``batch`` failed on one of its own ops."""
        if exc.op_index is None or exc.op_index >= len(batch):
            raise exc
        context = self.context
        failed = batch.plans[batch.owner_at(exc.op_index)]
        failed_path = batch.path_at(exc.op_index)
        topic = failed.tp[0]
        if isinstance(exc, NodeExistsError) and failed_path == states.partitions_path(topic):
            context.partitions_nodes.add(topic)
            return batch.plans
        if isinstance(exc, NodeExistsError) and failed_path == states.partition_path(failed.tp):
            context.partition_nodes.add(failed.tp)  # left without a state: add just the state
            return batch.plans
        if isinstance(exc, NoNodeError) and failed_path == states.partition_path(failed.tp):
            context.partitions_nodes.discard(topic)  # its parent is gone: create it again
            return batch.plans
        if isinstance(exc, NoNodeError) and failed_path == states.partitions_path(topic):
            # The topic itself is gone: the next topics pass forgets it.
            return [p for p in batch.plans if p.tp[0] != topic]
        # Some state moved underneath (a leader changed its ISR): re-read the whole batch in one
        # pipelined read and decide again, so a batch fails once, not once per stale partition.
        context.refresh_states([p.tp for p in batch.plans])
        return [r for r in (p.replan(p.tp) for p in batch.plans) if r is not None]

    def _creates_for(self, plan: Plan, claimed: set[str], batch: _Batch) -> list[Op]:
        """The ops giving a partition its first state (and the nodes above it that are missing)."""
        tp = plan.tp
        context = self.context
        data = states.encode_state(plan.leader, 0, plan.isr, self.epoch)
        ops: list[Op] = []
        topic = tp[0]
        if topic not in context.partitions_nodes and topic not in claimed:
            ops.append(Create(states.partitions_path(topic)))
            claimed.add(topic)
            batch.new_partition_nodes.add(topic)
        if topic not in context.partitions_nodes:
            batch.creates_partitions_node = True  # ordered after the batch creating it
        if tp not in context.partition_nodes:
            ops.append(Create(states.partition_path(tp)))
        ops.append(Create(states.state_path(tp), data))
        return ops

    def _applied(self, batch: _Batch, results: list[Any]) -> list[StateChange]:
        context = self.context
        context.partitions_nodes |= batch.new_partition_nodes
        if batch.paths is not None:
            versions: Sequence[int] | dict[int, int] = results  # a set's new version per plan
        else:
            versions = {}
            for index, op in enumerate(batch.ops):
                if isinstance(op, Create) and op.path.endswith("/state"):
                    versions[batch.owners[index]] = 0
        out: list[StateChange] = []
        created = batch.paths is None  # sets rewrite states: their partition nodes exist
        controller_epoch = self.epoch
        writer = self.broker_id
        for index, (plan, part) in enumerate(zip(batch.plans, batch.parts, strict=True)):
            tp = plan.tp
            previous = part.state
            epoch = 0 if previous is None else previous.leader_epoch + plan.bump
            current = LeaderIsr(plan.leader, epoch, plan.isr, controller_epoch, versions[index])
            part.state = current
            if created:
                context.partition_nodes.discard(tp)
            out.append(StateChange(tp, previous, current, plan.reason, writer, part.replicas))
        return out


class _Conflict:
    """A batch that failed on one of its own ops (not the epoch check): re-plan it."""

    __slots__ = ("error",)

    def __init__(self, error: StoreError):
        self.error = error
