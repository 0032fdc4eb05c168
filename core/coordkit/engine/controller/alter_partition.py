"""AlterPartition: a partition leader asks the controller to change its ISR (Kafka's
``KafkaController.processAlterPartition``, ZooKeeper mode, KIP-497).

Kafka 3.9 brokers change ISRs this way (coordkit's own leaders write the state node themselves and
notify, as Kafka's leaders before 2.7 did; Kafka's controller and coordkit's both read those
notifications). Kafka's checks, in its order, per partition: a partition the controller does not
know is UNKNOWN_TOPIC_OR_PARTITION; a newer leader or partition epoch than the controller's means
this controller is behind (NOT_CONTROLLER, the leader looks for another); an older leader epoch is
FENCED_LEADER_EPOCH; a request for the state already written is answered with it (idempotent); an
older partition epoch is INVALID_UPDATE_VERSION; an ISR naming a broker that is not live is
INELIGIBLE_REPLICA (KIP-841). The rest is written as one fenced batch keeping the leader epoch, and
the brokers hear the new states by UpdateMetadata. A whole request from a broker the controller
does not know as live, or from an older registration of it, is STALE_BROKER_EPOCH.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.partition_state import PartitionStateMachine, Plan
from coordkit.engine.states import TP, LeaderIsr


class AlterPartitionError(enum.IntEnum):
    """Kafka's error codes (same numbers) an AlterPartition is answered with."""

    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_CONTROLLER = 41
    FENCED_LEADER_EPOCH = 74
    STALE_BROKER_EPOCH = 77
    INVALID_UPDATE_VERSION = 95
    INELIGIBLE_REPLICA = 107


@attrs.frozen
class IsrChange:
    """One partition's wanted ISR, as its leader asks for it."""

    tp: TP
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int


@attrs.frozen
class AlterPartitionResult:
    """A whole-request error, or each partition's new state or error."""

    error: AlterPartitionError = AlterPartitionError.NONE
    partitions: dict[TP, LeaderIsr | AlterPartitionError] = attrs.field(factory=dict)


def _none(_tp: TP) -> Plan | None:
    # A version conflict is answered INVALID_UPDATE_VERSION (as Kafka's bad-version updates),
    # not decided again: the leader asks again from the state it will be told.
    return None


def alter_partition(
    context: ControllerContext,
    partitions: PartitionStateMachine,
    broker_id: int,
    broker_epoch: int,
    changes: Sequence[IsrChange],
) -> AlterPartitionResult:
    """Kafka's ``tryProcessAlterPartition`` (on the controller's event thread)."""
    live = context.live.get(broker_id)
    if live is None or live[1] != broker_epoch:
        return AlterPartitionResult(AlterPartitionError.STALE_BROKER_EPOCH)
    answers: dict[TP, LeaderIsr | AlterPartitionError] = {}
    plans: list[Plan] = []
    alive = set(context.live)
    for change in changes:
        part = context.parts.get(change.tp)
        current = None if part is None else part.state
        if part is None or current is None:
            answers[change.tp] = AlterPartitionError.UNKNOWN_TOPIC_OR_PARTITION
        elif (change.partition_epoch > current.zk_version
              or change.leader_epoch > current.leader_epoch):  # fmt: skip
            answers[change.tp] = AlterPartitionError.NOT_CONTROLLER
        elif change.leader_epoch < current.leader_epoch:
            answers[change.tp] = AlterPartitionError.FENCED_LEADER_EPOCH
        elif current.leader == broker_id and tuple(change.isr) == tuple(current.isr):
            answers[change.tp] = current  # already so: answered as it is
        elif change.partition_epoch < current.zk_version:
            answers[change.tp] = AlterPartitionError.INVALID_UPDATE_VERSION
        elif set(change.isr) - alive:
            answers[change.tp] = AlterPartitionError.INELIGIBLE_REPLICA
        else:
            plans.append(Plan(change.tp, broker_id, tuple(change.isr), None, _none, part,
                              bump=False))  # fmt: skip
    for written in partitions.persist(plans):
        answers[written.tp] = written.current
    for plan in plans:
        answers.setdefault(plan.tp, AlterPartitionError.INVALID_UPDATE_VERSION)
    return AlterPartitionResult(partitions=answers)
