"""How the log cleaner's new segment takes the place of the ones it cleaned on disk, so that a
crash at any step leaves a readable log (Kafka's ``UnifiedLog.replaceSegments`` and the swap
recovery of its ``LogLoader``):

1. the cleaned segment is written beside the old ones as ``<base>.log.cleaned`` (with
   ``.index.cleaned`` and ``.timeindex.cleaned``) and fsynced;
2. each of its files is renamed ``.swap`` — from here on the cleaned segment is the log's;
3. the old segments' files are deleted;
4. the ``.swap`` files are renamed to their final names.

When a directory is loaded (:func:`recover`), ``.cleaned`` files are deleted (a crash before
step 2: the old segments are whole), and each ``<base>.log.swap`` replaces every segment whose
base offset lies between its base and its next offset (a crash after step 2), then takes its
final name. Kafka's ``.deleted`` files (old segments it deletes a minute later) are deleted.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from coordkit.protocol import records
from coordkit.protocol.errors import ProtocolError

log = logging.getLogger("coordkit.serve")

CLEANED = ".cleaned"
SWAP = ".swap"
DELETED = ".deleted"
#: A segment's own files; what Kafka may keep beside its ``.log``.
SUFFIXES = (".log", ".index", ".timeindex")
#: Swapped when the cleaned segment has one (its aborted transactions).
_TXN_INDEX = ".txnindex"
_BESIDE = (".index", ".timeindex", ".txnindex")
_SEGMENT = re.compile(r"(?P<base>[0-9]{20})\.log")


def write_cleaned(directory: Path, stem: str, contents: dict[str, bytes]) -> None:
    """Step 1: ``<stem><suffix>.cleaned`` for each of ``contents`` (suffix → bytes), fsynced."""
    for suffix, data in contents.items():
        path = directory / f"{stem}{suffix}{CLEANED}"
        with open(path, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())


def cleaned_to_swap(directory: Path, stem: str) -> None:
    """Step 2: the cleaned files become ``.swap`` files (the ``.log`` last: its rename is the
    commit point, and an index without its log is deleted at recovery)."""
    for suffix in (*SUFFIXES[1:], _TXN_INDEX, SUFFIXES[0]):
        cleaned = directory / f"{stem}{suffix}{CLEANED}"
        if cleaned.exists():
            os.replace(cleaned, directory / f"{stem}{suffix}{SWAP}")
    _sync_directory(directory)


def swap_to_final(directory: Path, stem: str) -> None:
    """Step 4: the ``.swap`` files take their final names (the ``.log`` last)."""
    for suffix in (*SUFFIXES[1:], _TXN_INDEX, SUFFIXES[0]):
        swapped = directory / f"{stem}{suffix}{SWAP}"
        if swapped.exists():
            os.replace(swapped, directory / f"{stem}{suffix}")
    _sync_directory(directory)


def recover(directory: Path) -> None:
    """Finish or undo a replacement a crash interrupted (see the module's steps)."""
    swaps: list[int] = []
    for entry in list(directory.iterdir()):
        name = entry.name
        if name.endswith((CLEANED, DELETED)):
            log.info("log directory %s: deleting %s (a cleaning or deletion a stop interrupted)",
                     directory, name)  # fmt: skip
            entry.unlink(missing_ok=True)
        elif name.endswith(".log" + SWAP):
            swaps.append(int(name[:20]))
        elif name.endswith(SWAP) and not (directory / f"{name[:20]}.log{SWAP}").exists():
            entry.unlink(missing_ok=True)  # an index whose log never became a swap file
    for base in sorted(swaps):
        stem = f"{base:020d}"
        next_offset = _next_offset(directory / f"{stem}.log{SWAP}", base)
        for entry in list(directory.iterdir()):
            match = _SEGMENT.fullmatch(entry.name)
            if match is not None and base <= int(match["base"]) < next_offset:
                old = entry.name.removesuffix(".log")
                entry.unlink(missing_ok=True)
                for suffix in _BESIDE:
                    (directory / f"{old}{suffix}").unlink(missing_ok=True)
        log.info("log directory %s: completing the swap of cleaned segment %s (offsets %s to %s)",
                 directory, stem, base, next_offset - 1)  # fmt: skip
        swap_to_final(directory, stem)


def _next_offset(path: Path, base: int) -> int:
    """The offset after the last batch of the (fsynced, whole) segment file ``path``; an empty
    one covers only its base offset (Kafka's ``readNextOffset``)."""
    next_offset = base + 1
    try:
        for header, _raw in records.iter_batches(path.read_bytes(), verify_crc=False):
            next_offset = header.last_offset + 1
    except ProtocolError:
        pass
    return next_offset


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
