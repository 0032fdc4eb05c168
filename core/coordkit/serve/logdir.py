"""A broker's log directory (Kafka's ``log.dirs``): its partition replicas' record batches on disk,
so that a broker — or a whole cluster on a persisted store — restarts with its records.

Layout, as Kafka's: ``<dir>/<topic>-<partition>/00000000000000000000.log``, the partition's record
batches (format v2) one after another, exactly as they sit in memory (offsets and leader epochs
written in). One segment per partition: there is no retention, so the log starts at 0 and the
first segment's name is the only one. The leader epoch cache and the producers' state are rebuilt
from the batches' headers when the log is loaded, as Kafka rebuilds them on recovery.

Writes go to the operating system at every append and truncation (no fsync: as Kafka by default,
what a process crash cannot lose a machine crash can; replication is the guard). Loading checks
every batch (lengths, CRC-32C, offsets following on) and cuts the file at the first that fails:
the torn tail of a process killed mid-write (Kafka's log recovery).

One process at a time: the directory is locked (``.lock``, an ``flock``), and a second process
pointed at it is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import re
import shutil
from pathlib import Path
from typing import BinaryIO

from coordkit.engine.states import TP
from coordkit.errors import CoordkitError
from coordkit.protocol import records
from coordkit.protocol.errors import ProtocolError

log = logging.getLogger("coordkit.serve")

#: The only segment's name: its base offset, 20 digits (Kafka's ``LogFileUtils.filenamePrefixFromOffset``).
SEGMENT_NAME = f"{0:020d}.log"
LOCK_NAME = ".lock"
#: A partition directory's name: a legal topic name (Kafka's ``[a-zA-Z0-9._-]``, at most 249
#: characters), a dash, the partition number.
_PARTITION_DIR = re.compile(r"(?P<topic>[A-Za-z0-9._-]{1,249})-(?P<partition>0|[1-9][0-9]{0,9})")


class LogDirError(CoordkitError):
    """The log directory cannot be used (not a directory, not writable, in use)."""


class SegmentFile:
    """A partition's segment, open for appending."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO = open(path, "ab", buffering=0)  # noqa: SIM115 - kept open

    @property
    def size(self) -> int:
        return self._file.tell()

    def append(self, data: bytes) -> None:
        self._file.write(data)

    def truncate(self, size: int) -> None:
        self._file.truncate(size)
        self._file.seek(size)

    def close(self) -> None:
        self._file.close()


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
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise LogDirError(
                f"log directory {path} is in use by another process (it holds {LOCK_NAME})"
            ) from None
        self._segments: dict[TP, SegmentFile] = {}

    # -- loading ------------------------------------------------------------------------------

    def stored(self) -> dict[TP, bytes]:
        """Every partition's valid batches as found on disk, each file cut after its last valid
        batch. Directories that are not ``<topic>-<partition>`` are left alone (and logged)."""
        found: dict[TP, bytes] = {}
        for entry in sorted(self.path.iterdir()):
            if entry.name == LOCK_NAME:
                continue
            match = _PARTITION_DIR.fullmatch(entry.name)
            if match is None or not entry.is_dir():
                log.warning("log directory %s: ignoring %r (not a partition's directory)",
                            self.path, entry.name)  # fmt: skip
                continue
            tp = (match["topic"], int(match["partition"]))
            segment = entry / SEGMENT_NAME
            data = segment.read_bytes() if segment.exists() else b""
            valid = valid_prefix(data)
            if valid < len(data):
                log.warning("log directory %s: %s-%s: cut %s bytes after offset-ordered batches "
                            "(a torn or corrupt tail)", self.path, *tp, len(data) - valid)  # fmt: skip
                with open(segment, "r+b") as file:
                    file.truncate(valid)
            found[tp] = data[:valid]
        return found

    # -- writing ------------------------------------------------------------------------------

    def segment(self, tp: TP) -> SegmentFile:
        """``tp``'s segment, open for appending (its directory created on first use)."""
        segment = self._segments.get(tp)
        if segment is None:
            directory = self.path / partition_dir_name(tp)
            directory.mkdir(exist_ok=True)
            segment = self._segments[tp] = SegmentFile(directory / SEGMENT_NAME)
        return segment

    def remove(self, tp: TP) -> None:
        """Delete ``tp``'s directory (its topic was deleted)."""
        segment = self._segments.pop(tp, None)
        if segment is not None:
            segment.close()
        shutil.rmtree(self.path / partition_dir_name(tp), ignore_errors=True)

    def close(self) -> None:
        for segment in self._segments.values():
            segment.close()
        self._segments.clear()
        with contextlib.suppress(OSError):
            fcntl.flock(self._lock, fcntl.LOCK_UN)
        self._lock.close()


def partition_dir_name(tp: TP) -> str:
    """``<topic>-<partition>``; refuses a topic name that is not a legal Kafka name (a name that
    comes from the store is not trusted with a path)."""
    name = f"{tp[0]}-{tp[1]}"
    if _PARTITION_DIR.fullmatch(name) is None or tp[0] in (".", ".."):
        raise LogDirError(f"topic {tp[0]!r}: not a legal topic name for a log directory")
    return name


def valid_prefix(data: bytes) -> int:
    """Bytes of ``data`` that are whole, CRC-checked batches whose offsets follow on from 0."""
    view = memoryview(data)
    position = 0
    expected = 0
    while position < len(view):
        try:
            header, raw = next(records.iter_batches(view[position:], allow_partial_tail=True))
        except (StopIteration, ProtocolError, ValueError):
            break
        if header.base_offset != expected or header.record_count != header.last_offset_delta + 1:
            break
        expected = header.last_offset + 1
        position += len(raw)
    return position


def broker_log_dir(data_dir: Path, broker_id: int) -> Path:
    """Where broker ``broker_id`` of a server given ``--data-dir data_dir`` keeps its logs."""
    return data_dir / f"broker-{broker_id}"
