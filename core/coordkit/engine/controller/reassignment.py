"""Partition reassignment, ZooKeeper era (Kafka's ``KafkaController.onPartitionReassignment``).

The request is ``/admin/reassign_partitions`` =
``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,5,6]}]}``. With ORS the
original replicas, TRS the target, RS = TRS followed by ORS − TRS, AR = TRS − ORS (adding) and
RR = ORS − TRS (removing), each partition goes through:

* **Phase A** (TRS ⊄ ISR): ``/brokers/topics/T`` is written as version 3 with RS and the
  ``adding_replicas`` / ``removing_replicas`` maps, and the leader epoch is bumped, which starts
  the AR replicas (followers fetch; the leader adds them to the ISR once caught up).
* **Phase B** (TRS ⊆ ISR): a leader outside TRS (or dead) is replaced by the ``reassign``
  election over TRS (else the epoch is bumped), the ISR as it is; then each replica of RR
  leaves the ISR, one state write and one epoch each (Kafka's B3 and B4); then RS = TRS with
  empty maps is written to ``/brokers/topics/T`` — last, so a controller that fails over midway
  resumes from what the store holds — and the partition leaves ``/admin/reassign_partitions``
  (deleted when empty).

Every pass re-derives where each partition is from the admin node, the topic node and the state,
so nothing is remembered between passes. At most ``reassignment_max_moving`` partitions are in
phase A at once (the throttle); the rest wait. A target list of another length changes the
replication factor (Kafka's way to change it). A request that names an unknown topic or partition,
or an empty or duplicated replica list, is dropped with a warning, as Kafka's controller does; the
admin tool (:meth:`TopicAdmin.reassign_partitions`) refuses such plans before writing anything.
"""

from __future__ import annotations

import itertools
import logging

import attrs

from coordkit.engine.config import EngineConfig
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.partition_state import PartitionStateMachine, Plan
from coordkit.engine.fencing import FencedWriter
from coordkit.engine.states import TP
from coordkit.engine.strategies import Strategies
from coordkit.errors import LayoutError, NoNodeError
from coordkit.kafka import layout
from coordkit.kafka.layout import REASSIGN_PARTITIONS, decode_reassignment, encode_reassignment
from coordkit.kafka.model import TopicAssignment
from coordkit.store import Delete, Op, SetData
from coordkit.strategies.elections import ElectionReason, PartitionElectionInput

log = logging.getLogger("coordkit.engine.controller")


class ReassignmentManager:
    def __init__(
        self,
        context: ControllerContext,
        partitions: PartitionStateMachine,
        writer: FencedWriter,
        *,
        config: EngineConfig,
        broker_id: int,
        strategies: Strategies,
    ):
        self.context = context
        self.partitions = partitions
        self.writer = writer
        self.config = config
        self.broker_id = broker_id
        self._election = strategies.partition_election("reassign")
        #: Partitions the last pass found in the request (other parts skip nothing for them).
        self.pending: frozenset[TP] = frozenset()
        #: Partitions in phase A whose replicas this term has announced with a new leader epoch.
        self._announced: set[TP] = set()

    def process(self) -> None:
        """One look at every requested partition: start, finish or wait."""
        try:
            data, stat = self.context.store.get(REASSIGN_PARTITIONS)
        except NoNodeError:
            self.pending = frozenset()
            return
        try:
            plan = decode_reassignment(data)
        except LayoutError as exc:
            self.context.unreadable.record(REASSIGN_PARTITIONS, exc.detail)
            self.pending = frozenset()
            return
        self.context.unreadable.clear(REASSIGN_PARTITIONS)
        nodes = self._topic_nodes({tp[0] for tp in plan})
        valid: dict[TP, tuple[int, ...]] = {}
        dropped: list[TP] = []
        for tp, target in sorted(plan.items()):
            problem = self._invalid(tp, target, nodes.get(tp[0]))
            if problem:
                log.warning(
                    "controller %s: dropping reassignment of %s-%s: %s",
                    self.broker_id,
                    tp[0],
                    tp[1],
                    problem,
                )
                dropped.append(tp)
            else:
                valid[tp] = target
        self.pending = frozenset(valid)
        done = self._advance(valid, nodes)
        finished = [*dropped, *done]
        if finished:
            self._remove_from_request(plan, finished, stat.version)

    # -- the two phases --------------------------------------------------------------------------

    def _advance(
        self, plan: dict[TP, tuple[int, ...]], nodes: dict[str, tuple[TopicAssignment, int]]
    ) -> list[TP]:
        context = self.context
        live = context.live_ids()
        moving = {
            tp
            for tp in plan
            if tp[1] in nodes[tp[0]][0].adding or tp[1] in nodes[tp[0]][0].removing
        }
        budget = max(0, self.config.reassignment_max_moving - len(moving))
        start: dict[TP, tuple[int, ...]] = {}
        finish: dict[TP, tuple[int, ...]] = {}
        announce: list[TP] = []
        done: list[TP] = []
        for tp, target in plan.items():
            assignment = nodes[tp[0]][0]
            current = assignment.partitions[tp[1]]
            state = context.parts[tp].state if tp in context.parts else None
            if tp not in moving:
                if current == target:
                    done.append(tp)  # nothing to move (or finished before a failover)
                elif state is not None and set(target) <= set(state.isr):
                    # Nothing to add (replicas only removed or reordered): Kafka completes it
                    # at once; no ISR change would come to start a later pass.
                    finish[tp] = target
                elif budget > 0 and state is not None:
                    start[tp] = target
                    budget -= 1
                continue
            if state is not None and set(target) <= set(state.isr):
                finish[tp] = target
            elif state is not None and tp not in self._announced:
                announce.append(tp)
        if announce:
            # Phase A begun by an earlier term: announce RS with a new epoch, once per term.
            for topic, partition in announce:
                rs = nodes[topic][0].partitions[partition]
                self.context.parts[(topic, partition)].replicas = rs
            self.partitions.persist(self._bump(tp) for tp in announce)
            self._announced.update(announce)
        if start:
            self._phase_a(start, nodes)
        if finish:
            self._phase_b(finish, nodes, live)
            done.extend(finish)
        return done

    def _phase_a(
        self, start: dict[TP, tuple[int, ...]], nodes: dict[str, tuple[TopicAssignment, int]]
    ) -> None:
        updated: dict[str, TopicAssignment] = {}
        for (topic, partition), target in start.items():
            assignment = updated.get(topic, nodes[topic][0])
            original = assignment.partitions[partition]
            rs = (*target, *(r for r in original if r not in target))
            updated[topic] = attrs.evolve(
                assignment,
                partitions={**assignment.partitions, partition: rs},
                version=3,
                adding={
                    **assignment.adding,
                    partition: tuple(r for r in target if r not in original),
                },
                removing={
                    **assignment.removing,
                    partition: tuple(r for r in original if r not in target),
                },
            )
            log.info(
                "controller %s: reassigning %s-%s from %s to %s",
                self.broker_id,
                topic,
                partition,
                list(original),
                list(target),
            )
        self._write_topics(updated, nodes)
        for topic, partition in start:
            self.context.parts[(topic, partition)].replicas = updated[topic].partitions[partition]
        # Bump the leader epoch: the adding replicas start following the leader.
        self.partitions.persist(self._bump(tp) for tp in start)
        self._announced.update(start)

    def _phase_b(
        self,
        finish: dict[TP, tuple[int, ...]],
        nodes: dict[str, tuple[TopicAssignment, int]],
        live: frozenset[int],
    ) -> None:
        for tp, target in finish.items():
            self.context.parts[tp].replicas = target
        # As Kafka's B3 and B4: first the leader, with the ISR as it is (a new one from the target
        # if it is outside it or dead, else the same one) and a new epoch; then each removed
        # replica out of the ISR, one state write and one epoch each.
        self.partitions.persist(self._lead(tp, target, live) for tp, target in finish.items())
        for removed in itertools.zip_longest(
            *(
                [(tp, r) for r in nodes[tp[0]][0].partitions[tp[1]] if r not in target]
                for tp, target in finish.items()
            )
        ):
            self.partitions.persist(self._drop(tp, r) for tp, r in filter(None, removed))
        # As Kafka's B6: the removed replicas stop and delete their logs.
        for tp, target in finish.items():
            gone = tuple(r for r in nodes[tp[0]][0].partitions[tp[1]] if r not in target)
            state = self.context.parts[tp].state
            if gone and state is not None:
                self.partitions.observers.replicas_removed(tp, gone, state.leader_epoch)
        updated: dict[str, TopicAssignment] = {}
        for (topic, partition), target in finish.items():
            assignment = updated.get(topic, nodes[topic][0])
            updated[topic] = attrs.evolve(
                assignment,
                partitions={**assignment.partitions, partition: target},
                version=3,
                adding={p: r for p, r in assignment.adding.items() if p != partition},
                removing={p: r for p, r in assignment.removing.items() if p != partition},
            )
            log.info(
                "controller %s: reassignment of %s-%s to %s complete",
                self.broker_id,
                topic,
                partition,
                list(target),
            )
        self._write_topics(updated, nodes)

    def _bump(self, tp: TP) -> Plan | None:
        state = self.context.parts[tp].state
        if state is None:
            return None
        return Plan(tp, state.leader, state.isr, None, self._bump)

    def _lead(self, tp: TP, target: tuple[int, ...], live: frozenset[int]) -> Plan | None:
        state = self.context.parts[tp].state
        if state is None:
            return None

        def again(t: TP) -> Plan | None:
            return self._lead(t, target, live)

        if state.leader in target and state.leader in live:
            return Plan(tp, state.leader, state.isr, None, again)
        result = self._election.elect(
            PartitionElectionInput(target, state.isr, live, target=target)
        )
        if result is None:
            return None  # no live replica of the target in the ISR: waits for one
        return Plan(tp, result.leader, state.isr, ElectionReason.REASSIGN, again)

    def _drop(self, tp: TP, replica: int) -> Plan | None:
        """``replica`` out of the ISR (Kafka's OfflineReplica transition), if it is in it."""
        state = self.context.parts[tp].state
        if state is None or replica not in state.isr or state.leader == replica:
            return None
        isr = tuple(r for r in state.isr if r != replica)
        return Plan(tp, state.leader, isr, None, lambda t: self._drop(t, replica))

    # -- store access ----------------------------------------------------------------------------

    def _topic_nodes(self, topics: set[str]) -> dict[str, tuple[TopicAssignment, int]]:
        names = sorted(topics)
        paths = [f"{layout.BROKER_TOPICS}/{t}" for t in names]
        out: dict[str, tuple[TopicAssignment, int]] = {}
        for topic, path, result in zip(names, paths, self.context.get_many(paths), strict=True):
            if isinstance(result, Exception):
                continue
            try:
                out[topic] = (layout.TOPIC.decode(result[0], path), result[1].version)
            except LayoutError as exc:
                self.context.unreadable.record(path, exc.detail)
        return out

    def _invalid(
        self, tp: TP, target: tuple[int, ...], node: tuple[TopicAssignment, int] | None
    ) -> str | None:
        if node is None or tp[0] in self.context.deleting:
            return f"topic {tp[0]!r} does not exist (or is being deleted)"
        assignment = node[0]
        if tp[1] not in assignment.partitions:
            return f"topic {tp[0]!r} has no partition {tp[1]}"
        if not target:
            return "the replica list is empty"
        if len(set(target)) != len(target):
            return f"replicas {list(target)} repeat a broker"
        return None

    def _write_topics(
        self, updated: dict[str, TopicAssignment], nodes: dict[str, tuple[TopicAssignment, int]]
    ) -> None:
        ops: list[Op] = [
            SetData(
                f"{layout.BROKER_TOPICS}/{topic}", layout.TOPIC.encode(assignment), nodes[topic][1]
            )
            for topic, assignment in sorted(updated.items())
        ]
        for start in range(0, len(ops), self.config.write_batch_ops):
            results = self.writer.commit(ops[start : start + self.config.write_batch_ops])
            for op, stat in zip(ops[start:], results, strict=False):
                topic = op.path.rsplit("/", 1)[1]
                nodes[topic] = (updated[topic], stat.version)
                self.context.assignment_mzxid[topic] = stat.mzxid
                self.context.topics[topic] = dict(updated[topic].partitions)

    def _remove_from_request(
        self, plan: dict[TP, tuple[int, ...]], finished: list[TP], version: int
    ) -> None:
        remaining = {tp: r for tp, r in plan.items() if tp not in set(finished)}
        op: Op = (
            SetData(REASSIGN_PARTITIONS, encode_reassignment(remaining), version)
            if remaining
            else Delete(REASSIGN_PARTITIONS, version)
        )
        # A request rewritten meanwhile fails the version check: the next pass reads it again.
        self.writer.commit([op])
        self.pending = frozenset(remaining)
