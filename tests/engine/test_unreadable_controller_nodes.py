"""Issue 29, item 2: an unreadable ``/controller_epoch`` (``abc``) or a persistent unreadable
``/controller`` stops every controller election, with every strategy, on every backend given with
``--backend``. No traceback: each candidate logs the node once per value written there; ``cluster
demo``, ``serve`` and ``cluster check`` end with one ``error:`` line naming the node, what it holds
and the command that clears it, exit status 2; the node is left as it is. Once the operator
deletes it (with that very command, on a store shared across processes), the cluster settles.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from coordkit.cli import cli
from coordkit.engine import Cluster, ClusterView, EngineConfig
from coordkit.engine.controllership import UnreadableControllerNodeError
from coordkit.kafka import layout
from coordkit.serve import KafkaServer
from coordkit.store import MetadataStore
from coordkit.store.urls import StoreURL
from harness.cli import one_error_line, snapshot
from harness.waiting import wait_for

STRATEGIES = ["kafka", "latch", "warm-standby"]
EPOCH_GARBAGE = b"abc"
#: A persistent ``/controller`` no election can use: not JSON, and JSON without ``brokerid``.
CONTROLLER_GARBAGE = {
    "not JSON": b"garbage",
    "wrong JSON": b'{"version":1,"timestamp":"1700000000000"}',
}
#: What each case of the command-line tests writes, and what the message says it holds.
UNREADABLE = {
    "epoch": (layout.CONTROLLER_EPOCH, EPOCH_GARBAGE, "not a controller epoch"),
    "controller, not JSON": (layout.CONTROLLER, b"garbage", "not a controller registration"),
    "controller, wrong JSON": (
        layout.CONTROLLER,
        CONTROLLER_GARBAGE["wrong JSON"],
        "not a controller registration (field 'brokerid': missing)",
    ),
}
REPORT = re.compile(r"election: broker (\d+): (/controller(?:_epoch)?) holds (.+?), not ")


def _config(strategy: str) -> EngineConfig:
    return EngineConfig(controller_election=strategy, auto_leader_rebalance=False)


def _reports(caplog: pytest.LogCaptureFixture, path: str) -> dict[int, list[str]]:
    """Per broker, the values of ``path`` its candidate reported unreadable, in order."""
    out: dict[int, list[str]] = {}
    for record in caplog.records:
        match = REPORT.search(record.getMessage())
        if record.name == "coordkit.strategies.elections" and match and match[2] == path:
            out.setdefault(int(match[1]), []).append(match[3])
    return out


def _assert_each_value_said_once(
    found: dict[int, list[str]], before: dict[int, list[str]], values: list[str]
) -> None:
    """Candidates that reported the first value report both, once each; one whose first read
    came after the second write (nothing made it read sooner) reports only that, once."""
    assert {b: said for b, said in found.items() if b in before} == {b: values for b in before}
    assert all(said == values[1:] for b, said in found.items() if b not in before), found


def _assert_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    failures = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not failures, [r.getMessage() for r in failures]


def _attempts(cluster: Cluster) -> dict[int, int]:
    """Claims each live broker's candidate has tried."""
    return {b: broker._candidate.attempts for b, broker in cluster.brokers.items() if broker.alive}  # type: ignore[union-attr]


def _tried_again(cluster: Cluster, brokers: list[int], times: int) -> None:
    """Wait until each of ``brokers`` has tried for the controller ``times`` more times."""
    before = _attempts(cluster)
    wait_for(
        lambda: all(_attempts(cluster)[b] >= before[b] + times for b in brokers),
        what=f"brokers {brokers} to try for the controller {times} more times",
    )


def _quiet(cluster: Cluster) -> bool:
    """Every live candidate has seen the current state of what it watches and has nothing queued."""
    return all(b._candidate.quiet() for b in cluster.brokers.values() if b.alive)  # type: ignore[union-attr]


def _blocked_by(cluster: Cluster, path: str) -> UnreadableControllerNodeError:
    def blocked() -> UnreadableControllerNodeError | None:
        found = cluster.settled().blocked_by
        return found if found is not None and found.path == path else None

    result: UnreadableControllerNodeError = wait_for(blocked, what=f"{path} to block elections")
    return result


def _clear(store: MetadataStore, problem: UnreadableControllerNodeError) -> None:
    """What the operator does: run the command the message names (on a store other processes
    can reach; a memory:// store's message names none)."""
    named = re.search(r"`coordkit (.+)`$", str(problem))
    if not store.characteristics.shared_across_processes:
        assert named is None, str(problem)
        store.delete(problem.path)
        return
    assert named is not None, str(problem)
    result = CliRunner().invoke(cli, shlex.split(named[1]))
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"deleted {problem.path} "), result.output


def _settles_again(cluster: Cluster, settled: Callable[..., ClusterView]) -> ClusterView:
    view = settled(cluster, "the cluster to settle once the node is cleared")
    assert view.controller in cluster.live_brokers()
    assert cluster.wait_converged(timeout=30)
    return view


# -- the brokers: reported once per value, retried, never touched, settled once cleared -------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_unreadable_epoch_stops_elections_until_it_is_deleted(
    make_cluster: Callable[..., Cluster],
    settled: Callable[..., ClusterView],
    caplog: pytest.LogCaptureFixture,
    strategy: str,
) -> None:
    caplog.set_level(logging.WARNING)
    cluster = make_cluster(3, config=_config(strategy))
    controller = settled(cluster).controller
    assert controller is not None
    store = cluster.admin_store
    store.set(layout.CONTROLLER_EPOCH, EPOCH_GARBAGE)
    # The controller goes: the next election reads the epoch to bump it.
    cluster.kill(controller)
    problem = _blocked_by(cluster, layout.CONTROLLER_EPOCH)
    assert str(problem).startswith(
        f"{layout.CONTROLLER_EPOCH} holds b'abc', not a controller epoch (a non-negative "
        "integer): no controller can be elected until it is deleted"
    )
    assert cluster.settled().waiting_for == str(problem)
    first = sorted(wait_for(lambda: _reports(caplog, layout.CONTROLLER_EPOCH), what="a report"))
    # The candidates keep trying (each try reads the node again) but say it once.
    _tried_again(cluster, first, 2)
    reports = _reports(caplog, layout.CONTROLLER_EPOCH)
    assert set(reports) <= set(cluster.live_brokers())
    assert all(said == ["b'abc'"] for said in reports.values()), reports
    # A new value is a new problem: said once more.
    store.set(layout.CONTROLLER_EPOCH, b"-1")
    wait_for(
        lambda: all(len(_reports(caplog, layout.CONTROLLER_EPOCH)[b]) == 2 for b in reports),
        what="the new value to be reported",
    )
    _tried_again(cluster, list(reports), 2)
    _assert_each_value_said_once(
        _reports(caplog, layout.CONTROLLER_EPOCH), reports, ["b'abc'", "b'-1'"]
    )
    _assert_no_traceback(caplog)
    assert store.get(layout.CONTROLLER_EPOCH)[0] == b"-1"
    assert store.exists(layout.CONTROLLER) is None
    problem = _blocked_by(cluster, layout.CONTROLLER_EPOCH)
    with pytest.raises(UnreadableControllerNodeError, match=r"^/controller_epoch holds b'-1'"):
        cluster.wait_settled(timeout=0.2)
    assert cluster.converged().blocked_by is not None

    _clear(store, problem)
    view = _settles_again(cluster, settled)
    assert view.epoch == 1  # counted again, as the message said


@pytest.mark.parametrize("garbage", sorted(CONTROLLER_GARBAGE))
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_persistent_unreadable_controller_stops_elections_until_it_is_deleted(
    make_cluster: Callable[..., Cluster],
    settled: Callable[..., ClusterView],
    caplog: pytest.LogCaptureFixture,
    strategy: str,
    garbage: str,
) -> None:
    caplog.set_level(logging.WARNING)
    cluster = make_cluster(3, config=_config(strategy))
    settled(cluster)
    store = cluster.admin_store
    # Written while no broker runs, by hand or by another tool: no session will take it away.
    for broker_id in cluster.live_brokers():
        cluster.kill(broker_id)
    store.create(layout.CONTROLLER, CONTROLLER_GARBAGE[garbage])
    epoch = cluster.view().epoch
    for broker_id in (0, 1, 2):
        cluster.restart(broker_id)
    problem = _blocked_by(cluster, layout.CONTROLLER)
    assert str(problem).startswith(f"{layout.CONTROLLER} holds {CONTROLLER_GARBAGE[garbage]!r}")
    wait_for(lambda: _reports(caplog, layout.CONTROLLER), what="a report")
    wait_for(lambda: _quiet(cluster), what="every candidate to see the node")
    reports = _reports(caplog, layout.CONTROLLER)
    shown = repr(CONTROLLER_GARBAGE[garbage])
    assert all(said == [shown] for said in reports.values()), reports
    # A new value is a new problem: said once more.
    store.set(layout.CONTROLLER, b"[]")
    wait_for(
        lambda: all(len(_reports(caplog, layout.CONTROLLER)[b]) == 2 for b in reports),
        what="the new value to be reported",
    )
    wait_for(lambda: _quiet(cluster), what="every candidate to see the node")
    _assert_each_value_said_once(_reports(caplog, layout.CONTROLLER), reports, [shown, "b'[]'"])
    _assert_no_traceback(caplog)
    data, stat = store.get(layout.CONTROLLER)
    assert (data, stat.ephemeral) == (b"[]", False)
    assert cluster.view().epoch == epoch  # no election got through
    result = cluster.converged()
    assert result.blocked_by is not None
    assert layout.CONTROLLER in result.paths()

    _clear(store, _blocked_by(cluster, layout.CONTROLLER))
    view = _settles_again(cluster, settled)
    assert view.epoch == epoch + 1
    assert store.exists(layout.CONTROLLER).ephemeral  # type: ignore[union-attr]


# -- the command line: one line naming the node, exit status 2, nothing written ----------------------


def _refused(store: MetadataStore, case: str, command: str, store_url: str, *args: str) -> Result:
    """Write case ``case``'s garbage, then run ``coordkit COMMAND --store STORE_URL ARGS``: one
    line about the node, exit status 2, the store unchanged."""
    path, value, expected = UNREADABLE[case]
    store.create(path, value)
    before = snapshot(store)
    argv = [*command.split(), "--store", store_url, *args]
    result = CliRunner().invoke(cli, argv, env={"COLUMNS": "200"})
    line = one_error_line(result).removeprefix("error: ")
    assert line.startswith(f"{path} holds {value!r}, {expected}"), line
    assert "no controller can be elected until it is deleted" in line
    if store.characteristics.shared_across_processes:
        url = StoreURL.parse(store_url).redacted()
        assert line.endswith(f"`coordkit delete-node --store {url} {path}`"), line
    assert snapshot(store) == before
    return result


@pytest.mark.parametrize("case", sorted(UNREADABLE))
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cluster_demo_names_the_node_and_how_to_clear_it(
    open_session: Callable[[], MetadataStore], store_url: str, strategy: str, case: str
) -> None:
    # The timeout only bounds a demo that waits instead of saying what is wrong.
    args = ["--topic", "t:3:2", "--controller-election", strategy, "--timeout", "5"]
    _refused(open_session(), case, "cluster demo", store_url, *args)


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_cluster_check_lists_the_node_and_ends_with_how_to_clear_it(
    open_session: Callable[[], MetadataStore], store_url: str, case: str
) -> None:
    result = _refused(open_session(), case, "cluster check", store_url)
    path = UNREADABLE[case][0]
    assert f"{path}: unreadable (" in result.stdout


@pytest.mark.parametrize("brokers", [["--broker-id", "3"], ["--brokers", "2"]])
@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_serve_names_the_node_and_how_to_clear_it(
    open_session: Callable[[], MetadataStore],
    store_url: str,
    case: str,
    brokers: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def serving(*_: object, **__: object) -> None:
        raise AssertionError("serving although no controller can be elected")

    monkeypatch.setattr(KafkaServer, "serve", serving)
    _refused(open_session(), case, "serve", store_url, *brokers, "--port", "0")


@pytest.mark.parametrize("case", [c for c in sorted(UNREADABLE) if c.startswith("controller")])
def test_the_admin_commands_name_the_node_and_how_to_clear_it(
    open_session: Callable[[], MetadataStore], store_url: str, case: str
) -> None:
    # The admin commands read /controller (``brokers`` shows it; ``topics delete`` asks it).
    _refused(open_session(), case, "brokers", store_url)
