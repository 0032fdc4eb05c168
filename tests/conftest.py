"""Shared pytest configuration: the ``--backend`` option selects the store backends that the
contract suite and the engine tests run against (default: memory)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.backends import BACKENDS, Backend, load_backend


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        action="append",
        choices=sorted(BACKENDS),
        help="store backend to run backend-parametrised tests against (repeatable; default: memory)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend_name" in metafunc.fixturenames:
        names = metafunc.config.getoption("backend") or ["memory"]
        metafunc.parametrize("backend_name", names, scope="session")


@pytest.fixture(scope="session")
def backend(backend_name: str) -> Iterator[Backend]:
    instance = load_backend(backend_name)
    yield instance
    instance.close()
