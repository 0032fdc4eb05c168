"""A broker's log directory (Kafka's ``log.dirs``): its partition replicas' record batches on disk,
so that a broker — or a whole cluster on a persisted store — restarts with its records, and a
Kafka 3.9 broker started on the directory serves them too (and the other way round).

Layout, as Kafka's: ``<dir>/<topic>-<partition>/<base offset, 20 digits>.log``, the segments of
a partition's log, each the record batches (format v2) one after another, exactly as they sit in
memory (offsets and leader epochs written in). Appends go to the last segment (Kafka's active
one), and a new segment starts when one would grow past ``segment_bytes`` (Kafka's
``log.segment.bytes``, 1 GiB). The leader epoch cache and the producers' state are rebuilt from
the batches' headers when the log is loaded, as Kafka rebuilds them on recovery.

Kafka's other files (:mod:`coordkit.serve.dataplane.kafka_files`), so that a Kafka broker accepts the
directory and a directory Kafka wrote stays right for Kafka after coordkit used it:

* ``meta.properties`` — written, or checked against the broker id and the store's cluster id
  when it exists (:meth:`LogDirectory.claim`: a directory of another broker or cluster is
  refused, as Kafka refuses it);
* ``partition.metadata`` — each partition's topic id, from the store's topic node;
* ``leader-epoch-checkpoint`` — each partition's leader epochs, rewritten when they change;
* ``recovery-point-offset-checkpoint`` — from where Kafka must check (recover) a log when it
  starts: coordkit writes no index files and does not fsync, so every segment it wrote or
  changed lies past the recovery point, and Kafka recovers it and rebuilds its indexes (a
  Kafka recovery point above a segment coordkit changes is lowered before the change);
* ``replication-offset-checkpoint`` (high watermarks) and ``log-start-offset-checkpoint``,
  written when the directory is closed; ``cleaner-offset-checkpoint``, empty, as Kafka creates it.

Index files (``.index``, ``.timeindex``, ``.txnindex``) of a segment coordkit changes are
deleted, producer state snapshots (``.snapshot``) past a truncation too, and Kafka's
clean-shutdown marker when the directory is opened: Kafka rebuilds what is missing on recovery.
Kafka's index files of segments coordkit leaves alone stay as they are; coordkit reads only the
``.log`` files (it keeps every batch in memory).

Writes go to the operating system at every append and truncation (no fsync: as Kafka by default,
what a process crash cannot lose a machine crash can; replication is the guard). Loading checks
every batch (lengths, CRC-32C, offsets growing) and cuts the log at the first that fails: the
torn tail of a process killed mid-write (Kafka's log recovery). Offsets may skip (Kafka's log
cleaner removes records of compacted topics), never go back. A batch of an older record format
(v0, v1) is not read, and the directory is refused rather than cut.

One process at a time: the directory is locked (``.lock``) with ``flock`` and with a POSIX record
lock, the kind Java's ``FileChannel.tryLock`` takes, so a second ``coordkit serve`` and a Kafka
broker pointed at it are both refused.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import datetime
import fcntl
import logging
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

import attrs

from coordkit.engine.states import TP
from coordkit.errors import CoordkitError
from coordkit.protocol import records
from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.records import BatchHeader
from coordkit.serve.dataplane import kafka_files
from coordkit.serve.dataplane.kafka_files import KafkaFileError

log = logging.getLogger("coordkit.serve")

#: Kafka's default ``log.segment.bytes``: a segment is not written past it.
DEFAULT_SEGMENT_BYTES = 1 << 30
#: The first segment's name: its base offset, 20 digits (``LogFileUtils.filenamePrefixFromOffset``).
SEGMENT_NAME = f"{0:020d}.log"
LOCK_NAME = ".lock"
#: A partition directory's name: a legal topic name (Kafka's ``[a-zA-Z0-9._-]``, at most 249
#: characters), a dash, the partition number.
_PARTITION_DIR = re.compile(r"(?P<topic>[A-Za-z0-9._-]{1,249})-(?P<partition>0|[1-9][0-9]{0,9})")
_SEGMENT_FILE = re.compile(r"(?P<base>[0-9]{20})\.log")
_SNAPSHOT_FILE = re.compile(r"(?P<offset>[0-9]{20})\.snapshot")
#: What Kafka keeps beside a segment and rebuilds from it when missing.
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")
#: Offsets within a segment are 32-bit (relative to its base offset in Kafka's indexes).
_MAX_RELATIVE_OFFSET = 2**31 - 1
#: Where a batch header keeps its format (magic) byte.
_MAGIC_AT = 16


class LogDirError(CoordkitError):
    """The log directory cannot be used (not a directory, not writable, in use, another
    broker's or cluster's, a record format coordkit does not read)."""


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


@attrs.define
class _Segment:
    """One segment file: its base offset, path, where it starts in the partition's bytes (all
    segments one after another) and its size."""

    base_offset: int
    path: Path
    start: int
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size


class PartitionSegments:
    """A partition's segment files, written through as its :class:`~coordkit.serve.dataplane.log.PartitionLog`
    appends and truncates: byte positions are the partition's batches one after another, across
    its segments. Keeps the partition's ``leader-epoch-checkpoint`` current from the batches'
    headers (the log's only writer is the partition log: it hands over whole batches)."""

    def __init__(self, log_dir: LogDirectory, tp: TP, directory: Path) -> None:
        self._log_dir = log_dir
        self.tp = tp
        self.directory = directory
        self._segments: list[_Segment] = []
        #: Each batch's first byte (in the partition's bytes) and base offset, for truncation.
        self._batch_starts = array.array("q")
        self._batch_offsets = array.array("q")
        self.end_offset = 0
        #: Kafka's leader epoch cache: ``(epoch, first offset)``, as its recovery assigns it.
        self.epochs: list[tuple[int, int]] = []
        #: Segments whose index files were deleted (they are changed from now on).
        self._changed: set[int] = set()
        self._active: BinaryIO | None = None

    # -- loading ------------------------------------------------------------------------------

    def load(self) -> bytes:
        """The valid batches of every segment, in order; a segment is cut after its last valid
        batch and the segments after it are deleted (Kafka's recovery)."""
        found: list[_Segment] = []
        for entry in self.directory.iterdir():
            match = _SEGMENT_FILE.fullmatch(entry.name)
            if match is not None and entry.is_file():
                found.append(_Segment(int(match["base"]), entry, 0, entry.stat().st_size))
        found.sort(key=lambda segment: segment.base_offset)
        data = bytearray()
        for number, segment in enumerate(found):
            content = segment.path.read_bytes()
            first = max(segment.base_offset, self.end_offset)
            valid, headers = scan_batches(
                content, first, where=f"{self.directory}/{segment.path.name}"
            )
            segment.start, segment.size = len(data), valid
            self._segments.append(segment)
            for header, position in headers:
                self._note(header, segment.start + position)
            data += content[:valid]
            if valid < len(content):
                log.warning("log directory %s: %s-%s: cut %s bytes of %s after its last whole "
                            "batch (a torn or corrupt tail)", self._log_dir.path, *self.tp,
                            len(content) - valid, segment.path.name)  # fmt: skip
                self._changing(segment)
                with open(segment.path, "r+b") as file:
                    file.truncate(valid)
                for later in found[number + 1 :]:
                    log.warning("log directory %s: %s-%s: deleting %s, after the cut",
                                self._log_dir.path, *self.tp, later.path.name)  # fmt: skip
                    self._changing(later)
                    later.path.unlink()
                self._delete_snapshots_after(self.end_offset)
                self._write_epochs()
                break
        if self._segments:
            # An empty last segment (Kafka rolls a new one at its log end) names the log end.
            self.end_offset = max(self.end_offset, self._segments[-1].base_offset)
            if not (self.directory / kafka_files.LEADER_EPOCHS).exists():
                self._write_epochs()
        return bytes(data)

    def _note(self, header: BatchHeader, position: int) -> bool:
        """Book a batch at ``position``: its offsets and, as Kafka's recovery assigns it, a new
        leader epoch (then true)."""
        self._batch_starts.append(position)
        self._batch_offsets.append(header.base_offset)
        self.end_offset = header.last_offset + 1
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not self.epochs or epoch > self.epochs[-1][0]):
            self.epochs.append((epoch, header.base_offset))
            return True
        return False

    # -- what PartitionLog writes through -------------------------------------------------------

    @property
    def size(self) -> int:
        return self._segments[-1].end if self._segments else 0

    def append(self, data: bytes) -> None:
        """Append whole batches (their offsets follow on from this log's end)."""
        for header, raw in records.iter_batches(data, verify_crc=False):
            active = self._segment_for(header)
            self._changing(active)
            if self._active is None:
                self._active = open(active.path, "ab", buffering=0)  # noqa: SIM115 - kept open
            self._active.write(raw)
            position = active.end
            active.size += len(raw)
            if self._note(header, position):
                self._write_epochs()

    def _segment_for(self, header: BatchHeader) -> _Segment:
        """The segment a batch goes to: the last, or a new one when the last would grow past
        the directory's segment size or its offsets past 32 bits (Kafka's roll)."""
        last = self._segments[-1] if self._segments else None
        if (
            last is None
            or (last.size and last.size + header.size > self._log_dir.segment_bytes)
            or header.last_offset - last.base_offset > _MAX_RELATIVE_OFFSET
        ):
            base = 0 if last is None else header.base_offset
            path = self.directory / segment_name(base)
            path.touch()
            last = _Segment(base, path, self.size, 0)
            self._segments.append(last)
            self._close_active()
        return last

    def truncate(self, size: int) -> None:
        """Cut everything from byte ``size`` of the partition's bytes on (a batch boundary):
        segments wholly past it are deleted (the first is kept, empty), the one holding it cut."""
        if size >= self.size:
            return
        self._close_active()
        while len(self._segments) > 1 and self._segments[-1].start >= size:
            gone = self._segments.pop()
            self._changing(gone)
            gone.path.unlink(missing_ok=True)
        last = self._segments[-1]
        self._changing(last)
        with open(last.path, "r+b") as file:
            file.truncate(max(size - last.start, 0))
        last.size = max(size - last.start, 0)
        kept = bisect.bisect_left(self._batch_starts, size)
        if kept < len(self._batch_offsets):
            self.end_offset = self._batch_offsets[kept]
        del self._batch_starts[kept:], self._batch_offsets[kept:]
        if not self._batch_offsets:
            self.end_offset = last.base_offset
        epochs = [(epoch, start) for epoch, start in self.epochs if start < self.end_offset]
        if epochs != self.epochs:
            self.epochs = epochs
            self._write_epochs()
        self._delete_snapshots_after(self.end_offset)

    def close(self) -> None:
        self._close_active()

    def _close_active(self) -> None:
        if self._active is not None:
            self._active.close()
            self._active = None

    # -- Kafka's files beside the segments ------------------------------------------------------

    def _changing(self, segment: _Segment) -> None:
        """Before ``segment`` changes for the first time: its index files go (Kafka rebuilds
        them) and the recovery point comes down to it, so Kafka checks it when it starts."""
        if segment.base_offset in self._changed:
            return
        self._changed.add(segment.base_offset)
        stem = segment.path.name.removesuffix(".log")
        for suffix in INDEX_SUFFIXES:
            (self.directory / f"{stem}{suffix}").unlink(missing_ok=True)
        self._log_dir.lower_recovery_point(self.tp, segment.base_offset)

    def _delete_snapshots_after(self, offset: int) -> None:
        """Producer state snapshots past ``offset`` describe records no longer in the log
        (Kafka deletes them on truncation too)."""
        for entry in self.directory.iterdir():
            match = _SNAPSHOT_FILE.fullmatch(entry.name)
            if match is not None and int(match["offset"]) > offset:
                entry.unlink(missing_ok=True)

    def _write_epochs(self) -> None:
        kafka_files.write_atomically(
            self.directory / kafka_files.LEADER_EPOCHS,
            kafka_files.leader_epoch_checkpoint(self.epochs),
        )

    @property
    def log_start(self) -> int:
        """Where the log starts: its first segment's base offset."""
        return self._segments[0].base_offset if self._segments else 0


class LogDirectory:
    """Broker logs under ``path`` (created when missing), locked for this process."""

    def __init__(self, path: Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        self.path = path
        self.segment_bytes = segment_bytes
        try:
            path.mkdir(parents=True, exist_ok=True)
            self._lock = open(path / LOCK_NAME, "a")  # noqa: SIM115 - held until close
        except OSError as exc:
            raise LogDirError(f"log directory {path}: {exc.strerror}") from None
        try:
            # flock excludes other opens in this process too; the record lock (per process,
            # and dropped when the process closes any descriptor of the file) is Java's kind.
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise LogDirError(
                f"log directory {path} is in use by another process (it holds {LOCK_NAME})"
            ) from None
        self._segments: dict[TP, PartitionSegments] = {}
        #: Topic ids as the store has them, and partitions waiting for theirs.
        self._topic_ids: dict[str, str] = {}
        self._without_metadata: set[TP] = set()
        #: The topic id each loaded partition's ``partition.metadata`` names.
        self.stored_topic_ids: dict[TP, str] = {}
        try:
            self._recovery_points = self._read_offsets(kafka_files.RECOVERY_POINTS)
            self._log_starts = self._read_offsets(kafka_files.LOG_START_OFFSETS)
        except BaseException:
            self.close()
            raise

    def _read_offsets(self, name: str) -> dict[TP, int]:
        path = self.path / name
        if not path.exists():
            return {}
        try:
            return kafka_files.read_offsets_checkpoint(path.read_bytes(), str(path))
        except KafkaFileError as exc:
            raise LogDirError(f"log directory {self.path}: {exc}") from None

    # -- whose directory ----------------------------------------------------------------------

    def claim(self, broker_id: int, cluster_id: str) -> None:
        """Make the directory broker ``broker_id``'s of cluster ``cluster_id``: its
        ``meta.properties`` written, or checked when there is one (Kafka refuses a directory of
        another broker or cluster at its start, and so does this).

        :raises LogDirError: the directory is another broker's or cluster's, or a KRaft node's.
        """
        path = self.path / kafka_files.META_PROPERTIES
        if path.exists():
            try:
                found = kafka_files.read_properties(path.read_bytes(), str(path))
            except KafkaFileError as exc:
                raise LogDirError(f"log directory {self.path}: {exc}") from None
            if found.get("version") != str(kafka_files.ZOOKEEPER_META_VERSION):
                raise LogDirError(
                    f"{path}: version {found.get('version')!r} is not a ZooKeeper-mode broker's "
                    "(0): the directory is a KRaft node's or not Kafka's"
                )
            if found.get("broker.id") != str(broker_id):
                raise LogDirError(
                    f"{path}: broker id {found.get('broker.id')!r} is not {broker_id}: the "
                    "directory is another broker's (Kafka refuses it too)"
                )
            if found.get("cluster.id") not in (None, cluster_id):
                raise LogDirError(
                    f"{path}: cluster id {found['cluster.id']!r} is not the store's "
                    f"{cluster_id!r}: the directory is another cluster's (Kafka refuses it too)"
                )
            if "cluster.id" in found:
                return
        now = datetime.datetime.now(datetime.UTC)
        kafka_files.write_atomically(path, kafka_files.meta_properties(broker_id, cluster_id, now))
        cleaner = self.path / kafka_files.CLEANER_OFFSETS
        if not cleaner.exists():
            cleaner.touch()

    # -- loading ------------------------------------------------------------------------------

    def stored(self) -> dict[TP, bytes]:
        """Every partition's valid batches as found on disk, each log cut after its last valid
        batch. Kafka's files are read where coordkit needs them; other entries that are not
        ``<topic>-<partition>`` directories are left alone (and logged).

        :raises LogDirError: a log holds batches of an older record format.
        """
        # Kafka's marker says its logs were flushed and indexed as they are: no longer so.
        (self.path / kafka_files.CLEAN_SHUTDOWN).unlink(missing_ok=True)
        found: dict[TP, bytes] = {}
        for entry in sorted(self.path.iterdir()):
            if entry.name == LOCK_NAME or entry.name in kafka_files.DIRECTORY_FILES:
                continue
            match = _PARTITION_DIR.fullmatch(entry.name)
            if match is None or not entry.is_dir():
                log.warning("log directory %s: ignoring %r (not a partition's directory)",
                            self.path, entry.name)  # fmt: skip
                continue
            tp = (match["topic"], int(match["partition"]))
            segments = self._segments[tp] = PartitionSegments(self, tp, entry)
            found[tp] = segments.load()
            self._read_partition_metadata(tp, entry)
        return found

    def _read_partition_metadata(self, tp: TP, directory: Path) -> None:
        path = directory / kafka_files.PARTITION_METADATA
        if not path.exists():
            self._without_metadata.add(tp)
            return
        try:
            self.stored_topic_ids[tp] = kafka_files.read_partition_metadata(
                path.read_bytes(), str(path)
            )
        except KafkaFileError as exc:
            log.warning("log directory %s: %s (written again once the topic id is known)",
                        self.path, exc)  # fmt: skip
            self._without_metadata.add(tp)

    # -- writing ------------------------------------------------------------------------------

    def segment(self, tp: TP) -> PartitionSegments:
        """``tp``'s files, open for appending (its directory created on first use)."""
        segments = self._segments.get(tp)
        if segments is None:
            directory = self.path / partition_dir_name(tp)
            directory.mkdir(exist_ok=True)
            segments = self._segments[tp] = PartitionSegments(self, tp, directory)
            segments.load()
            self._without_metadata.add(tp)
            self._write_partition_metadata()
        return segments

    def topic_ids_known(self, topic_ids: Mapping[str, str]) -> None:
        """The store's topic ids (of every topic that has one): partitions without a
        ``partition.metadata`` get theirs."""
        self._topic_ids = dict(topic_ids)
        self._write_partition_metadata()

    def waiting_for_topic_ids(self) -> bool:
        """Whether a partition has no ``partition.metadata`` for want of its topic's id."""
        return bool(self._without_metadata)

    def _write_partition_metadata(self) -> None:
        for tp in sorted(self._without_metadata):
            topic_id = self._topic_ids.get(tp[0])
            segments = self._segments.get(tp)
            if topic_id is None or segments is None:
                continue
            kafka_files.write_atomically(
                segments.directory / kafka_files.PARTITION_METADATA,
                kafka_files.partition_metadata(topic_id),
            )
            self.stored_topic_ids[tp] = topic_id
            self._without_metadata.discard(tp)

    def partitions(self) -> list[TP]:
        """The partitions with a log here."""
        return sorted(self._segments)

    def lower_recovery_point(self, tp: TP, offset: int) -> None:
        """Kafka must check ``tp``'s log from ``offset`` on at its next start (coordkit changes
        it there): a recovery point above it comes down, on disk at once."""
        if self._recovery_points.get(tp, 0) > offset:
            self._recovery_points[tp] = offset
            self._write_offsets(kafka_files.RECOVERY_POINTS, self._recovery_points)

    def remove(self, tp: TP) -> None:
        """Delete ``tp``'s directory (its topic was deleted)."""
        segments = self._segments.pop(tp, None)
        if segments is not None:
            segments.close()
        for entries in (self._recovery_points, self._log_starts, self.stored_topic_ids):
            entries.pop(tp, None)
        self._without_metadata.discard(tp)
        shutil.rmtree(self.path / partition_dir_name(tp), ignore_errors=True)

    def write_high_watermarks(self, high_watermarks: Mapping[TP, int]) -> None:
        """Kafka's ``replication-offset-checkpoint``: the high watermarks of this broker's
        partitions (as a Kafka broker writes them every 5 s and when it stops)."""
        kept = {tp: min(hw, self._segments[tp].end_offset)
                for tp, hw in high_watermarks.items() if tp in self._segments}  # fmt: skip
        self._write_offsets(kafka_files.HIGH_WATERMARKS, kept)

    def _write_offsets(self, name: str, offsets: Mapping[TP, int]) -> None:
        kafka_files.write_atomically(self.path / name, kafka_files.offsets_checkpoint(offsets))

    def close(self) -> None:
        """Close the segment files and write the recovery points and log start offsets of every
        partition (Kafka's, as it writes them when it stops)."""
        if self._lock.closed:
            return
        segments = getattr(self, "_segments", {})
        try:
            if segments:
                recovery = {tp: self._recovery_points.get(tp, 0) for tp in segments}
                self._write_offsets(kafka_files.RECOVERY_POINTS, recovery)
                # Kafka lists a log start only where it is past the first segment's base offset.
                starts = {tp: min(start, segments[tp].end_offset)
                          for tp, start in self._log_starts.items()
                          if tp in segments and start > segments[tp].log_start}  # fmt: skip
                self._write_offsets(kafka_files.LOG_START_OFFSETS, starts)
        except OSError as exc:
            log.warning("log directory %s: checkpoints not written: %s", self.path, exc.strerror)
        for partition in segments.values():
            partition.close()
        segments.clear()
        with contextlib.suppress(OSError):
            fcntl.lockf(self._lock, fcntl.LOCK_UN)
            fcntl.flock(self._lock, fcntl.LOCK_UN)
        self._lock.close()


def partition_dir_name(tp: TP) -> str:
    """``<topic>-<partition>``; refuses a topic name that is not a legal Kafka name (a name that
    comes from the store is not trusted with a path)."""
    name = f"{tp[0]}-{tp[1]}"
    if _PARTITION_DIR.fullmatch(name) is None or tp[0] in (".", ".."):
        raise LogDirError(f"topic {tp[0]!r}: not a legal topic name for a log directory")
    return name


def scan_batches(
    data: bytes, first_offset: int = 0, *, where: str = "log"
) -> tuple[int, list[tuple[BatchHeader, int]]]:
    """``(bytes of data that are whole, CRC-checked batches with offsets from first_offset
    on, growing; those batches' headers and positions)``. A batch may hold fewer records than
    its offsets span (Kafka's log cleaner removes records of compacted topics).

    :raises LogDirError: a batch of record format v0 or v1 (Kafka's older formats: the log is
        not coordkit's to cut).
    """
    view = memoryview(data)
    position = 0
    expected = first_offset
    headers: list[tuple[BatchHeader, int]] = []
    while position < len(view):
        if len(view) - position > _MAGIC_AT and view[position + _MAGIC_AT] in (0, 1):
            raise LogDirError(
                f"{where}: a batch of record format v{view[position + _MAGIC_AT]} at byte "
                f"{position} (coordkit reads format v2 only); nothing was changed"
            )
        try:
            header, raw = next(records.iter_batches(view[position:], allow_partial_tail=True))
        except (StopIteration, ProtocolError, ValueError):
            break
        if header.base_offset < expected or header.record_count > header.last_offset_delta + 1:
            break
        headers.append((header, position))
        expected = header.last_offset + 1
        position += len(raw)
    return position, headers


def valid_prefix(data: bytes, first_offset: int = 0) -> int:
    """Bytes of ``data`` that are whole, CRC-checked batches whose offsets grow from
    ``first_offset`` (see :func:`scan_batches`)."""
    return scan_batches(data, first_offset)[0]


def broker_log_dir(data_dir: Path, broker_id: int) -> Path:
    """Where broker ``broker_id`` of a server given ``--data-dir data_dir`` keeps its logs."""
    return data_dir / f"broker-{broker_id}"
