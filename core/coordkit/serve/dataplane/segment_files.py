"""A partition's segment files in a log directory, written as its in-memory log
(:class:`~coordkit.serve.dataplane.log.PartitionLog`, a list of
:class:`~coordkit.serve.dataplane.segment.LogSegment`) changes, in Kafka's layout:

* ``<base offset, 20 digits>.log`` — the segment's record batches, exactly as in memory;
* ``.index`` and ``.timeindex`` — its offset and time indexes in Kafka's binary format
  (:mod:`coordkit.serve.dataplane.index`), entries appended as the segment grows, the files
  written whole when it rolls or is truncated (no preallocation: a file is its entries);
* ``.txnindex`` — its aborted transactions (:mod:`coordkit.serve.dataplane.transaction_index`),
  created at the first, entries appended as markers come;
* ``leader-epoch-checkpoint`` — the log's leader epochs, rewritten when they change;
* ``<offset>.snapshot`` — Kafka's producer state snapshots: coordkit writes none (it rebuilds
  producer state from the batches, as Kafka does without a snapshot), and deletes those past a
  truncation and those of deleted segments.

Loading checks every batch (lengths, CRC-32C, offsets growing) and cuts the log at the first
that fails (the torn tail of a process killed mid-write: Kafka's log recovery), then checks each
segment's index files against its batches: one that is missing or would send a lookup astray is
written again from the batches (Kafka's recovery rebuilds it too); a right one, Kafka's or
coordkit's, is kept.

Recovery points (Kafka's ``recovery-point-offset-checkpoint``: below it, a segment and its
indexes are on disk for good and Kafka does not check them at its start) move up only at an
fsync (:meth:`PartitionSegments.flush`: ``flush.messages``/``flush.ms``, and when the directory
is closed, as Kafka flushes every log when it stops) and down at once before a truncation below
them.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Protocol

from coordkit.engine.states import TP
from coordkit.protocol import records
from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.records import BatchHeader
from coordkit.serve.dataplane import kafka_files, segment_swap
from coordkit.serve.dataplane.index import CorruptIndexError, OffsetIndex, TimeIndex
from coordkit.serve.dataplane.segment import LogSegment
from coordkit.serve.dataplane.transaction_index import (
    CorruptTransactionIndexError,
    TransactionIndex,
)

log = logging.getLogger("coordkit.serve")

SEGMENT_FILE = re.compile(r"(?P<base>[0-9]{20})\.log")
SNAPSHOT_FILE = re.compile(r"(?P<offset>[0-9]{20})\.snapshot")
#: What Kafka keeps beside a segment.
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")
#: Where a batch header keeps its format (magic) byte.
_MAGIC_AT = 16


class OldRecordFormatError(Exception):
    """A segment holds a batch of record format v0 or v1 (the message says where)."""


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


class RecoveryPoints(Protocol):
    """What a partition's files need of their log directory (a
    :class:`~coordkit.serve.dataplane.logdir.LogDirectory`): where it is, and its recovery
    points (Kafka's ``recovery-point-offset-checkpoint``)."""

    path: Path

    def recovery_point(self, tp: TP) -> int: ...

    def lower_recovery_point(self, tp: TP, offset: int) -> None: ...

    def raise_recovery_point(self, tp: TP, offset: int) -> None: ...


class PartitionSegments:
    """``tp``'s files under ``directory``, kept as its log changes."""

    def __init__(self, log_dir: RecoveryPoints, tp: TP, directory: Path) -> None:
        self._log_dir = log_dir
        self.tp = tp
        self.directory = directory
        #: Base offsets of the segment files, in order.
        self.bases: list[int] = []
        #: Index entries on disk per segment (offset index, time index); a segment missing
        #: here has files that are not its in-memory indexes (written whole at its next change).
        self._indexed: dict[int, tuple[int, int]] = {}
        #: Transaction index entries on disk per segment.
        self._txn_indexed: dict[int, int] = {}
        self._epochs: list[tuple[int, int]] | None = None
        self._active: BinaryIO | None = None
        self._active_base = -1
        #: The log's start and end (for the checkpoints written at close).
        self.log_start = 0
        self.end_offset = 0

    # -- loading ------------------------------------------------------------------------------

    def load(self, first_offset: int = 0) -> list[tuple[int, bytes]]:
        """Every segment's valid batches, ``(base offset, bytes)`` in order; a segment is cut
        after its last valid batch and the segments after it are deleted (Kafka's recovery).

        :raises OldRecordFormatError: a batch of record format v0 or v1.
        """
        segment_swap.recover(self.directory)
        found: list[tuple[int, Path]] = []
        for entry in self.directory.iterdir():
            match = SEGMENT_FILE.fullmatch(entry.name)
            if match is not None and entry.is_file():
                found.append((int(match["base"]), entry))
        found.sort()
        loaded: list[tuple[int, bytes]] = []
        expected = first_offset
        for number, (base, path) in enumerate(found):
            content = path.read_bytes()
            valid, headers = scan_batches(content, max(base, expected), where=str(path))
            if headers:
                expected = headers[-1][0].last_offset + 1
            self.bases.append(base)
            loaded.append((base, content[:valid]))
            if valid < len(content):
                log.warning("log directory %s: %s-%s: cut %s bytes of %s after its last whole "
                            "batch (a torn or corrupt tail)", self._log_dir.path, *self.tp,
                            len(content) - valid, path.name)  # fmt: skip
                cut_at = headers[-1][0].last_offset + 1 if headers else base
                self._log_dir.lower_recovery_point(self.tp, cut_at)
                with open(path, "r+b") as file:
                    file.truncate(valid)
                for _, later in found[number + 1 :]:
                    log.warning("log directory %s: %s-%s: deleting %s, after the cut",
                                self._log_dir.path, *self.tp, later.name)  # fmt: skip
                    self._unlink_segment(later)
                self.delete_snapshots_after(cut_at)
                break
        return loaded

    def check_indexes(self, segments: Sequence[LogSegment]) -> None:
        """Keep each segment's index files that agree with its batches; write the others again
        (missing, not whole entries, or an entry that points a lookup astray)."""
        for segment in segments:
            where = self._stem(segment.base_offset)
            try:
                offsets = OffsetIndex.parse(self._read(where + ".index"), segment.base_offset,
                                            where + ".index")  # fmt: skip
                times = TimeIndex.parse(self._read(where + ".timeindex"), segment.base_offset,
                                        where + ".timeindex")  # fmt: skip
                _check_against(segment, offsets, times)
            except (FileNotFoundError, CorruptIndexError) as exc:
                if not isinstance(exc, FileNotFoundError):
                    log.warning("log directory %s: %s-%s: %s; rebuilding the indexes",
                                self._log_dir.path, *self.tp, exc)  # fmt: skip
                self.write_indexes(segment)
                continue
            if offsets == segment.offset_index and times == segment.time_index:
                self._indexed[segment.base_offset] = (len(offsets), len(times))
            self._check_txn_index(segment)

    def _check_txn_index(self, segment: LogSegment) -> None:
        """Keep a ``.txnindex`` that holds the aborted transactions the segment's markers end
        (rebuilt from its batches at load); write it again otherwise."""
        path = self.directory / f"{self._stem(segment.base_offset)}.txnindex"
        try:
            found = TransactionIndex.parse(path.read_bytes(), str(path))
        except FileNotFoundError:
            found = TransactionIndex()
        except CorruptTransactionIndexError as exc:
            log.warning("log directory %s: %s-%s: %s; rebuilding it", self._log_dir.path,
                        *self.tp, exc)  # fmt: skip
            found = None
        if found != segment.txn_index:
            self._write_txn_index(segment)
        self._txn_indexed[segment.base_offset] = len(segment.txn_index)

    def _read(self, name: str) -> bytes:
        return (self.directory / name).read_bytes()

    # -- what PartitionLog writes through -------------------------------------------------------

    def append(self, segment: LogSegment, batch: bytes) -> None:
        """``batch`` was appended to ``segment`` (the active one)."""
        if self._active_base != segment.base_offset:
            self._close_active()
            if segment.base_offset not in self.bases:
                self._create(segment.base_offset)
            self._active = open(self._path(segment.base_offset), "ab", buffering=0)  # noqa: SIM115 - kept open
            self._active_base = segment.base_offset
        assert self._active is not None
        self._active.write(batch)
        self._sync_indexes(segment)
        written = self._txn_indexed.get(segment.base_offset, 0)
        if len(segment.txn_index) > written:
            with open(self.directory / f"{self._stem(segment.base_offset)}.txnindex", "ab") as file:
                file.write(segment.txn_index.entry_bytes(written))
            self._txn_indexed[segment.base_offset] = len(segment.txn_index)

    def roll(self, inactive: LogSegment | None, new_base: int) -> None:
        """A new active segment at ``new_base``; ``inactive``'s indexes written whole (with the
        time index's last entry :meth:`LogSegment.on_become_inactive` added)."""
        self._close_active()
        if inactive is not None and inactive.base_offset in self.bases:
            self.write_indexes(inactive)
        if new_base not in self.bases:
            self._create(new_base)

    def truncated(self, kept: Sequence[LogSegment]) -> None:
        """The log was truncated: its segments are now ``kept`` (the last one cut)."""
        self._close_active()
        last = kept[-1]
        for base in [b for b in self.bases if b > last.base_offset]:
            self._unlink_segment(self._path(base))
        if last.base_offset not in self.bases:
            self._create(last.base_offset)
        with open(self._path(last.base_offset), "r+b") as file:
            file.truncate(last.size)
        self.write_indexes(last)
        self.delete_snapshots_after(last.next_offset)
        self._log_dir.lower_recovery_point(self.tp, last.next_offset)

    def started_at(self, gone: Sequence[int], offset: int) -> None:
        """The log dropped segments ``gone`` and starts again, empty, at ``offset``."""
        self.delete_segments(gone)
        self.delete_snapshots_after(offset)
        self._log_dir.lower_recovery_point(self.tp, offset)
        self.roll(None, offset)
        self.log_start = self.end_offset = offset

    def delete_segments(self, bases: Sequence[int]) -> None:
        """Delete the files of segments ``bases`` (retention, or the log started again); Kafka
        renames them ``.deleted`` and deletes them a minute later; here at once."""
        if self._active_base in bases:
            self._close_active()
        for base in bases:
            if base in self.bases:
                self._unlink_segment(self._path(base))
            (self.directory / f"{base:020d}.snapshot").unlink(missing_ok=True)

    def replace_segments(self, cleaned: LogSegment, old_bases: Sequence[int]) -> None:
        """The log cleaner's ``cleaned`` segment replaces the (inactive) segments ``old_bases``,
        the first at its base offset, through Kafka's ``.cleaned`` and ``.swap`` files
        (:mod:`~coordkit.serve.dataplane.segment_swap`: a crash at any step leaves a whole log)."""
        stem = self._stem(cleaned.base_offset)
        segment_swap.write_cleaned(self.directory, stem, {
            ".log": b"".join(cleaned.batches),
            ".index": cleaned.offset_index.entry_bytes(),
            ".timeindex": cleaned.time_index.entry_bytes(),
            **({".txnindex": cleaned.txn_index.entry_bytes()} if cleaned.txn_index else {}),
        })  # fmt: skip
        segment_swap.cleaned_to_swap(self.directory, stem)
        for base in old_bases:
            if base in self.bases:
                self._unlink_segment(self._path(base))
        segment_swap.swap_to_final(self.directory, stem)
        self.bases.append(cleaned.base_offset)
        self.bases.sort()
        self._indexed[cleaned.base_offset] = (len(cleaned.offset_index), len(cleaned.time_index))
        self._txn_indexed[cleaned.base_offset] = len(cleaned.txn_index)
        # The cleaned segment was fsynced before its swap; the recovery point need not move.

    def epochs_changed(self, epochs: Sequence[tuple[int, int]]) -> None:
        """Write ``leader-epoch-checkpoint`` when ``epochs`` are not what it holds."""
        wanted = [(epoch, start) for epoch, start in epochs if epoch >= 0]
        if self._epochs is None:
            path = self.directory / kafka_files.LEADER_EPOCHS
            try:
                self._epochs = kafka_files.read_leader_epoch_checkpoint(
                    path.read_bytes(), str(path)
                )
            except (OSError, kafka_files.KafkaFileError):
                self._epochs = None
        if wanted != self._epochs:
            kafka_files.write_atomically(
                self.directory / kafka_files.LEADER_EPOCHS,
                kafka_files.leader_epoch_checkpoint(wanted),
            )
            self._epochs = wanted

    def flush(self, end_offset: int | None = None) -> None:
        """fsync the files of the segments from the recovery point on, then raise the recovery
        point to ``end_offset`` (default: the log end; Kafka's ``LocalLog.flush`` and
        ``markFlushed``)."""
        end = self.end_offset if end_offset is None else end_offset
        recovery = self._log_dir.recovery_point(self.tp)
        if self._active is not None:
            self._active.flush()
        for number, base in enumerate(self.bases):
            following = self.bases[number + 1] if number + 1 < len(self.bases) else None
            if following is not None and following <= recovery:
                continue
            for suffix in (".log", ".index", ".timeindex"):
                path = self.directory / f"{self._stem(base)}{suffix}"
                if path.exists():
                    descriptor = os.open(path, os.O_RDONLY)
                    try:
                        os.fsync(descriptor)
                    finally:
                        os.close(descriptor)
        self._log_dir.raise_recovery_point(self.tp, end)

    def close(self) -> None:
        self._close_active()

    # -- files ----------------------------------------------------------------------------------

    def write_indexes(self, segment: LogSegment) -> None:
        """Write ``segment``'s index files whole, from memory."""
        stem = self._stem(segment.base_offset)
        (self.directory / f"{stem}.index").write_bytes(segment.offset_index.entry_bytes())
        (self.directory / f"{stem}.timeindex").write_bytes(segment.time_index.entry_bytes())
        self._indexed[segment.base_offset] = (len(segment.offset_index), len(segment.time_index))
        self._write_txn_index(segment)

    def _write_txn_index(self, segment: LogSegment) -> None:
        """Write ``segment``'s ``.txnindex`` whole (none while it has no entry, as Kafka)."""
        path = self.directory / f"{self._stem(segment.base_offset)}.txnindex"
        if segment.txn_index or path.exists():
            path.write_bytes(segment.txn_index.entry_bytes())
        self._txn_indexed[segment.base_offset] = len(segment.txn_index)

    def _sync_indexes(self, segment: LogSegment) -> None:
        written = self._indexed.get(segment.base_offset)
        if written is None:
            self.write_indexes(segment)
            return
        offsets, times = written
        if (offsets, times) == (len(segment.offset_index), len(segment.time_index)):
            return
        stem = self._stem(segment.base_offset)
        if len(segment.offset_index) > offsets:
            with open(self.directory / f"{stem}.index", "ab") as file:
                file.write(segment.offset_index.entry_bytes(offsets))
        if len(segment.time_index) > times:
            with open(self.directory / f"{stem}.timeindex", "ab") as file:
                file.write(segment.time_index.entry_bytes(times))
        self._indexed[segment.base_offset] = (len(segment.offset_index), len(segment.time_index))

    def _create(self, base: int) -> None:
        """A new empty segment: its ``.log`` and empty indexes, as Kafka creates them."""
        stem = self._stem(base)
        for suffix in (".log", ".index", ".timeindex"):
            (self.directory / f"{stem}{suffix}").write_bytes(b"")
        self.bases.append(base)
        self.bases.sort()
        self._indexed[base] = (0, 0)

    def _unlink_segment(self, path: Path) -> None:
        stem = path.name.removesuffix(".log")
        path.unlink(missing_ok=True)
        for suffix in INDEX_SUFFIXES:
            (self.directory / f"{stem}{suffix}").unlink(missing_ok=True)
        base = int(stem)
        if base in self.bases:
            self.bases.remove(base)
        self._indexed.pop(base, None)
        self._txn_indexed.pop(base, None)

    def delete_snapshots_after(self, offset: int) -> None:
        """Producer state snapshots past ``offset`` describe records no longer in the log
        (Kafka deletes them on truncation too)."""
        for entry in self.directory.iterdir():
            match = SNAPSHOT_FILE.fullmatch(entry.name)
            if match is not None and int(match["offset"]) > offset:
                entry.unlink(missing_ok=True)

    def _close_active(self) -> None:
        if self._active is not None:
            self._active.close()
            self._active = None
        self._active_base = -1

    def _stem(self, base: int) -> str:
        return f"{base:020d}"

    def _path(self, base: int) -> Path:
        return self.directory / segment_name(base)


def _check_against(segment: LogSegment, offsets: OffsetIndex, times: TimeIndex) -> None:
    """Every entry as a lookup relies on it: an offset entry at a batch's first byte, every
    batch before it ending below its offset; a time entry at an offset of the segment whose
    batch brought that timestamp, the largest so far.

    :raises CorruptIndexError: the first entry that is not.
    """
    running = -1
    running_max: list[int] = []
    for header in segment.headers:
        running = max(running, header.max_timestamp)
        running_max.append(running)
    for offset, position in zip(offsets.offsets, offsets.positions, strict=True):
        slot = _slot_at(segment.positions, position)
        if slot is None or (slot > 0 and segment.last_offsets[slot - 1] >= offset):
            raise CorruptIndexError(f"offset index entry {offset} at byte {position} is astray")
    for timestamp, offset in zip(times.timestamps, times.offsets, strict=True):
        slot = segment.slot_of(offset)
        if slot >= len(segment.headers) or running_max[slot] != timestamp:
            raise CorruptIndexError(f"time index entry {timestamp} at offset {offset} is astray")


def _slot_at(positions: Sequence[int], position: int) -> int | None:
    slot = bisect.bisect_left(positions, position)
    return slot if slot < len(positions) and positions[slot] == position else None


def scan_batches(
    data: bytes, first_offset: int = 0, *, where: str = "log"
) -> tuple[int, list[tuple[BatchHeader, int]]]:
    """``(bytes of data that are whole, CRC-checked batches with offsets from first_offset
    on, growing; those batches' headers and positions)``. A batch may hold fewer records than
    its offsets span (Kafka's log cleaner removes records of compacted topics).

    :raises OldRecordFormatError: a batch of record format v0 or v1 (Kafka's older formats: the
        log is not coordkit's to cut).
    """
    view = memoryview(data)
    position = 0
    expected = first_offset
    headers: list[tuple[BatchHeader, int]] = []
    while position < len(view):
        if len(view) - position > _MAGIC_AT and view[position + _MAGIC_AT] in (0, 1):
            raise OldRecordFormatError(
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
