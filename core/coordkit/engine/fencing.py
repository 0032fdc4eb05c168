"""Fenced controller writes: every multi starts with a check of ``/controller_epoch``'s version.

The version is the one the controller's own election multi left on the node, so as soon as another
broker wins an election (which sets the node again) every write of the old controller fails as a
whole, and the store stays unchanged. A failed check raises :class:`ControllerFencedError`; any
other failure keeps its store error type with ``op_index`` pointing at the caller's own op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coordkit.engine.errors import ControllerFencedError, ControllerSessionEndedError
from coordkit.errors import BadVersionError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.store import Check, MetadataStore, Op, StatColumns
from coordkit.strategies.elections import ControllerTerm


class FencedWriter:
    """Writes of one controller term.

    A term is bound to the session that won it: once that session is gone (the store client moved
    on to a new one) the term is over, whatever the epoch node says, and writes are refused
    locally before they reach the store.
    """

    def __init__(self, store: MetadataStore, term: ControllerTerm):
        self.store = store
        self.term = term
        self.session_id = store.session_id
        self._check = Check(layout.CONTROLLER_EPOCH, term.epoch_version)

    def commit(self, ops: Sequence[Op]) -> list[Any]:
        """Commit ``ops`` behind the epoch check; returns the results of ``ops`` only.

        :raises ControllerFencedError: the epoch moved on: this controller was deposed.
        :raises StoreError: an op of ``ops`` failed; ``op_index`` indexes ``ops``.
        """
        self._check_session()
        try:
            results = self.store.commit([self._check, *ops])
        except StoreError as exc:
            fenced = self._fenced(exc)
            if fenced is not None:
                raise fenced from exc
            _shift(exc)
            raise
        return results[1:]

    def set_many(
        self, paths: Sequence[str], data: Sequence[bytes], versions: Sequence[int]
    ) -> StatColumns:
        """:meth:`commit` of version-checked sets given as columns
        (:meth:`~coordkit.store.MetadataStore.set_many`); returns their new stats."""
        self._check_session()
        try:
            return self.store.set_many(paths, data, versions, checks=[self._check])
        except StoreError as exc:
            fenced = self._fenced(exc)
            if fenced is not None:
                raise fenced from exc
            _shift(exc)
            raise

    def _check_session(self) -> None:
        if self.store.session_id != self.session_id:
            raise ControllerSessionEndedError(
                f"controller {self.term.broker_id} of epoch {self.term.epoch}: the session that "
                f"won the term ({self.session_id:#x}) has ended"
            )

    def _fenced(self, exc: StoreError) -> ControllerFencedError | None:
        """The error to raise if ``exc`` is the epoch check failing (the first op)."""
        if isinstance(exc, BadVersionError | NoNodeError) and exc.op_index == 0:
            return ControllerFencedError(
                f"controller {self.term.broker_id} of epoch {self.term.epoch} is fenced: "
                f"{layout.CONTROLLER_EPOCH} is no longer at version {self.term.epoch_version}"
            )
        return None


def _shift(exc: StoreError) -> None:
    if exc.op_index is not None and exc.op_index > 0:
        exc.op_index -= 1
