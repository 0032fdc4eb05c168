"""The replication model hands out a partition's leader and leader epoch as one pair: a state
change sets them one after the other, and a served broker stamps its appends with what it reads
(a new leader paired with the old epoch would mislabel its records in the leader epoch cache)."""

from __future__ import annotations

import threading

from coordkit.engine.events import StateChange
from coordkit.engine.replication import ReplicationModel
from coordkit.engine.states import LeaderIsr

TP = ("orders", 0)


def _change(leader: int, epoch: int, version: int) -> StateChange:
    return StateChange(
        TP, None, LeaderIsr(leader, epoch, (0, 1), 1, version), None, 0, replicas=(0, 1)
    )


def test_leader_and_epoch_are_read_as_one_pair() -> None:
    model = ReplicationModel()
    assert model.leadership(TP) is None
    model.partition_states_changed([_change(0, 3, 1)])
    assert model.leadership(TP) == (0, 3)
    # A change half applied (the leader set, not yet its epoch), as another thread would be
    # between the two assignments: the pair is not read until the change is complete.
    log = model.log(TP)
    assert log is not None
    read: list[tuple[int, int] | None] = []
    with model._lock:
        log.leader = 1
        reader = threading.Thread(target=lambda: read.append(model.leadership(TP)))
        reader.start()
        reader.join(0.2)
        assert reader.is_alive()  # waiting for the change to complete
        log.leader_epoch = 4
    reader.join(5)
    assert read == [(1, 4)]
