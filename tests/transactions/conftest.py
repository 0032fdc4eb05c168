"""Fixtures of the transaction tests (tox -e py311-transactions): ``coordkit serve`` in this
process and the raw client, as tests/serve has them."""

from __future__ import annotations

from serve.conftest import raw_client, serve  # noqa: F401 - fixtures
from serve.inprocess import in_process_fixture  # noqa: F401 - a fixture
