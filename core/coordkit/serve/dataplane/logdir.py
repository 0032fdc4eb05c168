"""A broker's log directory (Kafka's ``log.dirs``): its partition replicas' record batches on disk,
so that a broker — or a whole cluster on a persisted store — restarts with its records, and a
Kafka 3.9 broker started on the directory serves them too (and the other way round).

Layout, as Kafka's: ``<dir>/<topic>-<partition>/`` holds a partition's segments
(``<base offset, 20 digits>.log`` with its ``.index`` and ``.timeindex``), written as its
in-memory log changes (:mod:`coordkit.serve.dataplane.segment_files`). The leader epoch cache and
the producers' state are rebuilt from the batches' headers when the log is loaded, as Kafka
rebuilds them on recovery.

Kafka's other files (:mod:`coordkit.serve.dataplane.kafka_files`), so that a Kafka broker accepts the
directory and a directory Kafka wrote stays right for Kafka after coordkit used it:

* ``meta.properties`` — written, or checked against the broker id and the store's cluster id
  when it exists (:meth:`LogDirectory.claim`: a directory of another broker or cluster is
  refused, as Kafka refuses it);
* ``partition.metadata`` — each partition's topic id, from the store's topic node;
* ``leader-epoch-checkpoint`` — each partition's leader epochs, rewritten when they change;
* ``recovery-point-offset-checkpoint`` — from where Kafka must check (recover) a log when it
  starts: raised to a log's end when its files are fsynced (``flush.messages``, ``flush.ms``,
  and when the directory is closed, as Kafka flushes at its shutdown), lowered at once before a
  truncation below it; Kafka trusts the segments and indexes below it;
* ``replication-offset-checkpoint`` (high watermarks) and ``log-start-offset-checkpoint`` (a
  log start past the first segment's base offset: a follower that followed its leader's),
  written when the directory is closed; ``cleaner-offset-checkpoint``, where each compacted
  log's next cleaning starts (:mod:`coordkit.serve.dataplane.cleaner_manager`), written after
  each cleaning (empty at first, as Kafka creates it).

Kafka's clean-shutdown marker is deleted when the directory is opened (coordkit writes no
producer state snapshots, which a Kafka broker after a clean shutdown would not rebuild).

Writes go to the operating system at every append and truncation (fsync only as configured: as
Kafka by default, what a process crash cannot lose a machine crash can; replication is the
guard). A batch of an older record format (v0, v1) is not read, and the directory is refused
rather than cut.

One process at a time: the directory is locked (``.lock``) with ``flock`` and with a POSIX record
lock, the kind Java's ``FileChannel.tryLock`` takes, so a second ``coordkit serve`` and a Kafka
broker pointed at it are both refused.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import logging
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from coordkit.engine.states import TP
from coordkit.errors import CoordkitError
from coordkit.serve.dataplane import kafka_files
from coordkit.serve.dataplane.kafka_files import KafkaFileError
from coordkit.serve.dataplane.segment_files import (
    OldRecordFormatError,
    PartitionSegments,
    scan_batches,
    segment_name,
)

__all__ = ["SEGMENT_NAME", "LogDirError", "LogDirectory", "PartitionSegments", "segment_name",
           "valid_prefix"]  # fmt: skip

log = logging.getLogger("coordkit.serve")

#: The first segment's name: its base offset, 20 digits (``LogFileUtils.filenamePrefixFromOffset``).
SEGMENT_NAME = segment_name(0)
LOCK_NAME = ".lock"
#: A partition directory's name: a legal topic name (Kafka's ``[a-zA-Z0-9._-]``, at most 249
#: characters), a dash, the partition number.
_PARTITION_DIR = re.compile(r"(?P<topic>[A-Za-z0-9._-]{1,249})-(?P<partition>0|[1-9][0-9]{0,9})")


class LogDirError(CoordkitError):
    """The log directory cannot be used (not a directory, not writable, in use, another
    broker's or cluster's, a record format coordkit does not read)."""


class LogDirectory:
    """Broker logs under ``path`` (created when missing), locked for this process."""

    def __init__(self, path: Path) -> None:
        self.path = path
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

    def stored(self) -> dict[TP, list[tuple[int, bytes]]]:
        """Every partition's valid batches as found on disk, by segment (``(base offset,
        bytes)``), each log cut after its last valid batch. Kafka's files are read where
        coordkit needs them; other entries that are not ``<topic>-<partition>`` directories are
        left alone (and logged).

        :raises LogDirError: a log holds batches of an older record format.
        """
        # Kafka's marker says its logs were flushed and indexed as they are: no longer so.
        (self.path / kafka_files.CLEAN_SHUTDOWN).unlink(missing_ok=True)
        found: dict[TP, list[tuple[int, bytes]]] = {}
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
            try:
                found[tp] = segments.load()
            except OldRecordFormatError as exc:
                raise LogDirError(str(exc)) from None
            self._read_partition_metadata(tp, entry)
        return found

    def cleaner_offsets(self) -> dict[TP, int]:
        """``cleaner-offset-checkpoint``: where each compacted log's next cleaning starts."""
        return self._read_offsets(kafka_files.CLEANER_OFFSETS)

    def write_cleaner_offsets(self, offsets: Mapping[TP, int]) -> None:
        self._write_offsets(kafka_files.CLEANER_OFFSETS, offsets)

    def checkpointed_log_start(self, tp: TP) -> int:
        """``tp``'s log start as ``log-start-offset-checkpoint`` has it (0: not listed)."""
        return self._log_starts.get(tp, 0)

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

    def recovery_point(self, tp: TP) -> int:
        return self._recovery_points.get(tp, 0)

    def lower_recovery_point(self, tp: TP, offset: int) -> None:
        """Kafka must check ``tp``'s log from ``offset`` on at its next start (coordkit cuts it
        there): a recovery point above it comes down, on disk at once."""
        if self._recovery_points.get(tp, 0) > offset:
            self._recovery_points[tp] = offset
            self._write_offsets(kafka_files.RECOVERY_POINTS, self._recovery_points)

    def raise_recovery_point(self, tp: TP, offset: int) -> None:
        """``tp``'s files are fsynced up to ``offset`` (written to the checkpoint at close, as
        Kafka writes it periodically and at its shutdown)."""
        self._recovery_points[tp] = max(self._recovery_points.get(tp, 0), offset)

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
        """fsync every partition's files and write the recovery points (their log ends now) and
        log start offsets of every partition, as Kafka flushes and checkpoints when it stops;
        then close the segment files."""
        if self._lock.closed:
            return
        segments = getattr(self, "_segments", {})
        try:
            for partition in segments.values():
                partition.flush()
            if segments:
                recovery = {tp: min(self._recovery_points.get(tp, 0), segments[tp].end_offset)
                            for tp in segments}  # fmt: skip
                self._write_offsets(kafka_files.RECOVERY_POINTS, recovery)
                # Kafka lists a log start only where it is past the first segment's base offset.
                starts = {tp: partition.log_start for tp, partition in segments.items()
                          if partition.bases and partition.log_start > partition.bases[0]}  # fmt: skip
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


def valid_prefix(data: bytes, first_offset: int = 0) -> int:
    """Bytes of ``data`` that are whole, CRC-checked batches whose offsets grow from
    ``first_offset`` (see :func:`~coordkit.serve.dataplane.segment_files.scan_batches`)."""
    try:
        return scan_batches(data, first_offset)[0]
    except OldRecordFormatError as exc:
        raise LogDirError(str(exc)) from None


def broker_log_dir(data_dir: Path, broker_id: int) -> Path:
    """Where broker ``broker_id`` of a server given ``--data-dir data_dir`` keeps its logs."""
    return data_dir / f"broker-{broker_id}"
