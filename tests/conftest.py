"""Shared pytest configuration: the ``--backend`` option selects the store backends that the
contract suite and the engine tests run against (default: memory); the header names the ZooKeeper
and redis-server versions the fixtures start (harness.server_versions)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

from harness import server_versions
from harness.backends import BACKENDS, Backend, load_backend

SERVERS = pytest.StashKey[list[str]]()

# No deadline for any property: a per-example time limit is a timed assertion, and a loaded
# machine (CI's lanes side by side) failed one whose first example warmed numpy up (258 ms against
# hypothesis's default 200). The kit's own suites run the same way (coordkit.testing.properties).
settings.register_profile("coordkit", deadline=None)
settings.load_profile("coordkit")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        action="append",
        choices=sorted(BACKENDS),
        help="store backend to run backend-parametrised tests against (repeatable; default: memory)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # The servers the fixtures start, named in the header; an env that claims other versions stops.
    lines, errors = server_versions.header()
    if errors:
        raise pytest.UsageError("\n".join(errors))
    config.stash[SERVERS] = lines


def pytest_report_header(config: pytest.Config) -> list[str]:
    return config.stash.get(SERVERS, [])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend_name" in metafunc.fixturenames:
        names = metafunc.config.getoption("backend") or ["memory"]
        metafunc.parametrize("backend_name", names, scope="session")


@pytest.fixture(scope="session")
def backend(backend_name: str) -> Iterator[Backend]:
    instance = load_backend(backend_name)
    yield instance
    instance.close()
