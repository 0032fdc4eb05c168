"""The election suites: what every ``PartitionLeaderElection`` and every group-coordinator
strategy (``GroupCoordinatorSelection``) promises.

The partition leader election suite, checked on random partitions (assignment, ISR, live and
shutting-down brokers, a reassignment target):

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

The group-coordinator suite (a group's ``__consumer_offsets`` partition, a transactional id's
``__transaction_state`` partition), checked on random ids and partition counts:

* ``partition_for(id, n)`` is a partition of the topic, ``0 <= p < n``, for every id (empty,
  long, any Unicode text a Kafka string carries) and every count from 1 up;
* it is deterministic: the same id and count give the same partition, in a new instance too
  (coordkit brokers in other processes must agree on every id's coordinator);
* many ids use every partition (a strategy that sends everything to one broker is refused);
* a count below 1 is refused with ``ValueError``.

::

    from coordkit.testing.elections import GroupCoordinatorSelectionTests

    class TestMyCoordinatorSelection(GroupCoordinatorSelectionTests):
        @pytest.fixture
        def selection(self):
            return MyCoordinatorSelection()

or ``pytest -p coordkit.testing --coordkit-group-coordinator NAME`` for a registered one.
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

__all__ = [
    "GroupCoordinatorSelectionTests",
    "PartitionElectionTests",
    "coordinator_ids",
    "election_inputs",
    "kit_settings",
]

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


# -- group coordinators ----------------------------------------------------------------------------

#: Ids as clients name groups and transactional producers: any text a Kafka string carries
#: (UTF-8, so no lone surrogates), empty and long ones included.
coordinator_ids = st.text(st.characters(exclude_categories=["Cs"]), max_size=300)
#: Partition counts: Kafka's small test clusters up to far more than its default of 50.
PARTITION_COUNTS = st.integers(1, 1000)


@pytest.mark.coordkit_kit("group-coordinator")
class GroupCoordinatorSelectionTests:
    """Subclass and override ``coordkit_group_coordinator_selection`` (or ``selection`` here),
    or run ``pytest -p coordkit.testing --coordkit-group-coordinator NAME``."""

    @pytest.fixture
    def selection(self, coordkit_group_coordinator_selection: Any) -> Any:
        return coordkit_group_coordinator_selection

    def _partition(self, selection: Any, group_id: str, count: int) -> int:
        partition = selection.partition_for(group_id, count)
        assert isinstance(partition, int), (
            f"partition_for({group_id!r}, {count}) returns an int, got {partition!r}"
        )
        assert not isinstance(partition, bool), f"partition_for returns a bool: {partition!r}"
        return partition

    def test_declares_kind_name_and_description(self, selection: Any) -> None:
        assert selection.kind is ElectionKind.GROUP_COORDINATOR
        assert isinstance(selection.name, str)
        assert selection.name
        assert isinstance(selection.description, str)
        assert selection.description

    def test_partition_is_in_range_for_every_id(
        self, selection: Any, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(group_id=coordinator_ids, count=PARTITION_COUNTS)
        def check(group_id: str, count: int) -> None:
            partition = self._partition(selection, group_id, count)
            assert 0 <= partition < count, (
                f"partition_for({group_id!r}, {count}) = {partition}, not a partition of a "
                f"{count}-partition topic"
            )

        check()

    def test_deterministic_across_instances(
        self, selection: Any, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        try:
            fresh = type(selection)()
        except TypeError:  # needs arguments: the same instance stands in for a new one
            fresh = selection

        @coordkit_hypothesis_settings
        @given(group_id=coordinator_ids, count=PARTITION_COUNTS)
        def check(group_id: str, count: int) -> None:
            first = self._partition(selection, group_id, count)
            assert self._partition(selection, group_id, count) == first, (
                f"deterministic: partition_for({group_id!r}, {count}) gave {first}, then another"
            )
            assert self._partition(fresh, group_id, count) == first, (
                f"deterministic: a new instance puts {group_id!r} elsewhere than {first}"
            )

        check()

    @pytest.mark.parametrize("count", [1, 2, 7, 50])
    def test_many_ids_use_every_partition(self, selection: Any, count: int) -> None:
        ids = [f"app-{n}" for n in range(40 * count)] + [f"{n:08x}-txn" for n in range(40 * count)]
        used = {self._partition(selection, group_id, count) for group_id in ids}
        unused = sorted(set(range(count)) - used)
        assert not unused, (
            f"{len(ids)} ids over {count} partitions leave partitions {unused} without a group "
            "(their brokers would never coordinate one)"
        )

    @pytest.mark.parametrize("count", [0, -1])
    def test_a_count_below_one_is_refused(self, selection: Any, count: int) -> None:
        with pytest.raises(ValueError, match=str(count)):
            selection.partition_for("app-1", count)
