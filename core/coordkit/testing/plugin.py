"""The pytest plugin behind ``coordkit.testing`` (entry point ``pytest11``: ``coordkit.testing``).

It adds the ``--coordkit-*`` options, the fixtures a third party overrides
(``coordkit_store_backend``, ``coordkit_assignor``, ``coordkit_partition_election``,
``coordkit_group_coordinator_selection``, ``coordkit_partitioner``), the markers, and the closing
``coordkit conformance`` summary. When a ``--coordkit-store``/``-assignor``/``-election``/
``-group-coordinator``/``-partitioner`` option is given, the matching
suite from :mod:`coordkit.testing.suites` is collected too (alone, when no path was given).

Loaded in every pytest run of an environment with coordkit installed, it imports neither
hypothesis nor any store client: the suites import what they need when they are collected.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from coordkit.testing.backends import (
    NOT_APPLICABLE,
    REQUIRES_MARKER,
    StoreBackend,
    UrlBackend,
    check_url_template,
)
from coordkit.testing.waiting import DEFAULT_TIMEOUT, default_timeout, set_default_timeout

#: Marks every test of the kit, with the suite it belongs to ("store", "assignor", ...).
KIT_MARKER = "coordkit_kit"
DEFAULT_EXAMPLES = 60

_previous_timeout = pytest.StashKey[float]()

#: option dest → (the fixture it parametrizes, the suite module it collects).
_COMPONENT_OPTIONS = {
    "coordkit_store": ("coordkit_store_url", "coordkit.testing.suites.store"),
    "coordkit_assignor": ("coordkit_assignor_name", "coordkit.testing.suites.assignor"),
    "coordkit_election": ("coordkit_election_name", "coordkit.testing.suites.election"),
    "coordkit_group_coordinator": (
        "coordkit_group_coordinator_name",
        "coordkit.testing.suites.group_coordinator",
    ),
    "coordkit_partitioner": ("coordkit_partitioner_name", "coordkit.testing.suites.partitioner"),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("coordkit", "coordkit conformance kit (coordkit.testing)")
    group.addoption(
        "--coordkit-store",
        action="append",
        default=[],
        metavar="URL",
        help="run the store suite against URL; {id} in it becomes a fresh name per test, {tmp} a "
        "temporary directory (repeatable)",
    )
    group.addoption(
        "--coordkit-assignor",
        action="append",
        default=[],
        metavar="NAME",
        help="run the assignor suite on the registered assignor NAME (repeatable)",
    )
    group.addoption(
        "--coordkit-election",
        action="append",
        default=[],
        metavar="NAME",
        help="run the partition leader election suite on the registered strategy NAME (repeatable)",
    )
    group.addoption(
        "--coordkit-group-coordinator",
        action="append",
        default=[],
        metavar="NAME",
        help="run the group-coordinator suite on the registered strategy NAME (repeatable)",
    )
    group.addoption(
        "--coordkit-partitioner",
        action="append",
        default=[],
        metavar="NAME",
        help="run the partitioner suite on the registered partitioner NAME (repeatable)",
    )
    group.addoption(
        "--coordkit-timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"bound on every wait for an asynchronous outcome (default {DEFAULT_TIMEOUT:g})",
    )
    group.addoption(
        "--coordkit-examples",
        type=int,
        default=DEFAULT_EXAMPLES,
        metavar="N",
        help=f"hypothesis examples per property (default {DEFAULT_EXAMPLES})",
    )
    group.addoption(
        "--coordkit-no-shrink",
        action="store_true",
        help="report a property's first failing example as found, without shrinking it "
        "(faster failures, larger examples)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{REQUIRES_MARKER}(*capabilities): the store test needs these backend capabilities "
        "(reported as not applicable when the backend lacks one)",
    )
    config.addinivalue_line("markers", f"{KIT_MARKER}(suite): a test of coordkit's conformance kit")
    timeout = config.getoption("coordkit_timeout")
    if not timeout > 0:
        raise pytest.UsageError(f"--coordkit-timeout must be positive, got {timeout}")
    if config.getoption("coordkit_examples") < 1:
        raise pytest.UsageError(
            f"--coordkit-examples must be at least 1, got {config.getoption('coordkit_examples')}"
        )
    for template in config.getoption("coordkit_store"):
        try:
            check_url_template(template)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[_previous_timeout] = default_timeout()
    set_default_timeout(timeout)
    config.pluginmanager.register(ConformanceSummary(), "coordkit-conformance-summary")
    _collect_requested_suites(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    # A run inside another (pytester) must not leave its timeout to the outer one.
    previous = config.stash.get(_previous_timeout, None)
    if previous is not None:
        set_default_timeout(previous)


def _collect_requested_suites(config: pytest.Config) -> None:
    suites = []
    for dest, (_fixture, module) in _COMPONENT_OPTIONS.items():
        if config.getoption(dest):
            spec = importlib.util.find_spec(module)
            if spec is None or spec.origin is None:
                raise pytest.UsageError(f"coordkit.testing: suite {module} is missing (reinstall)")
            suites.append(spec.origin)
    if not suites:
        return
    if config.args_source is pytest.Config.ArgsSource.ARGS:
        config.args.extend(suites)
    else:  # no path given: run only the requested suites, not the project's tests
        config.args[:] = suites


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for dest, (fixture, _module) in _COMPONENT_OPTIONS.items():
        values = metafunc.config.getoption(dest)
        if fixture in metafunc.fixturenames and values:
            metafunc.parametrize(fixture, values, ids=_ids(dest, values), scope="session")


def _ids(dest: str, values: list[str]) -> list[str]:
    """Test ids: names as given; store URLs by scheme only (a URL may carry a password)."""
    if dest != "coordkit_store":
        return values
    schemes = [value.split("://", 1)[0] if "://" in value else "store" for value in values]
    if len(set(schemes)) == len(schemes):
        return schemes
    return [f"{scheme}{n}" for n, scheme in enumerate(schemes, 1)]


# -- fixtures a third party overrides ------------------------------------------------------------


def _missing(what: str, option: str, fixture: str) -> None:
    pytest.fail(
        f"no {what} to test: pass {option} or override the {fixture} fixture "
        "(see coordkit.testing)",
        pytrace=False,
    )


@pytest.fixture(scope="session")
def coordkit_store_url() -> str:
    """The ``--coordkit-store`` URL template (parametrized by the plugin)."""
    _missing("store", "--coordkit-store URL", "coordkit_store_backend")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def coordkit_store_backend(
    coordkit_store_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StoreBackend]:
    """The backend the store suite runs against; override it (session scope) to add fault hooks."""
    tmp = tmp_path_factory.mktemp("coordkit-store") if "{tmp}" in coordkit_store_url else None
    backend = UrlBackend(coordkit_store_url, tmp)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def coordkit_assignor_name() -> str:
    _missing("assignor", "--coordkit-assignor NAME", "coordkit_assignor")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def coordkit_assignor(coordkit_assignor_name: str) -> Any:
    """The assignor the assignor suite checks."""
    return _registered("assignor", lambda pm: pm.assignor(coordkit_assignor_name))


@pytest.fixture(scope="session")
def coordkit_election_name() -> str:
    _missing("partition leader election", "--coordkit-election NAME", "coordkit_partition_election")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def coordkit_partition_election(coordkit_election_name: str) -> Any:
    """The partition leader election strategy the election suite checks."""
    return _registered(
        "election", lambda pm: pm.election("partition-leader", coordkit_election_name)
    )


@pytest.fixture(scope="session")
def coordkit_group_coordinator_name() -> str:
    _missing(
        "group-coordinator strategy",
        "--coordkit-group-coordinator NAME",
        "coordkit_group_coordinator_selection",
    )
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def coordkit_group_coordinator_selection(coordkit_group_coordinator_name: str) -> Any:
    """The group-coordinator strategy the group-coordinator suite checks."""
    return _registered(
        "group-coordinator strategy",
        lambda pm: pm.group_coordinator_selection(coordkit_group_coordinator_name),
    )


@pytest.fixture(scope="session")
def coordkit_partitioner_name() -> str:
    _missing("partitioner", "--coordkit-partitioner NAME", "coordkit_partitioner")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def coordkit_partitioner(coordkit_partitioner_name: str) -> Any:
    """A partitioner factory: ``factory(options)`` builds a fresh partitioner."""
    return _registered("partitioner", lambda pm: pm.partitioner(coordkit_partitioner_name))


def _registered(kind: str, lookup: Any) -> Any:
    from coordkit.errors import UnknownNameError
    from coordkit.plugins import get_plugin_manager

    try:
        return lookup(get_plugin_manager())
    except UnknownNameError as exc:
        pytest.fail(f"{exc} (is the plugin installed in this environment?)", pytrace=False)


@pytest.fixture(scope="session")
def coordkit_hypothesis_settings(pytestconfig: pytest.Config) -> Any:
    """The hypothesis settings of every property the kit checks."""
    from coordkit.testing.properties import kit_settings

    return kit_settings(
        pytestconfig.getoption("coordkit_examples"),
        shrink=not pytestconfig.getoption("coordkit_no_shrink"),
    )


# -- the summary ---------------------------------------------------------------------------------


class ConformanceSummary:
    """Counts the kit's outcomes per suite, and why tests were not applicable; registered as a
    plugin of its own by :func:`pytest_configure`."""

    def __init__(self) -> None:
        self.suite_of: dict[str, str] = {}
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.not_applicable: Counter[tuple[str, str]] = Counter()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker(KIT_MARKER)
            if marker is not None and marker.args:
                self.suite_of[item.nodeid] = str(marker.args[0])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        suite = self.suite_of.get(report.nodeid)
        if suite is None:
            return
        if report.skipped:
            reason = _skip_reason(report)
            if reason.startswith(NOT_APPLICABLE):
                self.not_applicable[(suite, reason)] += 1
                self.outcomes[(suite, NOT_APPLICABLE)] += 1
            else:
                self.outcomes[(suite, "skipped")] += 1
        elif report.failed:
            self.outcomes[(suite, "failed")] += 1
        elif report.when == "call":
            self.outcomes[(suite, "passed")] += 1

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.outcomes:
            return
        terminalreporter.section("coordkit conformance")
        for suite in sorted({suite for suite, _ in self.outcomes}):
            counts = {o: n for (s, o), n in self.outcomes.items() if s == suite}
            order = ("passed", "failed", NOT_APPLICABLE, "skipped")
            text = ", ".join(f"{counts[o]} {o}" for o in order if counts.get(o))
            terminalreporter.write_line(f"{suite} suite: {text}")
            for (s, reason), n in sorted(self.not_applicable.items()):
                if s == suite:
                    terminalreporter.write_line(f"  {n} {'test' if n == 1 else 'tests'} {reason}")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)
