"""Studies: the user's own cluster and groups, run by the lab (``coordkit lab run
--workload-file FILE`` / ``--from-store URL``).

* :mod:`~coordkit_lab.study.model`: :class:`Study` — topics, groups with their events,
  strategies, seed, replicates, metrics — its canonical document and its scenarios;
* :mod:`~coordkit_lab.study.file`: study files (TOML or JSON) read and checked field by field,
  merged with a store snapshot, and the effective study written beside the report;
* :mod:`~coordkit_lab.study.snapshot`: a cluster in Kafka's layout read from its store, read-only;
* :mod:`~coordkit_lab.study.identity`: which study a report directory holds (``--out``/``--force``);
* :mod:`~coordkit_lab.study.source`: a study from a file, a store, or a store and a file.

The group itself runs as the ``study`` workload of the assignors' lab
(:mod:`coordkit_assignors.lab.study`, where the case format and its parser live).
"""

from coordkit_lab.study.file import (
    MAX_STUDY_BYTES,
    STUDY_FILE,
    StudyError,
    load_study,
    merge,
    parse_study,
    read_document,
    study_json,
    with_overrides,
    write_study,
)
from coordkit_lab.study.identity import (
    preset_selection,
    refuse_other_study,
    run_info,
    selection_id,
    study_selection,
)
from coordkit_lab.study.model import Study, StudyGroup
from coordkit_lab.study.snapshot import StoreSnapshot, read_cluster, snapshot_store
from coordkit_lab.study.source import open_study

__all__ = [
    "MAX_STUDY_BYTES",
    "STUDY_FILE",
    "StoreSnapshot",
    "Study",
    "StudyError",
    "StudyGroup",
    "load_study",
    "merge",
    "open_study",
    "parse_study",
    "preset_selection",
    "read_cluster",
    "read_document",
    "refuse_other_study",
    "run_info",
    "selection_id",
    "snapshot_store",
    "study_json",
    "study_selection",
    "with_overrides",
    "write_study",
]
