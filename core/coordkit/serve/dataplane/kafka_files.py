"""The small files of a Kafka log directory, written byte for byte as Kafka 3.9 writes them and
read as Kafka reads them, so that a directory passes between Kafka's brokers and ``coordkit
serve --data-dir`` (see :mod:`coordkit.serve.dataplane.logdir`):

* ``meta.properties`` — whose broker and cluster the directory is (``version=0``: ZooKeeper
  mode), a Java properties file as ``java.util.Properties.store`` writes it (an empty comment,
  the date, the keys in the order Java's hash table gives these three);
* ``partition.metadata`` — a partition directory's topic id (``version: 0``, no final newline);
* checkpoint files — a version line, a count line, one line per entry: the offsets of every
  partition (``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
  ``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint``: ``topic partition offset``)
  and a partition's leader epochs (``leader-epoch-checkpoint``: ``epoch start-offset``).

Kafka replaces a file by writing ``<name>.tmp`` and renaming it over the old one, so a reader
never sees half a file, and fsyncs it before the rename (``CheckpointFile``), so that a machine
crash leaves the old file or the new one whole; :func:`write_atomically` does the same.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from coordkit.engine.states import TP
from coordkit.errors import CoordkitError

META_PROPERTIES = "meta.properties"
#: Kafka's marker of a clean shutdown (its logs were flushed and indexed): read at the start,
#: deleted once the broker runs.
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
RECOVERY_POINTS = "recovery-point-offset-checkpoint"
HIGH_WATERMARKS = "replication-offset-checkpoint"
LOG_START_OFFSETS = "log-start-offset-checkpoint"
CLEANER_OFFSETS = "cleaner-offset-checkpoint"
#: The files of a log directory itself (beside the partition directories).
DIRECTORY_FILES = frozenset(
    {META_PROPERTIES, CLEAN_SHUTDOWN, RECOVERY_POINTS, HIGH_WATERMARKS, LOG_START_OFFSETS,
     CLEANER_OFFSETS}
)  # fmt: skip
LEADER_EPOCHS = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"

#: The meta.properties version of a ZooKeeper-mode broker (KRaft's is 1, with ``node.id``).
ZOOKEEPER_META_VERSION = 0
#: The version of every checkpoint file Kafka 3.9 writes.
CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0
_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}")


class KafkaFileError(CoordkitError):
    """A file of a log directory is not what Kafka writes there."""


# -- meta.properties ---------------------------------------------------------------------------


def meta_properties(broker_id: int, cluster_id: str, now: datetime.datetime) -> bytes:
    """A ZooKeeper-mode broker's ``meta.properties``. Java writes the date in its default time
    zone, ``now``'s here (``Thu Jan 01 00:00:00 UTC 1970``)."""
    stamp = now.strftime("%a %b %d %H:%M:%S ") + (now.tzname() or "UTC") + now.strftime(" %Y")
    lines = [
        "#",
        f"#{stamp}",
        f"broker.id={broker_id}",
        f"version={ZOOKEEPER_META_VERSION}",
        f"cluster.id={cluster_id}",
    ]
    return "".join(f"{line}\n" for line in lines).encode("latin-1")


def read_properties(data: bytes, where: str) -> dict[str, str]:
    """A Java properties file's keys and values: ``key=value`` or ``key:value`` lines, comments
    (``#``, ``!``) and blank lines passed over. Kafka's keys and values in these files need no
    escapes, and a line with one (or continued on the next) is refused rather than misread.

    :raises KafkaFileError: a line is not ``key=value``.
    """
    found: dict[str, str] = {}
    text = data.decode("latin-1")
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.fullmatch(r"([^=:\s\\]+)\s*[=:]\s*([^\\]*)", line)
        if match is None:
            raise KafkaFileError(f"{where}, line {number}: not key=value: {raw!r}")
        found[match[1]] = match[2].strip()
    return found


# -- partition.metadata ------------------------------------------------------------------------


def partition_metadata(topic_id: str) -> bytes:
    """A partition directory's ``partition.metadata``: its topic's id, no final newline."""
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id}".encode("ascii")


def read_partition_metadata(data: bytes, where: str) -> str:
    """The topic id a ``partition.metadata`` holds.

    :raises KafkaFileError: it is not version 0 with a topic id.
    """
    lines = data.decode("ascii", errors="replace").splitlines()
    if len(lines) != 2 or lines[0] != f"version: {PARTITION_METADATA_VERSION}":
        raise KafkaFileError(f"{where}: not 'version: 0' and a topic id: {data[:80]!r}")
    key, _, topic_id = lines[1].partition(": ")
    if key != "topic_id" or not _TOPIC_ID.fullmatch(topic_id):
        raise KafkaFileError(f"{where}: line 2 is not 'topic_id: <22 characters>': {lines[1]!r}")
    return topic_id


# -- checkpoint files --------------------------------------------------------------------------


def checkpoint(entries: Sequence[str]) -> bytes:
    """A checkpoint file: version, count, one entry a line (every line ends with a newline)."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries)), *entries]
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


def read_checkpoint(data: bytes, where: str, fields: int) -> list[list[str]]:
    """A checkpoint file's entries, each split into its ``fields`` space-separated fields. An
    empty file has none (Kafka creates ``cleaner-offset-checkpoint`` empty).

    :raises KafkaFileError: a version Kafka does not write, a count that does not match the
        entries, an entry of another shape.
    """
    lines = data.decode("utf-8", errors="replace").splitlines()
    if not lines:
        return []
    if lines[0] != str(CHECKPOINT_VERSION):
        raise KafkaFileError(f"{where}: checkpoint version {lines[0]!r}, expected 0")
    if len(lines) < 2 or not lines[1].isdigit():
        raise KafkaFileError(f"{where}: no entry count on line 2")
    entries = [line.split() for line in lines[2:]]
    if int(lines[1]) != len(entries):
        raise KafkaFileError(f"{where}: expected {lines[1]} entries, found {len(entries)}")
    for entry in entries:
        if len(entry) != fields:
            raise KafkaFileError(f"{where}: entry {' '.join(entry)!r}: expected {fields} fields")
    return entries


def offsets_checkpoint(offsets: Mapping[TP, int]) -> bytes:
    """A log directory's offsets of every partition (recovery points, high watermarks, log
    start offsets, cleaner offsets), sorted (Kafka's order is its hash map's)."""
    return checkpoint([f"{topic} {partition} {offset}"
                       for (topic, partition), offset in sorted(offsets.items())])  # fmt: skip


def read_offsets_checkpoint(data: bytes, where: str) -> dict[TP, int]:
    """The offsets a directory's checkpoint file holds, by partition.

    :raises KafkaFileError: it is not a checkpoint of ``topic partition offset`` entries.
    """
    found: dict[TP, int] = {}
    for topic, partition, offset in read_checkpoint(data, where, 3):
        found[(topic, _whole(partition, where))] = _whole(offset, where)
    return found


def leader_epoch_checkpoint(epochs: Iterable[tuple[int, int]]) -> bytes:
    """A partition's leader epoch cache: ``epoch start-offset`` per epoch, oldest first."""
    return checkpoint([f"{epoch} {start}" for epoch, start in epochs])


def read_leader_epoch_checkpoint(data: bytes, where: str) -> list[tuple[int, int]]:
    """``(epoch, start offset)`` pairs of a ``leader-epoch-checkpoint``.

    :raises KafkaFileError: it is not a checkpoint of ``epoch offset`` entries.
    """
    return [(_whole(e, where), _whole(s, where)) for e, s in read_checkpoint(data, where, 2)]


def _whole(text: str, where: str) -> int:
    if not re.fullmatch(r"-?[0-9]{1,19}", text):
        raise KafkaFileError(f"{where}: {text!r} is not a number")
    return int(text)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` as Kafka does: through ``<name>.tmp``, fsynced, and a
    rename."""
    temporary = path.with_name(f"{path.name}.tmp")
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
