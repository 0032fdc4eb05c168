"""The ``offsets-topic`` offset storage: Kafka's ``__consumer_offsets`` model on the metadata store.

Kafka keeps committed offsets as records keyed by (group, topic, partition) in partition
``coordinator_partition(group, offsets.topic.num.partitions)`` of ``__consumer_offsets``; log
compaction keeps the last record per key, and the broker leading that partition coordinates the
group (a new coordinator loads the partition). Here the compacted topic is a coordkit-owned tree
with one node per key, so "last write per key wins" is a node overwrite::

    /coordkit/consumer_offsets                      {"version":1,"num_partitions":50}
        /<p>                                        partition p of the offsets topic
            /<group>                                a group whose coordinator partition is p
                /<topic>
                    /<partition>                    the latest record of key (group, topic, partition)

A record is JSON with the field names of Kafka's ``OffsetCommitValue``::

    {"offset":42,"leader_epoch":-1,"metadata":"","commit_timestamp":1700000000000}

``commit_timestamp`` is the committer's if it set one, else the time of the commit. The root node
records the partition count the tree was written with; opening it with another count is refused
(Kafka cannot change ``offsets.topic.num.partitions`` either: every group would move). Group ids
are node names, so they follow :func:`coordkit.strategies.offsets.validate_group_id`. A commit of many
partitions is one multi, creating missing nodes and parents.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, cast

from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.kafka.coordinators import (
    DEFAULT_OFFSETS_PARTITIONS,
    OFFSETS_TOPIC,
    coordinator_partition,
    offsets_topic_partitions,
)
from coordkit.kafka.model import TopicPartition
from coordkit.store import Check, MetadataStore, paths
from coordkit.strategies.offsets import (
    OffsetAndMetadata,
    validate_commit,
    validate_fetch,
    validate_group_id,
)
from coordkit.support import jsontext
from coordkit.support.clock import Clock, SystemClock
from coordkit_offsets.options import (
    check_durability,
    check_options,
    check_store,
    int_option,
    str_option,
)
from coordkit_offsets.writes import (
    DEFAULT_MAX_ATTEMPTS,
    delete_nodes_atomically,
    delete_tree_atomically,
    upsert_atomically,
)

NAME = "offsets-topic"
#: Where the modelled ``__consumer_offsets`` lives unless the ``root`` option says otherwise.
DEFAULT_ROOT = "/coordkit/consumer_offsets"
LAYOUT_VERSION = 1


def encode_record(value: OffsetAndMetadata, commit_timestamp: int) -> bytes:
    record = {
        "offset": value.offset,
        "leader_epoch": value.leader_epoch,
        "metadata": value.metadata,
        "commit_timestamp": commit_timestamp,
    }
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()


def decode_record(path: str, data: bytes) -> OffsetAndMetadata:
    try:
        obj = jsontext.loads(data)
    except jsontext.JSONTextError as exc:
        raise LayoutError(path, f"offset record is not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise LayoutError(path, f"offset record must be a JSON object, got {type(obj).__name__}")
    fields: dict[str, Any] = {}
    for name, kind in (
        ("offset", int),
        ("leader_epoch", int),
        ("metadata", str),
        ("commit_timestamp", int),
    ):
        if name not in obj:
            raise LayoutError(path, "missing", field=name)
        value = obj[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise LayoutError(
                path, f"expected {kind.__name__}, got {json.dumps(value)}", field=name
            )
        fields[name] = value
    try:
        return OffsetAndMetadata(**fields)
    except ValueError as exc:
        raise LayoutError(path, str(exc), field="offset") from None


class OffsetsTopicStorage:
    """Offsets as the latest record per key in a modelled ``__consumer_offsets`` topic.

    :param num_partitions: ``offsets.topic.num.partitions`` (Kafka's default 50).
    :param root: the tree's root node.
    :param clock: stamps commits that carry no ``commit_timestamp``.
    :param max_attempts: re-plans of a commit invalidated by a concurrent committer.
    """

    name: ClassVar[str] = NAME
    topic: ClassVar[str] = OFFSETS_TOPIC

    def __init__(
        self,
        store: MetadataStore,
        *,
        num_partitions: int | None = None,
        root: str = DEFAULT_ROOT,
        clock: Clock | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ):
        if num_partitions is not None and num_partitions < 1:
            raise ValueError(
                f"offset storage {NAME!r}: num_partitions must be >= 1, got {num_partitions}"
            )
        self.store = store
        self._num_partitions = num_partitions
        self.root = paths.validate(root)
        self.clock: Clock = clock or SystemClock()
        self.max_attempts = max_attempts
        self._root_checked = False

    # -- the partitioning
    @property
    def num_partitions(self) -> int:
        """Partitions groups are spread over. Unless given, the count the stored offsets were
        written with, else the count ``__consumer_offsets`` has, else Kafka's default 50."""
        if self._num_partitions is None:
            self._num_partitions = self._stored_partitions()
        return self._num_partitions

    def _stored_partitions(self) -> int:
        try:
            data, _ = self.store.get(self.root)
            meta = jsontext.loads(data) if data else {}
            written = meta.get("num_partitions") if isinstance(meta, dict) else None
            if type(written) is int and written >= 1:
                return written
        except (NoNodeError, jsontext.JSONTextError):
            pass
        count, _ = offsets_topic_partitions(self.store, DEFAULT_OFFSETS_PARTITIONS)
        return count

    def partition_of(self, group_id: str) -> int:
        """The offsets-topic partition holding ``group_id``'s records (its coordinator's)."""
        return coordinator_partition(validate_group_id(group_id), self.num_partitions)

    def partition_path(self, partition: int) -> str:
        if not isinstance(partition, int) or not 0 <= partition < self.num_partitions:
            raise ValueError(
                f"{OFFSETS_TOPIC} has partitions 0..{self.num_partitions - 1}, got {partition!r}"
            )
        return paths.join(self.root, str(partition))

    def group_path(self, group_id: str) -> str:
        return paths.join(self.partition_path(self.partition_of(group_id)), group_id)

    def record_path(self, group_id: str, tp: TopicPartition) -> str:
        return paths.join(self.group_path(group_id), tp.topic, str(tp.partition))

    def _root_data(self) -> bytes:
        meta = {"version": LAYOUT_VERSION, "num_partitions": self.num_partitions}
        return json.dumps(meta, separators=(",", ":")).encode()

    def _check_root(self) -> None:
        """Refuse a tree written with another partition count (checked once per instance)."""
        if self._root_checked:
            return
        try:
            data, _ = self.store.get(self.root)
        except NoNodeError:
            return  # the first commit creates it with our count
        try:
            meta = jsontext.loads(data) if data else {}
        except jsontext.JSONTextError as exc:
            raise LayoutError(self.root, f"offsets-topic root: {exc}") from None
        written = meta.get("num_partitions") if isinstance(meta, dict) else None
        if written != self.num_partitions:
            raise LayoutError(
                self.root,
                f"the offsets topic was written with num_partitions={written!r}; this storage was "
                f"opened with num_partitions={self.num_partitions} (every group would move)",
                field="num_partitions",
            )
        self._root_checked = True

    # -- OffsetStorage
    def commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        fence: Sequence[Check] = (),
    ) -> None:
        checked = validate_commit(group_id, offsets)
        self._check_root()
        now = self.clock.wall_ms()
        values = {
            self.record_path(group_id, tp): encode_record(
                value, value.commit_timestamp if value.commit_timestamp >= 0 else now
            )
            for tp, value in checked.items()
        }
        upsert_atomically(
            self.store,
            values,
            what=f"offset commit of group {group_id!r} ({NAME} storage)",
            ancestor_data={self.root: self._root_data()},
            max_attempts=self.max_attempts,
            fence=fence,
        )

    def fetch(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        group, wanted = validate_fetch(group_id, partitions)
        self._check_root()
        if wanted is None:
            wanted = self._keys_of(self.group_path(group))
        record_paths = [self.record_path(group, tp) for tp in wanted]
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        results = self.store.get_many(record_paths)
        for tp, path, result in zip(wanted, record_paths, results, strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, StoreError):
                raise result
            out[tp] = decode_record(path, result[0])
        return out

    def _keys_of(self, group_path: str) -> list[TopicPartition]:
        try:
            topics = self.store.children(group_path)
        except NoNodeError:
            return []
        out: list[TopicPartition] = []
        for topic in topics:
            try:
                children = self.store.children(paths.join(group_path, topic))
            except NoNodeError:
                continue  # deleted while we listed
            out.extend(
                TopicPartition(topic, partition)
                for p in children
                if (partition := paths.numeric_name(p)) is not None
            )
        return sorted(out)

    def groups_in_partition(self, partition: int) -> list[str]:
        """The groups with records in ``partition``: what a new coordinator of it loads."""
        try:
            return self.store.children(self.partition_path(partition))
        except NoNodeError:
            return []

    def load_partition(self, partition: int) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """Every group's offsets in ``partition`` (a coordinator taking the partition over)."""
        loaded = {group: self.fetch(group) for group in self.groups_in_partition(partition)}
        return {group: offsets for group, offsets in loaded.items() if offsets}

    def groups(self) -> list[str]:
        self._check_root()
        try:
            partitions = self.store.children(self.root)
        except NoNodeError:
            return []
        out: list[str] = []
        for name in partitions:
            partition = paths.numeric_name(name)
            if partition is not None and partition < self.num_partitions:
                out.extend(self.groups_in_partition(partition))
        return sorted(out)

    def delete_group(self, group_id: str) -> None:
        group = validate_group_id(group_id)
        delete_tree_atomically(
            self.store,
            self.group_path(group),
            what=f"deleting the offsets of group {group!r} ({NAME} storage)",
            max_attempts=self.max_attempts,
        )

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *, fence: Sequence[Check] = ()
    ) -> None:
        group = validate_group_id(group_id)
        delete_nodes_atomically(
            self.store,
            [self.record_path(group, tp) for tp in partitions],
            what=f"deleting offsets of group {group!r} ({NAME} storage)",
            fence=fence,
            max_attempts=self.max_attempts,
        )

    def __repr__(self) -> str:
        return (
            f"<OffsetsTopicStorage {self.root} partitions={self.num_partitions} on {self.store!r}>"
        )


class OffsetsTopicStorageFactory:
    """Registered as ``offsets-topic``; options: ``num_partitions``, ``root``, ``clock``,
    ``max_attempts``, ``require_durable``."""

    name: ClassVar[str] = NAME

    def __call__(self, store: object, **options: object) -> OffsetsTopicStorage:
        checked = check_store(NAME, store)
        options = dict(options)
        check_durability(NAME, checked, options)
        clock = options.pop("clock", None)
        if clock is not None and not callable(getattr(clock, "wall_ms", None)):
            raise TypeError(
                f"offset storage {NAME!r}: option 'clock' must be a Clock, got {clock!r}"
            )
        known = check_options(
            NAME,
            options,
            {"num_partitions": (int, 1), "root": (str, None), "max_attempts": (int, 1)},
        )
        return OffsetsTopicStorage(
            checked,
            num_partitions=cast(int | None, known.get("num_partitions")),
            root=str_option(known, "root", DEFAULT_ROOT),
            clock=cast(Clock | None, clock),
            max_attempts=int_option(known, "max_attempts", DEFAULT_MAX_ATTEMPTS),
        )
