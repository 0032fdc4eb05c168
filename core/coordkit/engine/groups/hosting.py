"""Which offsets partitions a broker's group coordinator hosts, and the groups loaded for them.

A group belongs to partition ``strategy.partition_for(group, n)`` of ``__consumer_offsets`` (``n``
the partition count the topic has, ``offsets.topic.num.partitions`` before it exists); the broker
leading that partition coordinates it. Hosting follows leadership the way Kafka's LeaderAndIsr
requests drive it: partition-state events (written or loaded by a controller) host a partition
when this broker leads it and unload it when leadership moves away. A request for a partition
that is not hosted reads the partition's state once, so a broker that led it before anything was
observed (a full restart) takes it over too.

Hosted partitions and the groups loaded for them share one lock: unloading a partition drops its
groups in the same step, so no lookup can hand out a group of a partition just unloaded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from coordkit.engine import states
from coordkit.engine.config import EngineConfig
from coordkit.engine.events import StateChange
from coordkit.engine.groups.membership import Group
from coordkit.engine.groups.modern.group import ConsumerGroup
from coordkit.engine.share_groups.group import ShareGroup
from coordkit.errors import LayoutError, StoreError
from coordkit.kafka.coordinators import (
    OFFSETS_TOPIC,
    GroupCoordinatorSelection,
    offsets_topic_partitions,
)
from coordkit.store import MetadataStore

log = logging.getLogger("coordkit.engine.groups")

#: A hosted group: classic, or of the consumer protocol (one group id, one kind, as in Kafka).
HostedGroup = Group | ConsumerGroup | ShareGroup


def offsets_partition_for(
    group_id: str, selection: GroupCoordinatorSelection, num_partitions: int
) -> int:
    """The offsets-topic partition of ``group_id`` under the coordinator strategy ``selection``,
    over ``num_partitions`` (the count the existing topic has, see
    :func:`~coordkit.kafka.coordinators.offsets_topic_partitions`, else ``offsets.topic.num.partitions``)."""
    return int(selection.partition_for(group_id, num_partitions))


class PartitionHosting:
    """The offsets partitions broker ``broker_id`` hosts (partition → state node version taken
    over at) and the groups loaded for them.

    :param is_closed: whether the coordinator has stopped (it then hosts nothing new).
    """

    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        config: EngineConfig,
        selection: GroupCoordinatorSelection,
        *,
        is_closed: Callable[[], bool],
    ):
        self.broker_id = broker_id
        self.store = store
        self.config = config
        self.selection = selection
        self._is_closed = is_closed
        self._lock = threading.Lock()
        self._hosted: dict[int, int] = {}
        self._seen: dict[int, tuple[int, int]] = {}  # partition → (leader epoch, version) seen
        self._groups: dict[str, HostedGroup] = {}
        self._lost: set[int] = set()  # partitions found lost while a group lock was held
        self._partition_count: int | None = None  # once the offsets topic exists

    # -- the partitioning ------------------------------------------------------------------------

    def offsets_partitions(self) -> int:
        """Partitions of the offsets topic: the count it has once it exists (read once, as
        Kafka's group metadata manager does), ``offsets.topic.num.partitions`` before."""
        if self._partition_count is not None:
            return self._partition_count
        try:
            count, exists = offsets_topic_partitions(
                self.store, self.config.offsets_topic_num_partitions
            )
        except StoreError:
            return self.config.offsets_topic_num_partitions
        if exists:
            self._partition_count = count
        return count

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self.selection, self.offsets_partitions())

    # -- leadership ------------------------------------------------------------------------------

    def observe(self, changes: Sequence[StateChange]) -> list[HostedGroup]:
        """Follow offsets-partition states; returns the groups of partitions unloaded."""
        dropped: list[HostedGroup] = []
        for change in changes:
            topic, partition = change.tp
            if topic != OFFSETS_TOPIC:
                continue
            current = change.current
            key = (current.leader_epoch, current.zk_version)
            with self._lock:
                if key <= self._seen.get(partition, (-1, -1)):
                    continue  # writes of one partition can arrive out of order across threads
                self._seen[partition] = key
            if current.leader == self.broker_id and not self._is_closed():
                self.host(partition, current.zk_version)
            else:
                dropped.extend(self.unload(partition))
        return dropped

    def forget_all(self) -> list[HostedGroup]:
        """The offsets topic was deleted (or the coordinator closes): unload everything."""
        with self._lock:
            partitions = list(self._hosted)
            self._seen.clear()
        return [group for p in partitions for group in self.unload(p)]

    def host(self, partition: int, version: int) -> None:
        with self._lock:
            new = partition not in self._hosted
            self._hosted[partition] = version
        if new:
            log.info("broker %s coordinates offsets partition %s", self.broker_id, partition)

    def unload(self, partition: int) -> list[HostedGroup]:
        """Stop hosting ``partition``; returns its groups, dropped (the caller fails them)."""
        with self._lock:
            if self._hosted.pop(partition, None) is None:
                return []
            groups = [g for g in self._groups.values() if g.partition == partition]
            for group in groups:
                del self._groups[group.group_id]
        log.info("broker %s no longer coordinates offsets partition %s", self.broker_id, partition)
        return groups

    def hosts(self, partition: int) -> bool:
        """Whether ``partition`` is hosted here, catching up with the store when it is not: this
        broker may have led it since before anything was observed (a restart into a leadership
        nobody moved)."""
        with self._lock:
            if partition in self._hosted:
                return True
        path = states.state_path((OFFSETS_TOPIC, partition))
        try:
            data, stat = self.store.get(path)
        except StoreError:
            return False
        try:
            state = states.decode_state(path, data, stat.version)
        except LayoutError:
            return False  # unreadable: the controller reports it; nobody serves it meanwhile
        if state.leader != self.broker_id or self._is_closed():
            return False
        with self._lock:
            seen = self._seen.get(partition, (-1, -1))
            if (state.leader_epoch, stat.version) < seen:
                return False
            self._seen[partition] = (state.leader_epoch, stat.version)
        self.host(partition, stat.version)
        return True

    def version(self, partition: int) -> int | None:
        """The state node version this broker took ``partition`` over at (its writes' fence)."""
        with self._lock:
            return self._hosted.get(partition)

    def still_leader(self, partition: int) -> bool:
        """After a failed fence check: re-read the state; keep hosting only if still leader."""
        path = states.state_path((OFFSETS_TOPIC, partition))
        try:
            data, stat = self.store.get(path)
            state = states.decode_state(path, data, stat.version)
        except (StoreError, LayoutError):
            self.lose(partition)
            return False
        if state.leader != self.broker_id:
            self.lose(partition)
            return False
        with self._lock:
            if partition in self._hosted:
                self._hosted[partition] = stat.version
        return True

    def lose(self, partition: int) -> None:
        # Called with a group lock held: the ticker unloads (taking every group's lock) later.
        with self._lock:
            self._lost.add(partition)

    def take_lost(self) -> list[int]:
        with self._lock:
            lost = list(self._lost)
            self._lost.clear()
        return lost

    def partitions(self) -> list[int]:
        with self._lock:
            return sorted(self._hosted)

    # -- groups ----------------------------------------------------------------------------------

    def group(self, group_id: str) -> HostedGroup | None:
        with self._lock:
            return self._groups.get(group_id)

    def adopt(self, group: HostedGroup) -> HostedGroup | None:
        """Keep ``group`` (or the one loaded meanwhile by another request); ``None`` when its
        partition is no longer hosted."""
        with self._lock:
            if group.partition not in self._hosted:
                return None
            return self._groups.setdefault(group.group_id, group)

    def replace(self, old: HostedGroup, new: HostedGroup | None) -> bool:
        """Put ``new`` in the place of ``old`` (a group changing kind), or drop ``old``
        (``new`` ``None``: the next request loads the group as stored); ``False`` when ``old``
        is no longer the hosted group of its id."""
        with self._lock:
            if self._groups.get(old.group_id) is not old:
                return False
            if new is None or new.partition not in self._hosted:
                del self._groups[old.group_id]
            else:
                self._groups[old.group_id] = new
            return True

    def groups(self) -> list[HostedGroup]:
        with self._lock:
            return list(self._groups.values())
