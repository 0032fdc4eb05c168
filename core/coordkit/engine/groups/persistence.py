"""A coordinator's durable writes: group metadata and committed offsets, with their fencing.

Group metadata (``/coordkit/groups/G``, :mod:`~coordkit.engine.groups.metadata`) is written on
every completed sync and loaded lazily on first use, so a new coordinator resumes the generation.
Offsets go through the configured :class:`~coordkit.strategies.offsets.OffsetStorage` on the broker's session.

Every write is a multi that first checks the version of the offsets partition's state node this
broker took the partition over at: a broker that lost the partition cannot overwrite the new
coordinator's writes (as a deposed leader cannot append to the log in Kafka). A failed fence whose
partition this broker still leads (an ISR change moved the version) is retried with the new one;
otherwise the answer is NOT_COORDINATOR and nothing was written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from coordkit.engine import states
from coordkit.engine.config import EngineConfig
from coordkit.engine.groups import metadata
from coordkit.engine.groups.hosting import HostedGroup, PartitionHosting
from coordkit.engine.groups.membership import Group
from coordkit.engine.groups.modern import records
from coordkit.engine.groups.modern.persistence import load_consumer_group
from coordkit.engine.groups.protocol import ErrorCode
from coordkit.engine.share_groups import records as share_records
from coordkit.engine.share_groups.records import load_share_group
from coordkit.errors import BadVersionError, LayoutError, NodeExistsError, NoNodeError, StoreError
from coordkit.kafka.coordinators import OFFSETS_TOPIC
from coordkit.kafka.model import TopicPartition
from coordkit.store import Check, Create, MetadataStore, Op, SetData
from coordkit.strategies.offsets import OffsetAndMetadata, OffsetStorage, OffsetStorageFactory
from coordkit.support.clock import Clock

log = logging.getLogger("coordkit.engine.groups")


class GroupPersistence:
    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        config: EngineConfig,
        clock: Clock,
        hosting: PartitionHosting,
        offset_storage: OffsetStorageFactory,
    ):
        self.broker_id = broker_id
        self.store = store
        self.config = config
        self.clock = clock
        self.hosting = hosting
        self._offset_storage = offset_storage
        self._offsets: OffsetStorage | None = None

    # -- group metadata --------------------------------------------------------------------------

    def load(self, group_id: str, path: str, partition: int) -> HostedGroup | None:
        """The group as last persisted, or ``None`` (none stored, or unreadable: logged)."""
        try:
            data, _ = self.store.get(path)
        except NoNodeError:
            return None
        if share_records.is_share_group(data):
            try:
                share_group = load_share_group(
                    group_id, path, data, partition, self.clock.monotonic(),
                    self.config.share_group_session_timeout,
                )  # fmt: skip
            except LayoutError as exc:
                log.warning("broker %s: ignoring unreadable share group: %s", self.broker_id, exc)
                return None
            log.info("broker %s loaded share group %r (epoch %s, %s members)", self.broker_id,
                     group_id, share_group.group_epoch, len(share_group.members))  # fmt: skip
            return share_group
        if records.is_consumer_group(data):
            try:
                consumer_group = load_consumer_group(self.store, group_id, path, data, partition)
            except LayoutError as exc:
                log.warning("broker %s: ignoring unreadable consumer group: %s", self.broker_id,
                            exc)  # fmt: skip
                return None
            now = self.clock.monotonic()
            for member_id in consumer_group.members:
                # Kafka's coordinator schedules every loaded member's session anew.
                consumer_group.session_deadlines[member_id] = (
                    now + self.config.consumer_group_session_timeout
                )
            log.info("broker %s loaded consumer group %r (epoch %s, %s members)", self.broker_id,
                     group_id, consumer_group.group_epoch, len(consumer_group.members))  # fmt: skip
            return consumer_group
        try:
            persisted = metadata.decode(group_id, data, path)
        except LayoutError as exc:
            log.warning("broker %s: ignoring unreadable group metadata: %s", self.broker_id, exc)
            return None
        group = Group.from_metadata(persisted, partition, self.clock.monotonic())
        log.info(
            "broker %s loaded group %r (generation %s, %s members)",
            self.broker_id,
            group_id,
            group.generation,
            len(group.members),
        )
        return group

    def persist(self, group: Group) -> ErrorCode:
        """Write the group's metadata, fenced by the offsets partition's state version."""
        path = metadata.group_path(group.group_id)
        data = metadata.encode(group.to_metadata())
        create = False

        def attempt(fence: Check) -> bool:
            nonlocal create
            write: Op = Create(path, data) if create else SetData(path, data)
            try:
                self.store.commit([fence, write])
                return True
            except NoNodeError as exc:
                if exc.op_index != 1:
                    raise
                self.store.ensure_path(metadata.GROUPS_ROOT)
                create = True
            except NodeExistsError:
                create = False
            return False

        return self._fenced_write(
            group.partition, f"group {group.group_id!r}: metadata write", attempt, attempts=10
        )

    # -- offsets ---------------------------------------------------------------------------------

    @property
    def offset_storage(self) -> OffsetStorage:
        """The configured offset storage on this broker's session (created on first use)."""
        if self._offsets is None:
            factory = self._offset_storage
            if getattr(factory, "name", None) == "offsets-topic":
                # Records go to the group's coordinator partition: the same count it uses.
                partitions = self.hosting.offsets_partitions()
                self._offsets = factory(self.store, num_partitions=partitions)
            else:
                self._offsets = factory(self.store)
        return self._offsets

    def store_offsets(
        self, group: HostedGroup, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> ErrorCode:
        """Write the offsets fenced by the offsets partition's state version (as the group
        metadata), so a broker that has lost the partition cannot store them."""

        def attempt(fence: Check) -> bool:
            self.offset_storage.commit(group.group_id, offsets, fence=[fence])
            return True

        return self._fenced_write(
            group.partition, f"group {group.group_id!r}: offset commit", attempt, attempts=3
        )

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        """Committed offsets (raises :class:`StoreError` when the store cannot answer)."""
        return self.offset_storage.fetch(group_id, partitions)

    # -- the fence -------------------------------------------------------------------------------

    def fenced_write(
        self, partition: int, what: str, attempt: Callable[[Check], bool]
    ) -> ErrorCode:
        """:meth:`_fenced_write` for the consumer groups' writes."""
        return self._fenced_write(partition, what, attempt, attempts=10)

    def _fenced_write(
        self, partition: int, what: str, attempt: Callable[[Check], bool], *, attempts: int
    ) -> ErrorCode:
        """Run ``attempt(fence)`` until it reports done; ``fence`` checks the version of the
        offsets partition's state node this broker hosts. A failed fence (op 0) re-reads the state
        and goes on only while this broker still leads the partition (an ISR change moved the
        version); a broker that lost it answers NOT_COORDINATOR and has written nothing."""
        state_path = states.state_path((OFFSETS_TOPIC, partition))
        for _ in range(attempts):
            version = self.hosting.version(partition)
            if version is None:
                log.info("%s refused: broker %s no longer hosts %s-%d", what, self.broker_id,
                         OFFSETS_TOPIC, partition)  # fmt: skip
                return ErrorCode.NOT_COORDINATOR
            try:
                if attempt(Check(state_path, version)):
                    return ErrorCode.NONE
            except (BadVersionError, NoNodeError) as exc:
                if exc.op_index != 0:
                    log.warning("%s failed: %s", what, exc)
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE
                if not self.hosting.still_leader(partition):
                    log.info("%s fenced: broker %s no longer leads %s-%d", what, self.broker_id,
                             OFFSETS_TOPIC, partition)  # fmt: skip
                    return ErrorCode.NOT_COORDINATOR
            except StoreError as exc:
                log.warning("%s failed: %s", what, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
        log.warning("%s failed: the fence of %s-%d moved %d times in a row", what, OFFSETS_TOPIC,
                    partition, attempts)  # fmt: skip
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
