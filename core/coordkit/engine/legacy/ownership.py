"""Claiming and releasing ``/consumers/G/owners/T/P`` (Kafka's ``reflectPartitionOwnershipDecision``
and ``releasePartitionOwnership``).

A claim creates one ephemeral owner node per assigned partition, holding the owning thread id. The
creates are independent (as Kafka's were) but sent pipelined in one round trip. If any node already
exists — its previous owner has not released it yet — every node this attempt created is deleted
again and the attempt fails; the rebalancer retries the whole rebalance after a backoff. A node
that exists already in this very session with this thread's id is this consumer's own (a create
whose reply was lost): it is taken as claimed, as Kafka's ``createEphemeralPathExpectConflict`` did
(which compared only the data).

Ownership is tied to the session that created the nodes. Once the store's session is another one,
the nodes went with the old session and may belong to another consumer by now: they are forgotten
(recorded as ``session-lost``), never deleted (Kafka's ``resetState`` on a new session). Kafka
deleted owner nodes by path; here every delete is a multi guarded by a check of the consumer's own
registration ``/consumers/G/ids/C``, an ephemeral of the same session, which ends with it in the
same transaction and is re-created only after the old session's claims were forgotten. So a delete
that reaches the store after the client has moved to a new session deletes nothing, rather than
another consumer's node.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

import attrs

from coordkit.engine.legacy.history import SESSION_LOST, OwnershipChange, OwnershipHistory
from coordkit.engine.legacy.registration import ConsumerThreadId
from coordkit.errors import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    StoreError,
)
from coordkit.kafka import layout
from coordkit.kafka.model import TopicPartition
from coordkit.store import ANY_VERSION, Check, Create, Delete, MetadataStore, paths
from coordkit.support.clock import Clock

log = logging.getLogger("coordkit.engine.legacy")


@attrs.frozen
class ClaimOutcome:
    """What one claim attempt achieved.

    :param claimed: partitions now owned (all of them, or none after a conflict).
    :param conflicts: partitions whose owner node another thread still held.
    """

    claimed: tuple[TopicPartition, ...]
    conflicts: tuple[TopicPartition, ...]

    @property
    def succeeded(self) -> bool:
        return not self.conflicts


class OwnershipClaims:
    """The owner nodes one consumer holds in its current session, with every change recorded in
    ``history``."""

    def __init__(
        self,
        store: MetadataStore,
        group_id: str,
        consumer_id: str,
        history: OwnershipHistory,
        clock: Clock,
    ):
        self.store = store
        self.group_id = group_id
        self.consumer_id = consumer_id
        self.history = history
        self.clock = clock
        self._registration = layout.consumer_registration_path(group_id, consumer_id)
        self._lock = threading.Lock()
        self._owned: dict[TopicPartition, ConsumerThreadId] = {}
        self._session: int | None = None  # the session whose ephemerals the owned nodes are
        self._abandoned = False

    def owned(self) -> dict[TopicPartition, ConsumerThreadId]:
        with self._lock:
            return dict(self._owned)

    @property
    def session(self) -> int | None:
        """The session that created the owned nodes (None before the first claim)."""
        return self._session

    def _path(self, tp: TopicPartition) -> str:
        return layout.consumer_owner_path(self.group_id, tp.topic, tp.partition)

    def _record(
        self,
        owned: Mapping[TopicPartition, ConsumerThreadId],
        change: OwnershipChange,
        reason: str,
    ) -> range:
        return self.history.record(
            self.clock.monotonic(),
            self.group_id,
            ((tp, str(thread)) for tp, thread in sorted(owned.items())),
            self.consumer_id,
            change,
            reason,
        )

    # -- sessions
    def forget_ended(self, reason: str = SESSION_LOST) -> bool:
        """Forget the owned nodes if the session that created them is over (the store's session is
        another one): they went with it. Returns whether anything was forgotten."""
        with self._lock:
            return self._forget_unless(self.store.session_id, reason)

    def _forget_unless(self, session: int, reason: str = SESSION_LOST) -> bool:
        """(Lock held.) Forget the owned nodes unless ``session`` created them; from now on the
        claims are ``session``'s."""
        forgotten = self._session != session and bool(self._owned)
        if forgotten:
            owned, self._owned = self._owned, {}
            self._record(owned, OwnershipChange.RELEASED, reason)
            log.info(
                "consumer %s: session %#x ended; forgot its %d owner node(s)",
                self.consumer_id,
                self._session or 0,
                len(owned),
            )
        self._session = session
        return forgotten

    # -- claiming
    def claim(self, decisions: Mapping[TopicPartition, ConsumerThreadId]) -> ClaimOutcome:
        """Create the owner node of every decided partition, or (on a conflict) none.

        :raises StoreError: the store failed; whatever this call created was deleted again (or,
            if that failed too, is kept to be released by the next :meth:`release_all`).
        :raises SessionExpiredError: the session changed during the claim; the nodes created in
            the new session are kept (the next :meth:`release_all` deletes them).
        """
        with self._lock:
            if self._abandoned:
                raise StoreError(f"consumer {self.consumer_id!r} has stopped; no claims")
            session = self.store.session_id
            self._forget_unless(session)
            created: dict[TopicPartition, ConsumerThreadId] = {}
            conflicts: list[TopicPartition] = []
            pending = dict(sorted(decisions.items()))
            try:
                for _ in range(2):  # a second pass after creating missing /owners/T parents
                    missing_parent = self._create(pending, created, conflicts)
                    if not missing_parent:
                        break
                    for topic in sorted({tp.topic for tp in missing_parent}):
                        self.store.ensure_path(layout.consumer_owners_path(self.group_id, topic))
                    pending = {tp: decisions[tp] for tp in missing_parent}
                else:
                    raise NoNodeError(
                        "owner parents keep disappearing",
                        path=paths.parent(self._path(next(iter(pending)))),
                    )
                if conflicts and self.store.session_id == session:
                    self._take_own(conflicts, decisions, session, created)
            except StoreError:
                if self.store.session_id == session:
                    self._rollback(created)
                    raise
            if self.store.session_id != session:
                self._straddled(created, session)
            if conflicts:
                self._rollback(created)
                return ClaimOutcome((), tuple(sorted(conflicts)))
            self._owned.update(created)
            return ClaimOutcome(tuple(sorted(created)), ())

    def _create(
        self,
        pending: Mapping[TopicPartition, ConsumerThreadId],
        created: dict[TopicPartition, ConsumerThreadId],
        conflicts: list[TopicPartition],
    ) -> list[TopicPartition]:
        """One pipelined round of creates; returns the partitions whose parent was missing."""
        partitions = list(pending)
        ops = [
            Create(self._path(tp), str(pending[tp]).encode(), ephemeral=True) for tp in partitions
        ]
        results = self.store.apply(ops)
        now_owned = {
            tp: pending[tp]
            for tp, result in zip(partitions, results, strict=True)
            if not isinstance(result, BaseException)
        }
        created.update(now_owned)
        self._record(now_owned, OwnershipChange.CLAIMED, "rebalance")
        missing_parent: list[TopicPartition] = []
        failure: StoreError | None = None
        for tp, result in zip(partitions, results, strict=True):
            if isinstance(result, NodeExistsError):
                conflicts.append(tp)
            elif isinstance(result, NoNodeError):
                missing_parent.append(tp)
            elif isinstance(result, StoreError):
                failure = failure or result
        if failure is not None:
            raise failure
        return missing_parent

    def _take_own(
        self,
        conflicts: list[TopicPartition],
        decisions: Mapping[TopicPartition, ConsumerThreadId],
        session: int,
        created: dict[TopicPartition, ConsumerThreadId],
    ) -> None:
        """Of the nodes found existing, take those this session already holds for the decided
        thread (an earlier create whose reply was lost) as claimed."""
        taken = {
            tp: decisions[tp]
            for tp, data in self._held_by(conflicts, session).items()
            if data == str(decisions[tp]).encode()
        }
        self._record(taken, OwnershipChange.CLAIMED, "rebalance")
        created.update(taken)
        conflicts[:] = [tp for tp in conflicts if tp not in taken]

    def _straddled(self, created: dict[TopicPartition, ConsumerThreadId], session: int) -> None:
        """The session changed while claiming: creates sent in the old session went with it; those
        sent in the new one exist, and are kept to be released in it. Raises."""
        now = self.store.session_id
        try:
            held = self._held_by(list(created), now)
        except StoreError:
            # Unknown which session holds them: forgotten, never deleted by path (a claim of
            # this consumer in the new session takes its own ones back).
            held = {}
        self._forget_unless(now)
        kept = {tp: thread for tp, thread in created.items() if tp in held}
        self._owned.update(kept)
        self._record(
            {tp: t for tp, t in created.items() if tp not in kept},
            OwnershipChange.RELEASED,
            SESSION_LOST,
        )
        raise SessionExpiredError(
            f"consumer {self.consumer_id!r}: session {session:#x} ended while claiming owner nodes"
        )

    def _held_by(self, tps: Sequence[TopicPartition], session: int) -> dict[TopicPartition, bytes]:
        """The data of those of ``tps``' owner nodes that are ephemerals of ``session``."""
        if not tps:
            return {}
        results = self.store.get_many([self._path(tp) for tp in tps])
        return {
            tp: result[0]
            for tp, result in zip(tps, results, strict=True)
            if not isinstance(result, BaseException) and result[1].ephemeral_owner == session
        }

    # -- releasing
    def _rollback(self, created: Mapping[TopicPartition, ConsumerThreadId]) -> None:
        try:
            self._delete(created, "conflict-rollback")
        except StoreError as exc:  # kept in _owned: the next release_all deletes them
            log.info("consumer %s: rollback of a claim failed: %s", self.consumer_id, exc)

    def _delete(self, owned: Mapping[TopicPartition, ConsumerThreadId], reason: str) -> None:
        """(Lock held.) Delete ``owned`` (nodes of the claims' session) while that session lives.

        :raises StoreError: the store failed; ``owned`` is kept in the claims (recorded released
            already: a second release record is harmless) for the next release to try again.
        """
        if not owned:
            return
        # Recorded before the delete is sent, so a recorded interval never outlives the node.
        recorded = self._record(owned, OwnershipChange.RELEASED, reason)
        try:
            ended = self._delete_guarded(sorted(owned))
        except SessionExpiredError:
            ended = True
        except StoreError:
            self._owned.update(owned)
            raise
        if ended:  # refused: the nodes had gone with the session, before this release
            self.history.relabel(recorded, SESSION_LOST)

    def _delete_guarded(self, pending: list[TopicPartition]) -> bool:
        """Delete the owner nodes of ``pending`` in one multi that first checks the registration
        exists (see the module docstring); nodes already gone are left out. Returns whether the
        claims' session turned out to have ended (nothing was deleted)."""
        guard = Check(self._registration, ANY_VERSION)
        while pending:
            try:
                self.store.commit([guard, *(Delete(self._path(tp)) for tp in pending)])
                return False
            except NoNodeError as exc:
                if exc.op_index is None:
                    raise
                if exc.op_index == 0:
                    return self._delete_unregistered(pending)
                del pending[exc.op_index - 1]  # already gone: delete the others
        return False

    def _delete_unregistered(self, pending: list[TopicPartition]) -> bool:
        """The registration is gone: the session ended (its nodes with it), or someone deleted the
        registration. Delete only what the claims' session still holds, at the version read.
        Returns whether the session had ended."""
        session = self._session
        if session is None or self.store.session_id != session:
            return True
        results = self.store.get_many([self._path(tp) for tp in pending])
        if self.store.session_id != session:
            return True
        ours = [
            Delete(self._path(tp), result[1].version)
            for tp, result in zip(pending, results, strict=True)
            if not isinstance(result, BaseException) and result[1].ephemeral_owner == session
        ]
        if not ours:
            return False
        log.warning(
            "consumer %s: %s is gone while session %#x lives; releasing its owner nodes",
            self.consumer_id,
            self._registration,
            session,
        )
        for result in self.store.apply(ours):
            if isinstance(result, StoreError) and not isinstance(
                result, NoNodeError | BadVersionError
            ):
                raise result
        return False

    def release_all(self, reason: str = "rebalance") -> None:
        """Delete every owner node held (Kafka's ``releasePartitionOwnership``); the nodes of a
        session that ended are forgotten instead."""
        with self._lock:
            if self._forget_unless(self.store.session_id):
                return
            owned, self._owned = self._owned, {}
            self._delete(owned, reason)

    def abandon(self, reason: str) -> None:
        """Refuse further claims and record the release of everything held; the caller then ends
        the session, which deletes the nodes (graceful close and crash alike)."""
        with self._lock:
            self._abandoned = True
            owned, self._owned = self._owned, {}
            self._record(owned, OwnershipChange.RELEASED, reason)
