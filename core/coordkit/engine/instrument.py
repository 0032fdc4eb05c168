"""A store proxy that counts operations and reports committed multis.

Benchmarks and the lab compare strategies by the store work they cause (a controller election
strategy that wakes every broker on failover costs more round trips than one that wakes one), and
the history checks audit what actually reached the store. :class:`InstrumentedStore` wraps any
:class:`~coordkit.store.MetadataStore` without changing its behaviour.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from coordkit.store import (
    ANY_VERSION,
    Check,
    ChildrenCallback,
    ChildrenEvent,
    DataCallback,
    DataEvent,
    MetadataStore,
    Op,
    SessionListener,
    SessionState,
    Stat,
    StatColumns,
    StoreError,
    TreeCallback,
    TreeEvent,
    TreeWatch,
    Watch,
    set_many_ops,
)

#: Called after a successful :meth:`MetadataStore.commit` with the ops and their results.
CommitObserver = Callable[[Sequence[Op], Sequence[Any]], None]


@attrs.frozen
class OpCounts:
    """Store work, counted per call (round trips) and per operation.

    :param round_trips: calls that reach the server (a ``get_many``, ``apply`` or ``commit`` is one;
        so is each watch delivery, for which the store re-read the watched node).
    :param reads: nodes read (``get``, ``exists``, ``children``, each path of ``get_many``, each
        watch delivery).
    :param writes: write operations (each op of a multi, including its checks).
    :param multis: ``commit`` calls (atomic multi-ops).
    :param failed_multis: ``commit`` calls the store rejected.
    :param watches: watches registered.
    :param watch_events: watch callbacks delivered.
    """

    round_trips: int = 0
    reads: int = 0
    writes: int = 0
    multis: int = 0
    failed_multis: int = 0
    watches: int = 0
    watch_events: int = 0

    def __add__(self, other: OpCounts) -> OpCounts:
        return OpCounts(
            *(a + b for a, b in zip(attrs.astuple(self), attrs.astuple(other), strict=False))
        )

    def __sub__(self, other: OpCounts) -> OpCounts:
        return OpCounts(
            *(a - b for a, b in zip(attrs.astuple(self), attrs.astuple(other), strict=False))
        )

    @property
    def operations(self) -> int:
        """Reads plus writes: every node touched."""
        return self.reads + self.writes

    def as_dict(self) -> dict[str, int]:
        return {**attrs.asdict(self), "operations": self.operations}


class _Counter:
    __slots__ = ("_lock", "values")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.values = [0] * len(attrs.fields(OpCounts))

    def add(self, index: int, amount: int = 1, trip: bool = False) -> None:
        with self._lock:
            self.values[index] += amount
            if trip:
                self.values[0] += 1

    def snapshot(self) -> OpCounts:
        with self._lock:
            return OpCounts(*self.values)


_TRIPS, _READS, _WRITES, _MULTIS, _FAILED, _WATCHES, _EVENTS = range(7)


class InstrumentedStore(MetadataStore):
    """Delegates everything to ``inner``, counting operations and reporting commits.

    :param inner: the real store client.
    :param label: names this client in reports (e.g. ``"broker-1"``).
    """

    def __init__(self, inner: MetadataStore, label: str = ""):
        self.inner = inner
        self.label = label
        self.url = inner.url
        self.characteristics = inner.characteristics
        self._counter = _Counter()
        self._observers: list[CommitObserver] = []

    # -- instrumentation
    @property
    def counts(self) -> OpCounts:
        return self._counter.snapshot()

    def add_commit_observer(self, observer: CommitObserver) -> None:
        self._observers.append(observer)

    # -- session
    @property
    def session_id(self) -> int:
        return self.inner.session_id

    @property
    def state(self) -> SessionState:
        return self.inner.state

    def add_listener(self, listener: SessionListener) -> None:
        self.inner.add_listener(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        self.inner.remove_listener(listener)

    def close(self) -> None:
        self.inner.close()

    # -- single operations
    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        self._counter.add(_WRITES, trip=True)
        return self.inner.create(
            path, data, ephemeral=ephemeral, sequential=sequential, make_parents=make_parents
        )

    def get(self, path: str) -> tuple[bytes, Stat]:
        self._counter.add(_READS, trip=True)
        return self.inner.get(path)

    def exists(self, path: str) -> Stat | None:
        self._counter.add(_READS, trip=True)
        return self.inner.exists(path)

    def children(self, path: str) -> list[str]:
        self._counter.add(_READS, trip=True)
        return self.inner.children(path)

    def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> Stat:
        self._counter.add(_WRITES, trip=True)
        return self.inner.set(path, data, version)

    def delete(self, path: str, version: int = ANY_VERSION, *, recursive: bool = False) -> None:
        self._counter.add(_WRITES, trip=True)
        self.inner.delete(path, version, recursive=recursive)

    # -- multi-operations
    def commit(self, ops: Sequence[Op]) -> list[Any]:
        self._counter.add(_WRITES, len(ops))
        self._counter.add(_MULTIS, trip=True)
        try:
            results = self.inner.commit(ops)
        except StoreError:
            self._counter.add(_FAILED)
            raise
        for observer in self._observers:
            observer(ops, results)
        return results

    def set_many(
        self,
        paths_: Sequence[str],
        data: Sequence[bytes],
        versions: Sequence[int],
        *,
        checks: Sequence[Check] = (),
    ) -> StatColumns:
        self._counter.add(_WRITES, len(checks) + len(paths_))
        self._counter.add(_MULTIS, trip=True)
        try:
            results = self.inner.set_many(paths_, data, versions, checks=checks)
        except StoreError:
            self._counter.add(_FAILED)
            raise
        if self._observers:  # told as a commit of the same ops (the history audits them)
            ops = set_many_ops(paths_, data, versions, checks)
            told: list[Any] = [None] * len(checks)
            told.extend(results)
            for observer in self._observers:
                observer(ops, told)
        return results

    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        self._counter.add(_READS, len(paths_), trip=True)
        return self.inner.get_many(paths_)

    def apply(self, ops: Sequence[Op]) -> list[Any]:
        self._counter.add(_WRITES, len(ops), trip=True)
        return self.inner.apply(ops)

    # -- watches
    def watch_data(self, path: str, callback: DataCallback) -> Watch:
        self._counter.add(_WATCHES, trip=True)

        def counted(event: DataEvent) -> Any:
            self._counter.add(_EVENTS)
            self._counter.add(_READS, trip=True)
            return callback(event)

        return self.inner.watch_data(path, counted)

    def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        self._counter.add(_WATCHES, trip=True)

        def counted(event: ChildrenEvent) -> Any:
            self._counter.add(_EVENTS)
            self._counter.add(_READS, trip=True)
            return callback(event)

        return self.inner.watch_children(path, counted)

    def watch_tree(
        self, path: str, callback: TreeCallback, *, since: int | None = None
    ) -> TreeWatch:
        self._counter.add(_WATCHES, trip=True)

        def counted(event: TreeEvent) -> Any:
            self._counter.add(_EVENTS)
            return callback(event)

        return self.inner.watch_tree(path, counted, since=since)

    def __repr__(self) -> str:
        return f"<InstrumentedStore {self.label} {self.inner!r}>"


def unwrap(store: MetadataStore) -> MetadataStore:
    """The real client under any number of :class:`InstrumentedStore` layers."""
    while isinstance(store, InstrumentedStore):
        store = store.inner
    return store
