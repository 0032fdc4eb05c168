"""The store contract as a hypothesis state machine: random sequences of operations (single and
in transactions) behave exactly like a plain-dict model of ZooKeeper's rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from coordkit.store import (
    BadVersionError,
    Check,
    Create,
    Delete,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SetData,
    StoreError,
    paths,
    read_tree,
)
from coordkit.testing.backends import StoreBackend
from coordkit.testing.store.base import StoreSuite

NAMES = st.sampled_from(["a", "b", "c"])
PATHS = st.lists(NAMES, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts))
DATA = st.binary(max_size=8)
VERSIONS = st.integers(min_value=-1, max_value=3)


class Model:
    """ZooKeeper's rules over a dict: path → (data, version)."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(
            p[len(prefix) :]
            for p in self.nodes
            if p.startswith(prefix) and "/" not in p[len(prefix) :] and p != "/"
        )

    def apply(self, op: Any) -> None:
        """Apply one op or raise the error the store must raise."""
        match op:
            case Create(path=path, data=data):
                if path in self.nodes:
                    raise NodeExistsError("", path=path)
                if paths.parent(path) not in self.nodes:
                    raise NoNodeError("", path=path)
                self.nodes[path] = (data, 0)
            case SetData(path=path, data=data, version=version):
                current = self._get(path, version)
                self.nodes[path] = (data, current[1] + 1)
            case Delete(path=path, version=version):
                self._get(path, version)
                if self.children(path):
                    raise NotEmptyError("", path=path)
                del self.nodes[path]
            case Check(path=path, version=version):
                self._get(path, version)

    def apply_all(self, ops: list[Any]) -> None:
        for op in ops:
            self.apply(op)

    def _get(self, path: str, version: int) -> tuple[bytes, int]:
        if path not in self.nodes:
            raise NoNodeError("", path=path)
        current = self.nodes[path]
        if version != -1 and current[1] != version:
            raise BadVersionError("", path=path)
        return current


def outcome(action: Callable[[], object]) -> type[StoreError] | None:
    """The store error type ``action`` raises, or ``None`` if it succeeds."""
    try:
        action()
    except StoreError as exc:
        return type(exc)
    return None


OPS = st.one_of(
    st.builds(Create, PATHS, DATA),
    st.builds(SetData, PATHS, DATA, VERSIONS),
    st.builds(Delete, PATHS, VERSIONS),
    st.builds(Check, PATHS, VERSIONS),
)


class StoreMachine(RuleBasedStateMachine):
    backend: StoreBackend

    def __init__(self) -> None:
        super().__init__()
        self.store: MetadataStore = self.backend.open(self.backend.new_url())
        self.model = Model()

    def _run(self, op: Any) -> object:
        match op:
            case Create(path=path, data=data):
                return self.store.create(path, data)
            case SetData(path=path, data=data, version=version):
                return self.store.set(path, data, version)
            case Delete(path=path, version=version):
                return self.store.delete(path, version)
        return self.store.commit([op])

    @rule(op=OPS)
    def single(self, op: Any) -> None:
        expected = outcome(lambda: self.model.apply(op))
        actual = outcome(lambda: self._run(op))
        assert actual is expected, f"{op}: store {actual}, model of ZooKeeper {expected}"

    @rule(ops=st.lists(OPS, min_size=1, max_size=4))
    def transaction(self, ops: list[Any]) -> None:
        trial = Model()
        trial.nodes = dict(self.model.nodes)
        expected = outcome(lambda: trial.apply_all(ops))
        actual = outcome(lambda: self.store.commit(ops))
        assert actual is expected, f"commit {ops}: store {actual}, model of ZooKeeper {expected}"
        if expected is None:
            self.model = trial

    @invariant()
    def tree_matches_model(self) -> None:
        seen = {path: (data, stat.version) for path, (data, stat) in read_tree(self.store).items()}
        assert seen == self.model.nodes, "the store's tree differs from the model of ZooKeeper"

    def teardown(self) -> None:
        self.store.close()


class StoreModelTests(StoreSuite):
    """Random operations agree with the model, op for op and tree for tree."""

    #: Steps per run; examples come from --coordkit-examples (at least 60: it is one test).
    steps = 25

    def test_store_behaves_like_the_model(
        self, store_backend: StoreBackend, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        machine = type("BoundStoreMachine", (StoreMachine,), {"backend": store_backend})
        run_state_machine_as_test(
            machine,
            settings=hypothesis.settings(
                coordkit_hypothesis_settings,
                max_examples=max(60, coordkit_hypothesis_settings.max_examples),
                stateful_step_count=self.steps,
                suppress_health_check=list(hypothesis.HealthCheck),
            ),
        )
