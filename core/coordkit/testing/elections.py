"""The partition leader election suite: what every ``PartitionLeaderElection`` promises, checked on
random partitions (assignment, ISR, live and shutting-down brokers, a reassignment target).

* a leader is a live replica (of the assignment or the target), and none is elected when no
  replica is live;
* a leader from outside the ISR is flagged ``unclean`` (and only then);
* the new ISR holds the leader and nothing that was not in the old ISR;
* the outcome is deterministic and the leader independent of the order the ISR lists brokers
  (Kafka's "first" is assignment order).

::

    from coordkit.testing.elections import PartitionElectionTests

    class TestMyElection(PartitionElectionTests):
        @pytest.fixture
        def election(self):
            return MyElection()
"""

from __future__ import annotations

from typing import Any

import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordkit.strategies.elections import (
    ElectionKind,
    ElectionReason,
    LeaderAndIsr,
    PartitionElectionInput,
    PartitionLeaderElection,
)
from coordkit.testing.properties import kit_settings

__all__ = ["PartitionElectionTests", "election_inputs", "kit_settings"]

BROKERS = st.integers(0, 7)


@st.composite
def election_inputs(draw: st.DrawFn) -> PartitionElectionInput:
    """A partition as the controller sees it when it elects a leader."""
    assignment = draw(st.lists(BROKERS, min_size=1, max_size=4, unique=True))
    target = draw(st.none() | st.lists(BROKERS, min_size=1, max_size=4, unique=True))
    replicas = list(dict.fromkeys(assignment + (target or [])))
    isr = draw(st.lists(st.sampled_from(replicas), max_size=len(replicas), unique=True))
    live = draw(st.sets(BROKERS))
    shutting_down = draw(st.sets(st.sampled_from(sorted(live)))) if live else set()
    return PartitionElectionInput(assignment, isr, live, shutting_down, target)


def _replicas(inp: PartitionElectionInput) -> set[int]:
    return set(inp.assignment) | set(inp.target or ())


@pytest.mark.coordkit_kit("election")
class PartitionElectionTests:
    """Subclass and override ``coordkit_partition_election`` (or ``election`` here), or run
    ``pytest -p coordkit.testing --coordkit-election NAME``."""

    @pytest.fixture
    def election(self, coordkit_partition_election: PartitionLeaderElection) -> Any:
        return coordkit_partition_election

    def _elect(self, election: Any, inp: PartitionElectionInput) -> LeaderAndIsr | None:
        result = election.elect(inp)
        assert result is None or isinstance(result, LeaderAndIsr), (
            f"elect() returns a LeaderAndIsr or None, got {result!r}"
        )
        return result

    def test_declares_kind_name_and_description(self, election: Any) -> None:
        assert election.kind is ElectionKind.PARTITION_LEADER
        assert isinstance(election.name, str)
        assert election.name
        assert isinstance(election.description, str)
        assert election.description

    def test_leader_is_a_live_replica(
        self, election: Any, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(inp=election_inputs())
        def check(inp: PartitionElectionInput) -> None:
            result = self._elect(election, inp)
            if result is None:
                return
            assert result.leader in inp.live, f"leader is live: {result.leader} is not, {inp}"
            assert result.leader in _replicas(inp), (
                f"leader is a replica: {result.leader} is not among {sorted(_replicas(inp))}"
            )
            assert isinstance(result.reason, ElectionReason)

        check()

    def test_no_live_replica_means_no_leader(
        self, election: Any, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(inp=election_inputs())
        def check(inp: PartitionElectionInput) -> None:
            hypothesis.assume(not _replicas(inp) & inp.live)
            result = self._elect(election, inp)
            assert result is None, f"no replica is live, yet {result.leader} was elected"

        check()

    def test_leader_from_outside_the_isr_is_flagged_unclean(
        self, election: Any, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(inp=election_inputs())
        def check(inp: PartitionElectionInput) -> None:
            result = self._elect(election, inp)
            if result is None:
                return
            outside = result.leader not in inp.isr
            assert result.unclean == outside, (
                f"leader in ISR unless flagged unclean: leader {result.leader}, ISR "
                f"{list(inp.isr)}, unclean={result.unclean}"
            )
            assert (result.reason is ElectionReason.UNCLEAN) == outside

        check()

    def test_new_isr_holds_the_leader_and_only_old_isr_members(
        self, election: Any, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(inp=election_inputs())
        def check(inp: PartitionElectionInput) -> None:
            result = self._elect(election, inp)
            if result is None:
                return
            assert result.leader in result.isr, (
                f"the new ISR {list(result.isr)} must hold the leader {result.leader}"
            )
            strangers = set(result.isr) - set(inp.isr) - {result.leader}
            assert not strangers, f"the new ISR adds {sorted(strangers)}, never in sync"
            assert len(set(result.isr)) == len(result.isr), f"ISR repeats a broker: {result.isr}"

        check()

    def test_deterministic_and_independent_of_isr_order(
        self, election: Any, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(inp=election_inputs(), data=st.data())
        def check(inp: PartitionElectionInput, data: st.DataObject) -> None:
            first = self._elect(election, inp)
            assert self._elect(election, inp) == first, "deterministic: same input, other outcome"
            order = data.draw(st.permutations(list(inp.isr)), label="ISR order")
            other = self._elect(
                election,
                PartitionElectionInput(
                    inp.assignment, order, inp.live, inp.shutting_down, inp.target
                ),
            )
            chosen = None if first is None else (first.leader, set(first.isr), first.unclean)
            again = None if other is None else (other.leader, set(other.isr), other.unclean)
            assert again == chosen, (
                f"independent of ISR order: ISR {list(inp.isr)} elected {chosen}, "
                f"the same ISR listed as {order} elected {again}"
            )

        check()
