"""Where a study comes from: a study file, a store, or a store with a file beside it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from coordkit.store.urls import redact
from coordkit_lab.study.file import StudyError, load_study, parse_study
from coordkit_lab.study.model import Study
from coordkit_lab.study.snapshot import snapshot_store

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager


def open_study(
    manager: PluginManager, *, workload_file: Path | None = None, from_store: str | None = None
) -> tuple[Study, tuple[str, ...]]:
    """The study ``workload_file`` describes, of the cluster in ``from_store``, or of that
    cluster with the file's additions; and notes on what a store snapshot left out.

    :raises StudyError: one line naming the file or the store (credentials redacted) and the field.
    """
    if from_store is None:
        if workload_file is None:
            raise StudyError("a study needs --workload-file FILE or --from-store URL")
        return load_study(workload_file, manager), ()
    snapshot = snapshot_store(from_store)
    if workload_file is not None:
        return load_study(workload_file, manager, base=snapshot.document), snapshot.notes
    where = f"--from-store {redact(from_store)}"
    if not snapshot.groups:
        raise StudyError(
            f"{where}: no legacy consumer group is registered (no /consumers/G/ids/C node); "
            "give the members in a study file beside it: --workload-file FILE"
        )
    return parse_study(snapshot.document, manager, where=where), snapshot.notes
