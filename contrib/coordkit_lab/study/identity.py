"""Which study a report belongs to, so ``--out`` never silently replaces another study's report.

A run records its *selection* in ``summary.json``'s ``run`` section — for a preset: the preset,
workloads, strategies, seed and replicates; for a study: its name, the SHA-256 of what it studies
(:meth:`~coordkit_lab.study.model.Study.content_sha256`: topics, groups, events), strategies, seed,
replicates and metrics — and ``selection_id``, a hash of it. A later run into the same directory goes ahead when the ids
match (the same study again); otherwise it is refused, before anything starts, in one line naming
the directory and what differs, unless ``--force``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from coordkit.lab import LabError
from coordkit.support import jsontext
from coordkit_assignors.lab.study import canonical_json
from coordkit_lab.report import SUMMARY_FILE
from coordkit_lab.scenarios import ScenarioSpec
from coordkit_lab.study.model import Study

SELECTION = "selection"
SELECTION_ID = "selection_id"


def preset_selection(
    preset: str, specs: Sequence[ScenarioSpec], seed: int, replicates: int | None
) -> dict[str, Any]:
    return {
        "preset": preset,
        "workloads": sorted({s.workload for s in specs}),
        "strategies": sorted({s.strategy for s in specs}),
        "seed": seed,
        "replicates": replicates,
    }


def study_selection(study: Study) -> dict[str, Any]:
    return {
        "study": study.name,
        "content_sha256": study.content_sha256(),
        "strategies": list(study.strategies),
        "seed": study.seed,
        "replicates": study.replicates,
        "metrics": list(study.metrics),
    }


def selection_id(selection: Mapping[str, Any]) -> str:
    text = canonical_json({k: selection[k] for k in sorted(selection)})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_info(selection: Mapping[str, Any]) -> dict[str, Any]:
    """What a run adds to ``summary.json``'s ``run`` section to be recognised later."""
    return {SELECTION: dict(selection), SELECTION_ID: selection_id(selection)}


def _shown(value: object) -> str:
    if value is None:
        return "default"
    if isinstance(value, list):
        text = ", ".join(map(str, value)) or "none"
        return text if len(text) <= 60 else f"{len(value)} of them"
    return str(value)


def _what(selection: Mapping[str, Any]) -> str:
    if "study" in selection:
        return f"study {_shown(selection['study'])!r}"
    return f"preset {_shown(selection.get('preset'))!r}"


def _differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    if ("study" in old) != ("study" in new):
        return [f"{_what(old)} there, {_what(new)} here"]
    out = []
    for key in dict.fromkeys([*new, *old]):
        if old.get(key) == new.get(key):
            continue
        if key == "content_sha256":
            out.append("the study's topics, groups or events")
        elif key not in old:
            out.append(f"{key} {_shown(new[key])} here, none there")
        elif key not in new:
            out.append(f"{key} {_shown(old[key])} there, none here")
        else:
            out.append(f"{key} {_shown(old[key])} there, {_shown(new[key])} here")
    return out


def _recorded_run(path: Path) -> Mapping[str, Any] | None:
    """The ``run`` section of the summary at ``path``; ``None`` when it is not a lab summary.
    Only this section is read: a report of another lab version is still recognised."""
    try:
        if path.stat().st_size > jsontext.MAX_BYTES:
            return None
        data = jsontext.loads(path.read_bytes())
    except (OSError, jsontext.JSONTextError):
        return None
    run = data.get("run") if isinstance(data, dict) else None
    return run if isinstance(run, dict) else None


def refuse_other_study(out: Path, selection: Mapping[str, Any], *, force: bool = False) -> None:
    """Refuse (:class:`LabError`) to write into ``out`` when it holds the report of another study,
    unless ``force``; the message names the directory and what differs."""
    if force or not (out / SUMMARY_FILE).is_file():
        return
    advice = "pass --force to replace it, or choose another --out"
    run = _recorded_run(out / SUMMARY_FILE)
    if run is None:
        raise LabError(f"--out {out}: holds a {SUMMARY_FILE} that is not a lab report; {advice}")
    if run.get(SELECTION_ID) == selection_id(selection):
        return
    old = run.get(SELECTION)
    if not isinstance(old, dict):
        raise LabError(f"--out {out}: holds a report that does not record its study; {advice}")
    differences = _differences(old, selection) or ["its selection"]
    raise LabError(
        f"--out {out}: holds the report of another study ({'; '.join(differences)}); {advice}"
    )
