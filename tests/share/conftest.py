"""The share-group tests' fixtures: ``coordkit serve`` processes on the ``--backend`` store
(``serve``) and raw clients (``raw_client``), as the serve tests have them."""

from __future__ import annotations

from serve.conftest import raw_client, serve  # noqa: F401 - fixtures
