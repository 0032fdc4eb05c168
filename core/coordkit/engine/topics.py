"""Topic administration as Kafka's ``AdminZkClient`` did it: writes the store, the controller acts.

* create: ``/config/topics/T`` and ``/brokers/topics/T`` (replica assignment by Kafka's placement
  over the registered brokers) in one multi; the controller then creates the partition states.
* add partitions: rewrite ``/brokers/topics/T`` at its version with the new partitions placed as
  Kafka's ``addPartitions`` does; the controller initialises them.
* delete: create ``/admin/delete_topics/T``; the controller deletes the topic's nodes.
* config: ``/config/topics/T``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping, Sequence

import attrs

from coordkit.engine.cluster_id import new_kafka_uuid
from coordkit.engine.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    TopicExistsError,
    UnknownTopicError,
)
from coordkit.engine.states import TP
from coordkit.engine.strategies import Strategies
from coordkit.errors import BadVersionError, LayoutError, NodeExistsError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.layout import (
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    decode_reassignment,
    encode_preferred_election,
    encode_reassignment,
)
from coordkit.kafka.model import TopicAssignment, TopicConfig, validate_topic_name
from coordkit.store import Create, Delete, MetadataStore, SetData
from coordkit.store.paths import numeric_name
from coordkit.strategies.placement import BrokerMetadata, ReplicaPlacement

log = logging.getLogger("coordkit.engine.topics")

#: Kafka's own placement: rack-aware when every broker has a rack, else rack-unaware.
DEFAULT_PLACEMENT = "kafka-rack-aware"
#: How long Kafka's brokers keep a config change notification (``changeExpirationMs``).
CONFIG_CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class TopicAdmin:
    """Topic administration on a store session (any session; it need not be a broker's).

    :param rng: source of Kafka's random placement start index (seed it for reproducible runs).
    :param placement: the replica placement strategy for new topics and partition increases.
    """

    def __init__(
        self,
        store: MetadataStore,
        *,
        rng: random.Random | None = None,
        placement: ReplicaPlacement | None = None,
    ):
        self.store = store
        self.rng = rng or random.Random()
        self._placement = placement

    @property
    def placement(self) -> ReplicaPlacement:
        """The placement given, else Kafka's own (``kafka-rack-aware``) from the plugins,
        looked up when first needed (deleting or reassigning places nothing)."""
        if self._placement is None:
            self._placement = Strategies.from_plugins(placement=DEFAULT_PLACEMENT).placement
        return self._placement

    # -- reading -------------------------------------------------------------------------------

    def brokers(self) -> list[BrokerMetadata]:
        """Registered brokers with their racks, sorted by id (what placement uses)."""
        ids = sorted(
            b for c in self.store.children(layout.BROKER_IDS) if (b := numeric_name(c)) is not None
        )
        paths = [layout.broker_path(b) for b in ids]
        out = []
        for broker, path, result in zip(ids, paths, self.store.get_many(paths), strict=True):
            if isinstance(result, StoreError):
                continue
            try:
                info = layout.BROKER.decode(result[0], path)
            except LayoutError as exc:
                log.warning("placing replicas without %s: %s", path, exc.detail)
                continue
            out.append(BrokerMetadata(broker, info.rack))
        return out

    def topics(self) -> list[str]:
        try:
            return sorted(self.store.children(layout.BROKER_TOPICS))
        except NoNodeError:
            return []

    def assignment(self, topic: str) -> TopicAssignment:
        path = layout.topic_path(topic)
        try:
            data, _ = self.store.get(path)
        except NoNodeError:
            raise UnknownTopicError(f"topic {topic!r} does not exist ({path})") from None
        return layout.TOPIC.decode(data, path)

    def config(self, topic: str) -> dict[str, str]:
        path = layout.topic_config_path(topic)
        try:
            data, _ = self.store.get(path)
        except NoNodeError:
            return {}
        return dict(layout.TOPIC_CONFIG.decode(data, path).config)

    # -- writing -------------------------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        *,
        config: Mapping[str, str] | None = None,
        assignment: Mapping[int, Sequence[int]] | None = None,
        if_not_exists: bool = False,
    ) -> TopicAssignment:
        """Create ``topic``; returns its replica assignment.

        :param assignment: explicit replica lists (partition → brokers); placement otherwise.
        :param if_not_exists: an existing topic is not an error (``kafka-topics.sh
            --if-not-exists``): its assignment is returned as it is, whatever was asked.
        :raises TopicExistsError: the topic exists (or is still being deleted).
        """
        if if_not_exists and self.store.exists(layout.topic_path(topic)) is not None:
            return self.assignment(topic)
        try:
            validate_topic_name(topic)
        except ValueError as exc:
            raise LayoutError(f"{layout.BROKER_TOPICS}/{topic}", str(exc), field="topic") from None
        if assignment is None:
            placed = self.placement.place(
                self.brokers(), partitions, replication_factor, rng=self.rng, topic=topic
            )
        else:
            placed = {int(p): list(r) for p, r in assignment.items()}
            self._check_manual(topic, placed)
        # Kafka 2.8+'s AdminZkClient: version 3, with a new topic id.
        topic_assignment = TopicAssignment(partitions=placed, version=3, topic_id=new_kafka_uuid())
        ops = [
            Create(
                layout.topic_config_path(topic),
                layout.TOPIC_CONFIG.encode(TopicConfig(config=dict(config or {}))),
            ),
            Create(layout.topic_path(topic), layout.TOPIC.encode(topic_assignment)),
        ]
        try:
            self.store.commit(ops)
        except NodeExistsError as exc:
            raise TopicExistsError(
                f"topic {topic!r} already exists ({exc.path})"
                + (" or is still being deleted" if self._marked_for_deletion(topic) else "")
            ) from None
        except NoNodeError:
            # First topic of a fresh store: create the roots, then once more.
            self.store.ensure_path(layout.CONFIG_TOPICS)
            self.store.ensure_path(layout.BROKER_TOPICS)
            try:
                self.store.commit(ops)
            except NodeExistsError as exc:
                raise TopicExistsError(f"topic {topic!r} already exists ({exc.path})") from None
        return topic_assignment

    def _check_manual(self, topic: str, placed: Mapping[int, Sequence[int]]) -> None:
        sizes = {len(r) for r in placed.values()}
        if len(sizes) > 1:
            raise InvalidReplicaAssignmentError(
                f"topic {topic!r}: partitions have different replication factors {sorted(sizes)}"
            )

    def _marked_for_deletion(self, topic: str) -> bool:
        return self.store.exists(layout.delete_topic_path(topic)) is not None

    def add_partitions(
        self,
        topic: str,
        total: int,
        *,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> TopicAssignment:
        """Increase ``topic`` to ``total`` partitions (Kafka's ``addPartitions``), placed by the
        placement strategy given the topic's existing partitions."""
        path = layout.topic_path(topic)
        for _ in range(10):
            try:
                data, stat = self.store.get(path)
            except NoNodeError:
                raise UnknownTopicError(f"topic {topic!r} does not exist ({path})") from None
            existing = layout.TOPIC.decode(data, path)
            count = existing.partition_count
            if existing.adding or existing.removing:
                moving = sorted({*existing.adding, *existing.removing})
                raise InvalidPartitionsError(
                    f"topic {topic!r}: partitions {moving} are being reassigned; add partitions "
                    "once the reassignment completes"
                )
            if total <= count:
                raise InvalidPartitionsError(
                    f"topic {topic!r} has {count} partitions; the number of partitions can only "
                    f"be increased, got {total}"
                )
            first_replicas = existing.partitions[0]
            if assignment is None:
                added = self.placement.place(
                    self.brokers(),
                    total - count,
                    len(first_replicas),
                    existing=existing.partitions,
                    rng=self.rng,
                    topic=topic,
                )
            else:
                added = {int(p): list(r) for p, r in assignment.items()}
                wrong = sorted(p for p, r in added.items() if len(r) != len(first_replicas))
                if wrong:
                    raise InvalidReplicaAssignmentError(
                        f"topic {topic!r}: partitions {wrong} do not have the topic's replication "
                        f"factor {len(first_replicas)}"
                    )
            merged = {**existing.partitions, **{p: tuple(r) for p, r in added.items()}}
            updated = attrs.evolve(existing, partitions=merged, version=max(existing.version, 3))
            try:
                self.store.commit([SetData(path, layout.TOPIC.encode(updated), stat.version)])
            except BadVersionError:
                continue
            return updated
        raise InvalidPartitionsError(f"topic {topic!r}: assignment kept changing; try again")

    def delete_topic(self, topic: str) -> None:
        """Queue ``topic`` for deletion (the controller deletes it)."""
        path = layout.topic_path(topic)
        if self.store.exists(path) is None:
            raise UnknownTopicError(f"topic {topic!r} does not exist ({path})")
        try:
            self.store.create(layout.delete_topic_path(topic), b"", make_parents=True)
        except NodeExistsError:
            pass  # already queued

    # -- reassignment and preferred leaders (Kafka's kafka-reassign-partitions.sh and
    # kafka-preferred-replica-election.sh, ZooKeeper mode) -------------------------------------

    def reassign_partitions(self, plan: Mapping[TP, Sequence[int]]) -> None:
        """Ask the controller to move replicas: write ``/admin/reassign_partitions``.

        Refused, with nothing written, when a partition is unknown, a replica list is empty,
        repeats a broker or names an unregistered broker, or a reassignment is already running.

        :raises InvalidReplicaAssignmentError: the plan is invalid (the message names the entry).
        """
        if not plan:
            raise InvalidReplicaAssignmentError("the reassignment plan is empty")
        registered = {b.id for b in self.brokers()}
        topics = {tp[0] for tp in plan}
        counts = {t: self.assignment(t).partition_count for t in sorted(topics)}
        for (topic, partition), replicas in sorted(plan.items()):
            where = f"{topic}-{partition}"
            if not 0 <= partition < counts[topic]:
                raise InvalidReplicaAssignmentError(
                    f"{where}: topic {topic!r} has partitions 0..{counts[topic] - 1}"
                )
            if not replicas:
                raise InvalidReplicaAssignmentError(f"{where}: the replica list is empty")
            if len(set(replicas)) != len(replicas):
                raise InvalidReplicaAssignmentError(
                    f"{where}: replicas {list(replicas)} repeat a broker"
                )
            unknown = sorted(set(replicas) - registered)
            if unknown:
                raise InvalidReplicaAssignmentError(
                    f"{where}: brokers {unknown} are not registered under {layout.BROKER_IDS} "
                    f"(registered: {sorted(registered)})"
                )
        try:
            self.store.create(REASSIGN_PARTITIONS, encode_reassignment(plan), make_parents=True)
        except NodeExistsError:
            raise InvalidReplicaAssignmentError(
                f"a reassignment is already running ({REASSIGN_PARTITIONS} exists); wait for it "
                "or verify it"
            ) from None

    def reassignment_status(self, plan: Mapping[TP, Sequence[int]]) -> dict[TP, str]:
        """Per partition of ``plan``: ``completed``, ``in progress`` or ``failed`` (neither
        requested any more nor at its target), as ``--verify`` reports them."""
        try:
            data, _ = self.store.get(REASSIGN_PARTITIONS)
            running = set(decode_reassignment(data))
        except NoNodeError:
            running = set()
        out: dict[TP, str] = {}
        for tp, replicas in sorted(plan.items()):
            try:
                assignment = self.assignment(tp[0])
            except UnknownTopicError:
                out[tp] = "failed"
                continue
            current = assignment.partitions.get(tp[1])
            if tp in running or tp[1] in assignment.adding or tp[1] in assignment.removing:
                out[tp] = "in progress"
            elif current == tuple(replicas):
                out[tp] = "completed"
            else:
                out[tp] = "failed"
        return out

    def elect_preferred_leaders(self, partitions: Sequence[TP]) -> None:
        """Ask the controller for a preferred-replica election of ``partitions``."""
        try:
            self.store.create(
                PREFERRED_REPLICA_ELECTION, encode_preferred_election(partitions), make_parents=True
            )
        except NodeExistsError:
            raise InvalidReplicaAssignmentError(
                f"a preferred replica election is already running ({PREFERRED_REPLICA_ELECTION})"
            ) from None

    def set_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace ``topic``'s config overrides in ``/config/topics/T``, then announce the change
        as Kafka's ``AdminZkClient`` does: a sequential ``/config/changes/config_change_N``
        naming ``topics/T``, from which Kafka's brokers learn that a config changed."""
        if self.store.exists(layout.topic_path(topic)) is None:
            raise UnknownTopicError(f"topic {topic!r} does not exist ({layout.topic_path(topic)})")
        data = layout.TOPIC_CONFIG.encode(TopicConfig(config=dict(config)))
        path = layout.topic_config_path(topic)
        try:
            self.store.set(path, data)
        except NoNodeError:
            self.store.create(path, data, make_parents=True)
        self.purge_config_changes()
        self.store.create(
            layout.CONFIG_CHANGE_PREFIX,
            layout.encode_config_change(f"topics/{topic}"),
            sequential=True,
            make_parents=True,
        )

    def purge_config_changes(self) -> None:
        """Delete the change notifications older than Kafka's brokers keep them (15 minutes):
        they purge them as they apply them, which coordkit's brokers need not do."""
        try:
            names = self.store.children(layout.CONFIG_CHANGES)
        except NoNodeError:
            return
        paths = [f"{layout.CONFIG_CHANGES}/{name}" for name in names]
        cutoff = time.time() * 1000 - CONFIG_CHANGE_EXPIRATION_MS
        expired = [
            Delete(path, result[1].version)
            for path, result in zip(paths, self.store.get_many(paths), strict=True)
            if not isinstance(result, StoreError) and result[1].ctime < cutoff
        ]
        for outcome in self.store.apply(expired) if expired else ():
            if isinstance(outcome, StoreError) and not isinstance(outcome, NoNodeError):
                log.info("config change notification left in place: %s", outcome)
