"""A follower the replication model never hears fetch (a broker of another ``coordkit serve``
process whose fetches do not come) leaves its leader's ISR once the leader has records it lacks
and has led for longer than ``replica.lag.time.max.ms``, as Kafka's leader drops a follower that
is not caught up (``Replica.isCaughtUp``): it would otherwise hold the high watermark, and
acks=all, for ever."""

from __future__ import annotations

from coordkit.engine.events import StateChange
from coordkit.engine.replication import IsrProposal, ReplicationModel
from coordkit.engine.states import LeaderIsr
from coordkit.support.clock import ManualClock

TP = ("orders", 0)
LAG = 2.0
#: Broker 1 runs in this process (it reports its log ends); 2 and 3 run elsewhere.
LEADER, REMOTE = 1, (2, 3)


def _model(*, external_fetch: bool = True) -> tuple[ReplicationModel, ManualClock]:
    clock = ManualClock()
    model = ReplicationModel(clock)
    model.external_fetch = external_fetch
    state = LeaderIsr(LEADER, 0, (LEADER, *REMOTE), 1, 0)
    model.partition_states_changed(
        [StateChange(TP, None, state, None, 0, replicas=(LEADER, *REMOTE))]
    )
    return model, clock


def test_followers_never_heard_leave_once_behind_after_the_lag_time() -> None:
    model, clock = _model()
    clock.advance(LAG + 1)
    # Nothing appended: the silent followers are caught up (both logs end at 0) and stay.
    assert model.isr_proposals(LEADER, LAG) == []
    model.report_log_ends(LEADER, {TP: 5}, fetched=False, appended=5)
    state = model.log(TP)
    assert state is not None
    assert state.hw == 0  # acks=all waits on them
    assert model.isr_proposals(LEADER, LAG) == [IsrProposal(TP, LEADER, 0, remove=REMOTE)]


def test_a_new_leader_gets_the_lag_time_before_dropping_them() -> None:
    model, clock = _model()
    model.report_log_ends(LEADER, {TP: 5}, fetched=False, appended=5)
    clock.advance(LAG / 2)
    assert model.isr_proposals(LEADER, LAG) == []
    clock.advance(LAG)
    assert model.isr_proposals(LEADER, LAG) == [IsrProposal(TP, LEADER, 0, remove=REMOTE)]


def test_a_follower_heard_fetching_is_judged_by_its_fetches() -> None:
    model, clock = _model()
    clock.advance(LAG + 1)
    model.report_log_ends(LEADER, {TP: 5}, fetched=False, appended=5)
    model.report_log_ends(2, {TP: 5}, fetched=True)  # broker 2's fetch reached the leader
    assert model.isr_proposals(LEADER, LAG) == [IsrProposal(TP, LEADER, 0, remove=(3,))]


def test_an_engine_only_model_leaves_other_processes_fetches_to_them() -> None:
    model, clock = _model(external_fetch=False)
    model.append(TP, 5, leader=LEADER)
    clock.advance(LAG + 1)
    assert model.isr_proposals(LEADER, LAG) == []
