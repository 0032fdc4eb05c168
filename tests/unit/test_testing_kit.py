"""The conformance kit catches broken plugins: each deliberately broken store, assignor, election
or partitioner below is run through the kit in a pytest of its own (pytester), written as a third
party would write it, and the kit must fail it with a message naming the property it breaks; the
same selection passes on the intact component, so the failure is the breakage's.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import coordkit.testing.suites.assignor
import coordkit.testing.suites.election
import coordkit.testing.suites.partitioner
import coordkit.testing.suites.store
import coordkit_memory
from coordkit.plugins import get_plugin_manager

pytest_plugins = ["pytester"]

# An in-process pytester run forgets the modules it imported when it ends, and the next run
# imports them again: numpy's core refuses that, and classes would stop being themselves. What the
# runs below use is loaded here, once, so that they all share it.
_SHARED = (
    coordkit.testing.suites.assignor,
    coordkit.testing.suites.election,
    coordkit.testing.suites.partitioner,
    coordkit.testing.suites.store,
    coordkit_memory,
)
for _registry in ("assignors", "elections", "partitioners", "stores"):
    getattr(get_plugin_manager(), _registry).names()

#: Broken stores: the memory store with one behaviour replaced (by swapping the class of a store
#: the memory plugin opened, so everything else is the real thing).
STORE_CONFTEST = textwrap.dedent(
    """
    import itertools
    import uuid

    import attrs
    import pytest

    from coordkit.support.clock import ManualClock
    from coordkit.store import Create, NodeExistsError
    from coordkit.testing import StoreBackend
    from coordkit_memory import MemoryStore


    class HalfCommit(MemoryStore):
        # Applies the first half of a commit's ops one by one, then commits the rest: not atomic.
        def commit(self, ops):
            ops = list(ops)
            half = len(ops) // 2
            for error in self.apply(ops[:half]):
                if isinstance(error, Exception):
                    raise error
            return [None] * half + super().commit(ops[half:])


    class ReusedSequence(MemoryStore):
        # Numbers a sequential node by the children the parent has now: deleted numbers return.
        def create(self, path, data=b"", *, ephemeral=False, sequential=False, make_parents=False):
            if not sequential:
                return super().create(path, data, ephemeral=ephemeral, make_parents=make_parents)
            parent = path.rsplit("/", 1)[0] or "/"
            for number in itertools.count(len(self.children(parent))):
                try:
                    return super().create(f"{path}{number:010d}", data, ephemeral=ephemeral)
                except NodeExistsError:
                    continue


    class MissedChange(MemoryStore):
        # Data watches drop the first change after the initial state.
        def watch_data(self, path, callback):
            delivered = itertools.count()

            def lossy(event):
                if next(delivered) != 1:
                    callback(event)

            return super().watch_data(path, lossy)


    class ClaimsMultiHost(MemoryStore):
        # Declares other machines can reach it: an in-process store offers no network path.
        characteristics = attrs.evolve(MemoryStore.characteristics, multi_host=True)


    BROKEN = {"half-commit": HalfCommit, "reused-sequence": ReusedSequence,
              "missed-change": MissedChange, "claims-multi-host": ClaimsMultiHost,
              "intact": MemoryStore}


    class BrokenMemoryBackend(StoreBackend):
        name = "broken-memory"

        def __init__(self, breakage):
            self.cls = BROKEN[breakage]
            self.clock = ManualClock()

        def new_url(self):
            # Named servers outlive an in-process pytester run: a fresh name every time.
            return f"memory://kit-broken-{uuid.uuid4().hex}"

        def open(self, url, **options):
            store = super().open(url, clock=self.clock, **options)
            store.__class__ = self.cls
            return store

        def expire(self, store):
            store.server.expire_session(store.session_id)

        def disconnect(self, store):
            store.disconnect()

        def reconnect(self, store):
            store.reconnect()

        def advance_clock(self, seconds):
            self.clock.advance(seconds)


    def pytest_addoption(parser):
        parser.addoption("--breakage", default="intact")


    @pytest.fixture(scope="session")
    def coordkit_store_backend(pytestconfig):
        return BrokenMemoryBackend(pytestconfig.getoption("breakage"))
    """
)

STORE_TESTS = textwrap.dedent(
    """
    from coordkit.testing import store


    class TestNodes(store.StoreNodeTests):
        pass


    class TestSequential(store.StoreSequentialTests):
        pass


    class TestTransactions(store.StoreTransactionTests):
        pass


    class TestWatches(store.StoreWatchTests):
        pass


    class TestModel(store.StoreModelTests):
        pass


    class TestProcesses(store.StoreProcessTests):
        pass


    class TestDurability(store.StoreDurabilityTests):
        pass


    class TestClock(store.StoreClockTests):
        pass


    class TestHosts(store.StoreMultiHostTests):
        pass
    """
)


def run_kit(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # --coordkit-timeout keeps the watch test's wait for a change that never comes short.
    return pytester.runpytest(
        "-p", "coordkit.testing", "-p", "no:cacheprovider", "--coordkit-timeout", "3", *args
    )


@pytest.fixture
def store_kit(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(STORE_CONFTEST)
    pytester.makepyfile(test_broken_store=STORE_TESTS)
    return pytester


@pytest.mark.parametrize(
    ("breakage", "selection", "failing", "message"),
    [
        (
            "half-commit",
            "TestTransactions",
            "TestTransactions::test_late_failure_rolls_back_earlier_creates_sets_and_deletes",
            "a failed commit must leave the store unchanged (atomicity)",
        ),
        (
            "reused-sequence",
            "TestSequential",
            "TestSequential::test_sequence_counts_child_creations_not_deletions",
            "a deleted child's number is never reused",
        ),
        (
            "missed-change",
            "TestWatches and delivers_current_state",
            "TestWatches::test_data_watch_delivers_current_state_then_changes",
            "waiting for the watch to deliver the change to v1 (a watch must not miss a change)",
        ),
    ],
)
def test_the_store_suite_fails_a_broken_store_naming_the_property(
    store_kit: pytest.Pytester, breakage: str, selection: str, failing: str, message: str
) -> None:
    broken = run_kit(store_kit, "--breakage", breakage, "-k", selection)
    assert broken.ret == pytest.ExitCode.TESTS_FAILED
    broken.stdout.fnmatch_lines([f"FAILED *::{failing}*"])
    assert message in broken.stdout.str()
    intact = run_kit(store_kit, "--breakage", "intact", "-k", selection)
    assert intact.ret == pytest.ExitCode.OK, intact.stdout.str()
    assert intact.parseoutcomes()["passed"] >= 1


def test_a_store_claiming_other_hosts_reach_it_fails_saying_how_to_show_them(
    store_kit: pytest.Pytester,
) -> None:
    intact = run_kit(store_kit, "-k", "TestHosts")
    outcomes = intact.parseoutcomes()
    assert (outcomes["skipped"], outcomes.get("passed", 0)) == (6, 0), "memory is in-process only"
    claimed = run_kit(store_kit, "--breakage", "claims-multi-host", "-k", "TestHosts")
    assert claimed.ret == pytest.ExitCode.TESTS_FAILED
    claimed.stdout.fnmatch_lines(
        ["ERROR *::TestHosts::test_hosts_share_the_tree_and_its_versions*"]
    )
    assert "names no host:port to reach another way" in claimed.stdout.str()
    assert "overrides StoreBackend.another_path" in claimed.stdout.str()


def test_the_model_state_machine_catches_a_non_atomic_commit(store_kit: pytest.Pytester) -> None:
    result = run_kit(store_kit, "--breakage", "half-commit", "-k", "TestModel")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "store" in result.stdout.str()
    result.stdout.fnmatch_lines(["*model of ZooKeeper*"])


def test_inapplicable_store_tests_are_reported_never_silently_passed(
    store_kit: pytest.Pytester,
) -> None:
    result = run_kit(store_kit, "-k", "TestProcesses or TestDurability or TestClock")
    outcomes = result.parseoutcomes()
    # The memory store is shared by no other process and not durable; its clock can move.
    assert outcomes["skipped"] == 4
    assert outcomes["passed"] == 2
    result.stdout.fnmatch_lines(
        [
            "*coordkit conformance*",
            "store suite: 2 passed, 4 not applicable",
            "  1 test not applicable: broken-memory declares no durable, restart_server",
            "  3 tests not applicable: broken-memory declares no shared_across_processes",
        ]
    )


# -- assignors, elections, partitioners ------------------------------------------------------------

COMPONENT_CONFTEST = textwrap.dedent(
    """
    from typing import ClassVar

    import pytest

    from coordkit.strategies.assignment import GroupAssignment, RebalanceProtocol
    from coordkit.strategies.elections import ElectionKind, ElectionReason, LeaderAndIsr
    from coordkit.plugins import get_plugin_manager


    class DropsAPartition:
        # Round-robin, minus the last partition of whoever got the most.
        name = "drops-a-partition"
        protocols = (RebalanceProtocol.EAGER,)

        def assign(self, group):
            result = get_plugin_manager().assignor("roundrobin").assign(group)
            assigned = {m: list(result.indices(m)) for m in result.members}
            fullest = max(assigned, key=lambda m: len(assigned[m]), default=None)
            if fullest is not None and assigned[fullest]:
                assigned[fullest].pop()
            return GroupAssignment.from_indices(result.space, assigned)


    class MemberOrderDependent:
        # Deals partitions in the order the members happen to be listed.
        name = "member-order"
        protocols = (RebalanceProtocol.EAGER,)

        def assign(self, group):
            space = group.space()
            members = list(group.members)
            assigned = {m: [] for m in members}
            for topic in space.topics:
                subscribers = [m for m in members if topic in group.members[m].topics]
                for p in range(space.count(topic)) if subscribers else ():
                    assigned[subscribers[p % len(subscribers)]].append(space.index(topic, p))
            return GroupAssignment.from_indices(space, assigned)


    class EagerClaimingCooperative:
        # Says it is cooperative, but hands moved partitions over at once (the eager sticky).
        name = "fake-cooperative"
        protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

        def assign(self, group):
            return get_plugin_manager().assignor("sticky").assign(group)


    class ClaimsSticky:
        # Round-robin declaring itself sticky.
        name = "claims-sticky"
        protocols = (RebalanceProtocol.EAGER,)
        sticky: ClassVar[bool] = True

        def assign(self, group):
            return get_plugin_manager().assignor("roundrobin").assign(group)


    class FirstReplicaAlways:
        # The first assigned replica, live or not.
        kind = ElectionKind.PARTITION_LEADER
        name = "first-replica"
        description = "first assigned replica, whatever its state"

        def elect(self, inp):
            return LeaderAndIsr(inp.assignment[0], inp.isr, ElectionReason.OFFLINE)


    class LengthHash:
        # Keys routed by their length, not by murmur2.
        name = "length-hash"
        description = "keys by length"

        def __call__(self, options=None):
            base = get_plugin_manager().partitioner("murmur2")(options)
            original = base.partition

            def partition(record, cluster):
                if record.key is not None and record.partition is None:
                    return len(record.key) % cluster.partition_count(record.topic)
                return original(record, cluster)

            base.partition = partition
            return base


    BROKEN = {
        "drops-a-partition": DropsAPartition(),
        "member-order": MemberOrderDependent(),
        "fake-cooperative": EagerClaimingCooperative(),
        "claims-sticky": ClaimsSticky(),
        "first-replica": FirstReplicaAlways(),
        "length-hash": LengthHash(),
    }


    def pytest_addoption(parser):
        parser.addoption("--broken", default="")


    @pytest.fixture(scope="session")
    def coordkit_assignor(pytestconfig):
        return BROKEN[pytestconfig.getoption("broken")]


    @pytest.fixture(scope="session")
    def coordkit_partition_election(pytestconfig):
        return BROKEN[pytestconfig.getoption("broken")]


    @pytest.fixture(scope="session")
    def coordkit_partitioner(pytestconfig):
        return BROKEN[pytestconfig.getoption("broken")]
    """
)

COMPONENT_TESTS = textwrap.dedent(
    """
    from coordkit.testing.assignors import AssignorTests
    from coordkit.testing.elections import PartitionElectionTests
    from coordkit.testing.partitioners import PartitionerTests


    class TestAssignor(AssignorTests):
        pass


    class TestElection(PartitionElectionTests):
        pass


    class TestPartitioner(PartitionerTests):
        pass
    """
)


@pytest.mark.parametrize(
    ("broken", "selection", "failing", "message"),
    [
        (
            "drops-a-partition",
            "TestAssignor and exactly_once",
            "test_every_subscribed_partition_is_assigned_exactly_once",
            "exactly once: * assigned to no member",
        ),
        (
            "member-order",
            "TestAssignor and member_order",
            "test_independent_of_member_order",
            "independent of member order: listing the members as *",
        ),
        (
            "fake-cooperative",
            "TestAssignor and never_revokes",
            "test_cooperative_never_revokes_and_assigns_a_partition_in_one_round",
            "cooperative safety: * revoked from one member and assigned to another*",
        ),
        (
            "claims-sticky",
            "TestAssignor and sticky",
            "test_sticky_when_a_member_leaves_only_its_partitions_move",
            "sticky: when * leaves only its partitions move, but * lost *",
        ),
        (
            "first-replica",
            "TestElection and live_replica",
            "test_leader_is_a_live_replica",
            "leader is live: * is not*",
        ),
        (
            "length-hash",
            "TestPartitioner and murmur2",
            "test_keyed_records_follow_murmur2_whatever_came_before",
            "key routing: key * went to *, Kafka's murmur2 rule says *",
        ),
    ],
)
def test_the_suites_fail_a_broken_component_naming_the_property(
    pytester: pytest.Pytester, broken: str, selection: str, failing: str, message: str
) -> None:
    pytester.makeconftest(COMPONENT_CONFTEST)
    pytester.makepyfile(test_broken=COMPONENT_TESTS)
    result = run_kit(
        pytester,
        "--broken",
        broken,
        "-k",
        selection,
        "--hypothesis-seed",
        "1",
        "--coordkit-no-shrink",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"FAILED *::{failing}*"])
    result.stdout.fnmatch_lines([f"*{message}*"])


def test_the_same_selections_pass_on_built_in_components(pytester: pytest.Pytester) -> None:
    result = run_kit(
        pytester,
        "--coordkit-assignor", "cooperative-sticky",
        "--coordkit-election", "offline",
        "--coordkit-partitioner", "murmur2",
        "-k", "exactly_once or member_order or never_revokes or live_replica or murmur2",
        "--hypothesis-seed", "1",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 5
    assert "failed" not in outcomes


# -- the plugin itself -----------------------------------------------------------------------------


def test_a_store_url_alone_runs_the_whole_store_suite(pytester: pytest.Pytester) -> None:
    result = run_kit(
        pytester, "--coordkit-store", "memory://{id}", "-k", "create or get_many or session_expires"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    passed = result.parseoutcomes()["passed"]
    assert passed >= 10
    # A URL has no fault hooks: the test of an ephemeral node under expiry is not applicable.
    result.stdout.fnmatch_lines(
        [
            "*coordkit conformance*",
            f"store suite: {passed} passed, * not applicable",
            "*not applicable: memory declares no expire_session",
        ]
    )


def test_a_store_url_without_the_id_placeholder_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    result = run_kit(pytester, "--coordkit-store", "memory://shared")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--coordkit-store 'memory://shared': the URL needs {id}*"])


def test_without_a_store_the_suite_fails_saying_what_to_pass(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_store=STORE_TESTS)
    result = run_kit(pytester, "-k", "TestNodes and test_root_always_exists")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*no store to test: pass --coordkit-store URL or override the coordkit_store_backend*"]
    )


def test_an_unknown_assignor_name_fails_naming_the_known_ones(pytester: pytest.Pytester) -> None:
    result = run_kit(pytester, "--coordkit-assignor", "nope", "-k", "declares")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*'nope'*roundrobin*"])


@pytest.mark.parametrize("name", ["coordkit.testing", "coordkit.testing.plugin"])
@pytest.mark.parametrize("autoload", [True, False])
def test_naming_the_plugin_loads_it_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str, autoload: bool
) -> None:
    # The pytest11 entry point loads the plugin already; `-p` naming it again is harmless, and
    # loads it when entry points are not loaded.
    if not autoload:
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess("-p", name, "--help")
    assert result.ret == pytest.ExitCode.OK
    assert result.stdout.str().count("--coordkit-store=URL") == 1


def test_the_plugin_loads_without_hypothesis_or_store_clients() -> None:
    # Loaded in every pytest run of an environment with coordkit: it must stay light.
    code = (
        "import sys, coordkit.testing.plugin\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'hypothesis', 'kazoo', 'redis', 'pyspark'})\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
