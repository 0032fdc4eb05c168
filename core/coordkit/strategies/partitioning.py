"""The producer partitioner contract: what a partitioner sees and what it must answer.

A partitioner picks the partition of each :class:`ProducerRecord` from a :class:`ClusterMetadata`
snapshot (partitions of each topic and the leader of each; a partition is *available* when its
leader is live and reachable). Kafka's rules every built-in partitioner shares live here too:

* an explicit ``record.partition`` always wins (out of range is an error naming topic and count);
* a keyed record goes to ``to_positive(murmur2(key)) % partition_count`` over *all* partitions,
  available or not, byte-compatible with the Java client's ``Utils.murmur2``.

Partitioners are stateful (sticky partitions, counters) and registered as *factories* through
``coordkit_register_partitioners``: ``get_plugin_manager().partitioner(name)(options)`` gives a
fresh instance. The producer drives them with Kafka's call sequence: :meth:`Partitioner.partition`,
then :meth:`~Partitioner.on_new_batch` and a second ``partition`` when the record would open a new
batch (KIP-480), :meth:`~Partitioner.on_append` after the record is in a batch (KIP-794's byte
counting) and :meth:`~Partitioner.update_load` with the per-partition queue sizes (KIP-794's
adaptive partitioning).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import attrs
from attrs import field, frozen, validators

from coordkit.errors import CoordkitError
from coordkit.kafka.model import NO_LEADER, validate_topic_name

_MASK = 0xFFFFFFFF
_MURMUR2_SEED = 0x9747B28C
_MURMUR2_M = 0x5BD1E995
_MURMUR2_R = 24

#: ``batch.size`` default of the Java producer (bytes).
DEFAULT_BATCH_SIZE = 16384
#: Bytes of a record batch header (magic v2), counted against ``batch.size``.
BATCH_HEADER_BYTES = 61


class PartitioningError(CoordkitError, ValueError):
    """A record cannot be partitioned (bad explicit partition, unknown topic, bad options)."""


class InvalidPartitionError(PartitioningError):
    """An explicit partition is outside the topic's partitions."""


class UnknownTopicMetadataError(PartitioningError, LookupError):
    """The cluster metadata has no such topic."""


# -- Kafka's hash -----------------------------------------------------------------------------------


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: MurmurHash2 (seed ``0x9747b28c``), as a signed 32-bit int."""
    length = len(data)
    h = (_MURMUR2_SEED ^ length) & _MASK
    blocks = length >> 2
    if blocks:
        for block in struct.unpack_from(f"<{blocks}I", data):
            k = (block * _MURMUR2_M) & _MASK
            k ^= k >> _MURMUR2_R
            k = (k * _MURMUR2_M) & _MASK
            h = ((h * _MURMUR2_M) & _MASK) ^ k
    tail = length & 3
    if tail:
        # Java's switch falls through: the third, second, then first tail byte.
        base = blocks << 2
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _MURMUR2_M) & _MASK
    h ^= h >> 13
    h = (h * _MURMUR2_M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``: MIN_VALUE maps to 0)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, partition_count: int) -> int:
    """Kafka's keyed rule: ``toPositive(murmur2(key)) % numPartitions``."""
    if partition_count < 1:
        raise PartitioningError(f"a topic needs at least one partition, got {partition_count}")
    return to_positive(murmur2(key)) % partition_count


# -- records ----------------------------------------------------------------------------------------


def _varint_size(value: int) -> int:
    """Bytes of a zig-zag varint (Kafka's ``ByteUtils.sizeOfVarint``)."""
    encoded = ((value << 1) ^ (value >> 31)) & _MASK
    size = 1
    while encoded >= 0x80:
        encoded >>= 7
        size += 1
    return size


def record_size(key: bytes | None, value: bytes | None) -> int:
    """Bytes a record takes in a v2 batch (``DefaultRecord.sizeInBytes``, no headers, deltas 0)."""
    body = 3  # attributes, timestamp delta, offset delta
    for part in (key, value):
        body += 1 if part is None else _varint_size(len(part)) + len(part)
    body += 1  # header count
    return _varint_size(body) + body


def _key_bytes(value: bytes | str | None) -> bytes | None:
    # Kafka's StringSerializer: UTF-8.
    return value.encode() if isinstance(value, str) else value


def _topic(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    try:
        validate_topic_name(value)
    except ValueError as exc:
        raise PartitioningError(f"record {attribute.name}: {exc}") from None


def _explicit_partition(_: Any, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise InvalidPartitionError(
            f"record partition must be a non-negative integer or None, got {value!r}"
        )


@frozen
class ProducerRecord:
    """A record to send: topic, optional key and value bytes, optional explicit partition.

    ``key`` may be given as ``str`` (encoded UTF-8, as Kafka's ``StringSerializer`` does).
    """

    topic: str = field(validator=_topic)
    value: bytes | None = None
    key: bytes | None = field(default=None, converter=_key_bytes)
    partition: int | None = field(default=None, validator=_explicit_partition)
    size: int = field(init=False)

    @size.default
    def _size(self) -> int:
        return record_size(self.key, self.value)


# -- what a partitioner sees ------------------------------------------------------------------------


def _leader_map(value: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    return {topic: tuple(leaders) for topic, leaders in value.items()}


def _reachable(value: Any) -> frozenset[int] | None:
    return None if value is None else frozenset(value)


@frozen
class ClusterMetadata:
    """The cluster as a producer knows it: the leader of every partition of every topic.

    :param leaders: topic → leader broker of partition 0, 1, ... (``NO_LEADER`` = -1: none).
    :param reachable: brokers the producer can send to (``None``: every broker); a partition whose
        leader is not among them is unavailable to this producer.
    """

    leaders: Mapping[str, tuple[int, ...]] = field(converter=_leader_map)
    reachable: frozenset[int] | None = field(default=None, converter=_reachable)
    _available: Mapping[str, tuple[int, ...]] = field(init=False, eq=False, repr=False)

    @_available.default
    def _compute_available(self) -> dict[str, tuple[int, ...]]:
        live = self.reachable
        return {
            topic: tuple(
                p
                for p, leader in enumerate(leaders)
                if leader != NO_LEADER and (live is None or leader in live)
            )
            for topic, leaders in self.leaders.items()
        }

    def _topic_leaders(self, topic: str) -> tuple[int, ...]:
        try:
            return self.leaders[topic]
        except KeyError:
            known = ", ".join(sorted(self.leaders)) or "none"
            raise UnknownTopicMetadataError(
                f"no metadata for topic {topic!r} (known topics: {known})"
            ) from None

    def partition_count(self, topic: str) -> int:
        return len(self._topic_leaders(topic))

    def available_partitions(self, topic: str) -> tuple[int, ...]:
        """Partitions of ``topic`` with a live, reachable leader, in partition order."""
        self._topic_leaders(topic)
        return self._available[topic]

    def leader(self, topic: str, partition: int) -> int:
        leaders = self._topic_leaders(topic)
        if not 0 <= partition < len(leaders):
            raise InvalidPartitionError(
                f"topic {topic!r} has {len(leaders)} partitions; partition {partition} does not exist"
            )
        return leaders[partition]

    def is_available(self, topic: str, partition: int) -> bool:
        leader = self.leader(topic, partition)
        return leader != NO_LEADER and (self.reachable is None or leader in self.reachable)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted(self.leaders))


def _ints(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


@frozen
class PartitionLoad:
    """Queue sizes (batches waiting) of a topic's partitions, as KIP-794's adaptive partitioning
    sees them: partitions whose leader has not drained within the availability timeout are left
    out, so ``len(partitions)`` may be below ``partition_count``."""

    partitions: tuple[int, ...] = field(converter=_ints)
    queue_sizes: tuple[int, ...] = field(converter=_ints)
    partition_count: int = field(validator=validators.ge(0))

    @queue_sizes.validator
    def _check_sizes(
        self, attribute: attrs.Attribute[tuple[int, ...]], value: tuple[int, ...]
    ) -> None:
        if len(value) != len(self.partitions):
            raise PartitioningError(
                f"PartitionLoad: {len(value)} queue sizes for {len(self.partitions)} partitions"
            )
        if any(size < 0 for size in value):
            raise PartitioningError(f"PartitionLoad: queue sizes must be >= 0, got {list(value)}")


@frozen
class PartitionerOptions:
    """Settings every partitioner factory receives (each uses what applies to it).

    :param seed: seeds the partitioner's random choices so runs repeat (``None``: unseeded).
    :param batch_size: ``batch.size``: uniform-sticky switches after this many bytes.
    :param adaptive: ``partitioner.adaptive.partitioning.enable`` (KIP-794).
    :param ignore_keys: ``partitioner.ignore.keys``: spread keyed records like null-key ones.
    """

    seed: int | None = None
    batch_size: int = field(default=DEFAULT_BATCH_SIZE, validator=validators.ge(1))
    adaptive: bool = True
    ignore_keys: bool = False


@runtime_checkable
class Partitioner(Protocol):
    """A (stateful) producer partitioner; see the module docstring for the call sequence."""

    @property
    def name(self) -> str: ...

    def partition(self, record: ProducerRecord, cluster: ClusterMetadata) -> int:
        """The partition of ``record``, in ``range(cluster.partition_count(record.topic))``."""
        ...

    def on_new_batch(self, topic: str, cluster: ClusterMetadata, previous_partition: int) -> None:
        """A record chosen for ``previous_partition`` would open a new batch there (KIP-480)."""
        ...

    def on_append(
        self,
        record: ProducerRecord,
        partition: int,
        cluster: ClusterMetadata,
        batch_full: bool,
    ) -> None:
        """``record`` was appended to ``partition``; ``batch_full``: the partition's last batch
        is complete, so switching partitions now does not leave a fractional batch (KIP-794)."""
        ...

    def update_load(self, topic: str, load: PartitionLoad | None) -> None:
        """The topic's current queue sizes (``None``: no load information)."""
        ...


@runtime_checkable
class PartitionerFactory(Protocol):
    """What ``coordkit_register_partitioners`` registers: ``factory(options)`` → a new partitioner."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def __call__(self, options: PartitionerOptions | None = None) -> Partitioner: ...
