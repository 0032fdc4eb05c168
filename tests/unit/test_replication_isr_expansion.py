"""A follower outside the ISR joins it only by a fetch made after it left, as Kafka's leader
expands its ISR in a follower's fetch (``Partition.updateFollowerFetchState``): a broker of another
process that died after its last fetch — the controller took it out, its registration not yet
gone in this process — is not taken back in on an idle partition, where its last log end still
equals the high watermark (that loop bumped the leader epoch twice a second, for ever)."""

from __future__ import annotations

from coordkit.engine.events import StateChange
from coordkit.engine.replication import IsrProposal, ReplicationModel
from coordkit.engine.states import LeaderIsr
from coordkit.support.clock import ManualClock

TP = ("orders", 0)
LAG = 10.0
LEADER, FOLLOWER = 1, 2


def _model() -> tuple[ReplicationModel, ManualClock]:
    clock = ManualClock()
    model = ReplicationModel(clock)
    model.external_fetch = True
    state = LeaderIsr(LEADER, 0, (LEADER, FOLLOWER), 1, 0)
    model.partition_states_changed(
        [StateChange(TP, None, state, None, 0, replicas=(LEADER, FOLLOWER))]
    )
    model.report_log_ends(LEADER, {TP: 5}, fetched=False, appended=5)
    model.report_log_ends(FOLLOWER, {TP: 5}, fetched=True)  # caught up
    return model, clock


def _shrunk(model: ReplicationModel, clock: ManualClock) -> None:
    """The controller takes the follower out (its broker died), a moment after its fetch."""
    clock.advance(0.5)
    shrunk = LeaderIsr(LEADER, 1, (LEADER,), 1, 1)
    model.partition_states_changed(
        [StateChange(TP, None, shrunk, None, 0, replicas=(LEADER, FOLLOWER))]
    )


def test_a_follower_silent_since_it_left_is_not_taken_back() -> None:
    model, clock = _model()
    _shrunk(model, clock)
    clock.advance(0.5)
    assert model.isr_proposals(LEADER, LAG) == []


def test_a_follower_fetching_after_it_left_is_taken_back() -> None:
    model, clock = _model()
    _shrunk(model, clock)
    clock.advance(0.5)
    model.report_log_ends(FOLLOWER, {TP: 5}, fetched=True)
    assert model.isr_proposals(LEADER, LAG) == [IsrProposal(TP, LEADER, 1, add=(FOLLOWER,))]
