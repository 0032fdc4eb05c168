"""Claiming and releasing ``/consumers/G/owners/T/P`` (Kafka's ``reflectPartitionOwnershipDecision``
and ``releasePartitionOwnership``).

A claim creates one ephemeral owner node per assigned partition, holding the owning thread id. The
creates are independent (as Kafka's were) but sent pipelined in one round trip. If any node already
exists — its previous owner has not released it yet — every node this attempt created is deleted
again and the attempt fails; the rebalancer retries the whole rebalance after a backoff.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import attrs

from coordkit import layout, paths
from coordkit.clock import Clock
from coordkit.engine.legacy.history import OwnershipChange, OwnershipHistory
from coordkit.engine.legacy.registration import ConsumerThreadId
from coordkit.errors import NodeExistsError, NoNodeError, StoreError
from coordkit.model import TopicPartition
from coordkit.store import Create, Delete, MetadataStore


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
    """The owner nodes one consumer holds, with every change recorded in ``history``."""

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
        self._lock = threading.Lock()
        self._owned: dict[TopicPartition, ConsumerThreadId] = {}
        self._abandoned = False

    def owned(self) -> dict[TopicPartition, ConsumerThreadId]:
        with self._lock:
            return dict(self._owned)

    def _path(self, tp: TopicPartition) -> str:
        return layout.consumer_owner_path(self.group_id, tp.topic, tp.partition)

    def _record(
        self,
        owned: Mapping[TopicPartition, ConsumerThreadId],
        change: OwnershipChange,
        reason: str,
    ) -> None:
        self.history.record(
            self.clock.monotonic(),
            self.group_id,
            ((tp, str(thread)) for tp, thread in sorted(owned.items())),
            self.consumer_id,
            change,
            reason,
        )

    def claim(self, decisions: Mapping[TopicPartition, ConsumerThreadId]) -> ClaimOutcome:
        """Create the owner node of every decided partition, or (on a conflict) none.

        :raises StoreError: the store failed; whatever this call created was deleted again.
        """
        with self._lock:
            if self._abandoned:
                raise StoreError(f"consumer {self.consumer_id!r} has stopped; no claims")
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
            except StoreError:
                self._delete(created, "conflict-rollback")
                raise
            if conflicts:
                self._delete(created, "conflict-rollback")
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

    def _delete(self, owned: Mapping[TopicPartition, ConsumerThreadId], reason: str) -> None:
        if not owned:
            return
        # Recorded before the delete is sent, so a recorded interval never outlives the node.
        self._record(owned, OwnershipChange.RELEASED, reason)
        results = self.store.apply([Delete(self._path(tp)) for tp in sorted(owned)])
        for result in results:
            if isinstance(result, StoreError) and not isinstance(result, NoNodeError):
                raise result

    def release_all(self, reason: str = "rebalance") -> None:
        """Delete every owner node held (Kafka's ``releasePartitionOwnership``)."""
        with self._lock:
            owned, self._owned = self._owned, {}
            self._delete(owned, reason)

    def forget(self, reason: str) -> None:
        """The nodes are gone already (the session that held them ended): record it, drop them."""
        with self._lock:
            owned, self._owned = self._owned, {}
            self._record(owned, OwnershipChange.RELEASED, reason)

    def abandon(self, reason: str) -> None:
        """Refuse further claims and record the release of everything held; the caller then ends
        the session, which deletes the nodes (graceful close and crash alike)."""
        with self._lock:
            self._abandoned = True
            owned, self._owned = self._owned, {}
            self._record(owned, OwnershipChange.RELEASED, reason)
