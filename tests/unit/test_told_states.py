"""What a fan-out was told: the newest (leader epoch, node version) of each partition, whatever
the order and grouping of the deliveries."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coordkit.engine.controller.announce import ToldStates
from coordkit.engine.events import StateChange
from coordkit.engine.states import LeaderIsr

_change = st.tuples(
    st.sampled_from(["a", "b"]), st.integers(0, 40), st.integers(0, 5), st.integers(0, 5)
)


@given(st.lists(st.lists(_change, max_size=30), max_size=6))
def test_each_partition_keeps_its_newest_state_told(deliveries: list[list[tuple]]) -> None:
    told = ToldStates()
    newest: dict[tuple[str, int], tuple[int, int]] = {}
    for delivery in deliveries:
        changes = []
        for topic, partition, epoch, version in delivery:
            state = LeaderIsr(1, epoch, (1,), 0, version)
            changes.append(StateChange((topic, partition), None, state, None, 0, (1,)))
            key = (epoch, version)
            newest[(topic, partition)] = max(newest.get((topic, partition), key), key)
        told.partition_states_changed(changes)
    for topic in ("a", "b"):
        for partition in range(45):
            assert told.told((topic, partition)) == newest.get((topic, partition))
