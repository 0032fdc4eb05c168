"""The built-in authorizer through the conformance kit's authorizer suite
(coordkit.testing.authorizers), the suite third-party authorizers run."""

from __future__ import annotations

from typing import Any

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.testing.authorizers import AuthorizerTests


class TestBuiltInAuthorizers(AuthorizerTests):
    @pytest.fixture(params=["kafka"])
    def authorizer_factory(self, request: pytest.FixtureRequest) -> Any:
        return get_plugin_manager().authorizer(request.param)


def test_every_built_in_authorizer_runs_the_kit() -> None:
    assert get_plugin_manager().authorizers.names() == ["kafka"]
