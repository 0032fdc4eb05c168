"""The authorizer suite (:class:`AuthorizerTests`): what every authorizer keeps, whatever its rules.

An authorizer built by its factory on a fresh store with no ACLs and started answers one decision
per action, in order (none for none); the same question gets the same answer; asking actions one
at a time or together gives the same decisions; ``super.users`` may do anything (Kafka's config,
which every authorizer of ``coordkit serve`` is handed); ``close`` after ``start`` returns.

::

    from coordkit.testing.authorizers import AuthorizerTests

    class TestMyAuthorizer(AuthorizerTests):
        @pytest.fixture
        def authorizer_factory(self):
            return MyAuthorizerFactory()
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from coordkit.kafka.acls import CLUSTER_NAME, AclOperation, ResourceType
from coordkit.strategies.authorization import Action, Authorizer

__all__ = ["AuthorizerTests"]

PRINCIPALS = ("User:alice", "User:ANONYMOUS", "User:CN=client,O=example")
ACTIONS = [
    Action(operation, kind, name)
    for operation, (kind, name) in itertools.product(
        (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE),
        ((ResourceType.TOPIC, "orders"), (ResourceType.GROUP, "billing"),
         (ResourceType.CLUSTER, CLUSTER_NAME)),
    )
]  # fmt: skip


class AuthorizerTests:
    """Subclass and override :meth:`authorizer_factory` (and :meth:`store_url` for a store of
    your own; default: a new in-process memory store)."""

    @pytest.fixture
    def authorizer_factory(self) -> Any:
        raise NotImplementedError("override the authorizer_factory fixture")

    @pytest.fixture
    def store_url(self) -> str:
        return f"memory://authorizer-kit-{uuid.uuid4().hex}"

    @pytest.fixture
    def make(self, authorizer_factory: Any, store_url: str) -> Iterator[Any]:
        from coordkit.plugins import open_store

        store = open_store(store_url)
        started: list[Authorizer] = []

        def build(**configs: str) -> Authorizer:
            authorizer: Authorizer = authorizer_factory(store, configs)
            authorizer.start()
            started.append(authorizer)
            return authorizer

        yield build
        for authorizer in started:
            authorizer.close()
        store.close()

    def test_one_decision_per_action_in_order(self, make: Any) -> None:
        authorizer = make()
        for principal in PRINCIPALS:
            together = authorizer.authorize(principal, "127.0.0.1", ACTIONS)
            assert len(together) == len(ACTIONS)
            assert all(isinstance(d, bool) for d in together)
            alone = [authorizer.authorize(principal, "127.0.0.1", [a])[0] for a in ACTIONS]
            assert together == alone
            assert authorizer.authorize(principal, "127.0.0.1", list(reversed(ACTIONS))) == (
                list(reversed(together))
            )
            assert authorizer.authorize(principal, "127.0.0.1", []) == []

    def test_the_same_question_gets_the_same_answer(self, make: Any) -> None:
        authorizer = make()
        first = authorizer.authorize("User:alice", "10.0.0.1", ACTIONS)
        assert authorizer.authorize("User:alice", "10.0.0.1", ACTIONS) == first

    def test_super_users_may_do_anything(self, make: Any) -> None:
        authorizer = make(**{"super.users": "User:admin;User:ops"})
        for principal in ("User:admin", "User:ops"):
            assert authorizer.authorize(principal, "10.0.0.9", ACTIONS) == [True] * len(ACTIONS)
