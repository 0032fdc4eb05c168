"""Study files: read (TOML or JSON), check every field, write the effective study.

A study file extends the group format ``coordkit assign`` reads (``topics``, ``members``) with
``events`` and how to compare (``strategies``, ``seed``, ``replicates``, ``metrics``), a ``name``
and a ``description``; several groups sharing the topics go under ``groups.NAME.members`` /
``groups.NAME.events`` (top-level ``events`` then apply to every group first). The README's "Your
own cluster and study files" documents it with an example.

Nothing in a file is trusted: its size is bounded before it is read (:data:`MAX_STUDY_BYTES`),
JSON goes through :func:`coordkit.support.jsontext.loads`, TOML through :mod:`tomllib` with its nesting and
integers bounded afterwards, and every refusal is one :class:`StudyError` line naming the file and
the field: ``study.toml: members.C0.topics[2]: topic 't9' is not defined (topics: t0, t1)``.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coordkit.errors import AssignmentInputError
from coordkit.lab import LabError
from coordkit.support import jsontext
from coordkit.support.numbers import MAX_INT64
from coordkit_assignors.lab.simulation import ASSIGNMENT_KIND
from coordkit_assignors.lab.study import (
    MAX_CASE_BYTES,
    STUDY_WORKLOAD,
    check_object,
    fail,
    join_path,
    kind_of,
    object_pairs,
    parse_group_case,
    text,
)
from coordkit_lab.scenarios import DEFAULT_SEED
from coordkit_lab.study.model import Study, StudyGroup

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager

#: The largest study file read (a case travels in every scenario of its group).
MAX_STUDY_BYTES = MAX_CASE_BYTES
#: Deepest nesting accepted (a study nests five levels: groups.G.events[i].replica_racks[p]).
MAX_DEPTH = jsontext.MAX_DEPTH
#: TOML's integers are 64-bit; tomllib reads any size, which a float conversion cannot take.
MIN_INTEGER, MAX_INTEGER = -(2**63), 2**63 - 1
#: Runs of each group per strategy a study may ask for.
MAX_REPLICATES = 1_000
#: Where the effective study goes in the report directory.
STUDY_FILE = "study.json"

TOP_FIELDS = (
    "name",
    "description",
    "strategies",
    "seed",
    "replicates",
    "metrics",
    "topics",
    "members",
    "events",
    "groups",
)
GROUP_FIELDS = ("members", "events")
SUFFIXES = (".toml", ".json")


class StudyError(LabError):
    """A study file or store snapshot that cannot be run; the message names where and the field."""


# -- reading --------------------------------------------------------------------------------------


def read_document(path: Path) -> Any:
    """The decoded content of the study file at ``path`` (TOML or JSON by its suffix)."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise StudyError(f"{path}: a study file is TOML (.toml) or JSON (.json), not {suffix!r}")
    try:
        with open(path, "rb") as source:
            data = source.read(MAX_STUDY_BYTES + 1)
    except OSError as exc:
        raise StudyError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_STUDY_BYTES:
        raise StudyError(f"{path}: larger than {MAX_STUDY_BYTES:,} bytes, the most a study reads")
    if suffix == ".json":
        try:
            return jsontext.loads(data, max_bytes=MAX_STUDY_BYTES, object_pairs_hook=object_pairs)
        except jsontext.JSONTextError as exc:
            raise StudyError(f"{path}: {exc}") from None
    return _toml(path, data)


def _toml(path: Path, data: bytes) -> dict[str, Any]:
    if data.startswith(b"\xef\xbb\xbf"):
        raise StudyError(f"{path}: starts with a byte order mark")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StudyError(
            f"{path}: not UTF-8 (byte {exc.start} is {data[exc.start]:#04x})"
        ) from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise StudyError(f"{path}: nested deeper than {MAX_DEPTH} levels") from None
    problem = _bounds(document)
    if problem is not None:
        raise StudyError(f"{path}: {problem}")
    return document


def _bounds(document: object) -> str | None:
    """What TOML let through that JSON would not: nesting past :data:`MAX_DEPTH`, an integer
    outside 64 bits. Walked without recursion."""
    stack: list[tuple[object, str, int]] = [(document, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, dict):
            if depth >= MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            stack.extend((v, join_path(path, k), depth + 1) for k, v in value.items())
        elif isinstance(value, list):
            if depth >= MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))
        elif isinstance(value, int) and not MIN_INTEGER <= value <= MAX_INTEGER:
            return f"{path}: the integer is outside TOML's 64-bit range"
    return None


def load_study(
    path: Path, manager: PluginManager, *, base: Mapping[str, Any] | None = None
) -> Study:
    """The study in the file at ``path``; with ``base`` (a store snapshot's document, see
    :mod:`coordkit_lab.study.snapshot`) the file adds to that cluster."""
    document = read_document(path)
    if base is not None:
        document = merge(base, document, str(path))
    return parse_study(document, manager, where=str(path), default_name=path.stem)


# -- checking -------------------------------------------------------------------------------------


def parse_study(
    document: object, manager: PluginManager, *, where: str, default_name: str = "study"
) -> Study:
    """A decoded study document as a :class:`Study`; :class:`StudyError` starts with ``where``."""
    try:
        return _parse(document, manager, default_name)
    except AssignmentInputError as exc:
        raise StudyError(f"{where}: {exc}") from None


def _parse(document: object, manager: PluginManager, default_name: str) -> Study:
    root = check_object(document, "", TOP_FIELDS)
    name = text(root.get("name", default_name), "name")
    description = (
        None if root.get("description") is None else text(root["description"], "description")
    )
    seed = _integer(root.get("seed", DEFAULT_SEED), "seed", 0, MAX_INT64)
    replicates = _integer(root.get("replicates", 1), "replicates", 1, MAX_REPLICATES)
    strategies = _choice(
        root.get("strategies"),
        "strategies",
        "strategy",
        manager.workload(STUDY_WORKLOAD).strategies(manager),
    )
    metrics = _choice(
        root.get("metrics"),
        "metrics",
        "metric",
        [r.name for r in manager.metrics if ASSIGNMENT_KIND in r.value.kinds],
    )
    if "members" in root and "groups" in root:
        raise fail("groups", "give either members (one group) or groups, not both")
    if "groups" in root:
        raw_groups = check_object(root["groups"], "groups", None)
        if not raw_groups:
            raise fail("groups", "a study needs at least one group")
        specs: list[tuple[str, Any, Any, str]] = []
        for group, value in raw_groups.items():
            path = join_path("groups", group)
            if not group:
                raise fail(path, "group name must not be empty")
            fields = check_object(value, path, GROUP_FIELDS)
            specs.append((group, fields.get("members"), fields.get("events"), path))
        shared = root.get("events")
    elif "members" in root:
        specs = [(name, root["members"], root.get("events"), "")]
        shared = None
    else:
        raise fail("members", "missing (a study needs members, or groups of members)")
    groups: list[StudyGroup] = []
    topics: Mapping[str, Any] = {}
    for group, members, events, path in specs:
        case = parse_group_case(
            root.get("topics"),
            members,
            events,
            path=path,
            shared_events=shared,
            group=group if path else None,
        )
        topics = case.topics
        groups.append(StudyGroup(group, case.members, case.events))
    return Study(
        name=name,
        description=description,
        topics=topics,
        groups=groups,
        strategies=strategies,
        metrics=metrics,
        seed=seed,
        replicates=replicates,
    )


def _integer(value: object, path: str, minimum: int, maximum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise fail(path, f"expected a whole number, got {kind_of(value)}")
    if not minimum <= value <= maximum:
        raise fail(path, f"{value:,} is not in the range {minimum:,} <= x <= {maximum:,}")
    return value


def _choice(value: object, path: str, what: str, available: Sequence[str]) -> list[str]:
    """Names from ``available`` (all of them when ``value`` is absent)."""
    if value is None:
        return list(available)
    if not isinstance(value, list):
        raise fail(path, f"expected a list of {what} names, got {kind_of(value)}")
    if not value:
        raise fail(path, f"name at least one {what} (or leave {path} out for all)")
    chosen: list[str] = []
    for i, item in enumerate(value):
        name = text(item, f"{path}[{i}]")
        if name not in available:
            raise fail(
                f"{path}[{i}]", f"unknown {what} {name!r}; available: {', '.join(available)}"
            )
        chosen.append(name)
    return chosen


def with_overrides(
    study: Study,
    manager: PluginManager,
    *,
    strategies: Sequence[str] | None = None,
    seed: int | None = None,
    replicates: int | None = None,
) -> Study:
    """``study`` with what the command line chose instead (``-s``, ``--seed``, ``--replicates``);
    the effective study written with the report records them."""
    import attrs

    changes: dict[str, Any] = {}
    if strategies:
        available = manager.workload(STUDY_WORKLOAD).strategies(manager)
        unknown = [s for s in strategies if s not in available]
        if unknown:
            from coordkit.errors import UnknownNameError

            raise UnknownNameError("strategy", unknown[0], available)
        changes["strategies"] = strategies
    if seed is not None:
        changes["seed"] = seed
    if replicates is not None:
        changes["replicates"] = replicates
    return attrs.evolve(study, **changes) if changes else study


# -- merging with a store snapshot ----------------------------------------------------------------


def merge(base: Mapping[str, Any], document: object, where: str) -> dict[str, Any]:
    """A store snapshot's document (``base``: name, description, topics, groups) with a file's
    additions: settings; loads and replica racks of the store's topics (their partition counts
    are the store's); ``members`` (the study's one group instead of the store's groups);
    ``groups.G`` (replacing a store group's members, adding events, or a new group); top-level
    ``events`` (for every group)."""
    try:
        return _merge(base, document)
    except AssignmentInputError as exc:
        raise StudyError(f"{where}: {exc}") from None


def _merge(base: Mapping[str, Any], document: object) -> dict[str, Any]:
    extra = check_object(document, "", TOP_FIELDS)
    out = {k: v for k, v in base.items() if k != "groups"}
    for key in ("name", "description", "strategies", "seed", "replicates", "metrics", "events"):
        if key in extra:
            out[key] = extra[key]
    if "topics" in extra:
        topics = dict(base["topics"])
        for name, value in check_object(extra["topics"], "topics", None).items():
            topics[name] = _merged_topic(name, topics.get(name), value)
        out["topics"] = topics
    if "members" in extra:
        if "groups" in extra:
            raise fail("groups", "give either members (one group) or groups, not both")
        out["members"] = extra["members"]
        return out
    groups = {g: dict(v) for g, v in base.get("groups", {}).items()}
    for group, value in check_object(extra.get("groups", {}), "groups", None).items():
        fields = check_object(value, join_path("groups", group), GROUP_FIELDS)
        groups.setdefault(group, {}).update(fields)
    if not groups:
        raise fail(
            "members",
            "missing: the store has no legacy consumer group (/consumers/G/ids), so the file "
            "must give the members (or groups of members)",
        )
    out["groups"] = groups
    return out


def _merged_topic(name: str, stored: int | Mapping[str, Any] | None, value: object) -> object:
    path = join_path("topics", name)
    if stored is None:
        raise fail(path, "not a topic in the store (a study file adds to the store's topics)")
    stored_fields = {"partitions": stored} if isinstance(stored, int) else stored
    count = stored_fields["partitions"]
    if isinstance(value, int) and not isinstance(value, bool):
        fields: Mapping[str, Any] = {"partitions": value}
        where = path
    else:
        fields = check_object(value, path, ("partitions", "replica_racks", "loads"))
        where = join_path(path, "partitions")
    given = fields.get("partitions", count)
    if type(given) is not int or given != count:
        shown = repr(given) if type(given) is int else kind_of(given)
        raise fail(where, f"{shown} partitions, but the store's topic has {count}")
    merged: dict[str, Any] = {"partitions": count}
    racks = fields.get("replica_racks", stored_fields.get("replica_racks"))
    if racks is not None:
        merged["replica_racks"] = racks
    if fields.get("loads") is not None:
        merged["loads"] = fields["loads"]
    return merged


# -- writing --------------------------------------------------------------------------------------


#: How many levels of each top-level field :func:`study_json` spreads over lines (deeper values
#: stay on one line: a topic, a member, an event each take one).
_SPREAD = {"topics": 1, "members": 1, "events": 1, "groups": 3}


def study_json(study: Study) -> str:
    """The effective study as a JSON file's text: the canonical document with one topic, member
    or event a line."""
    document = study.document()
    return _layout(document, {k: _SPREAD.get(k, 0) for k in document}, "") + "\n"


def _layout(value: Any, spread: Mapping[str, int] | int, indent: str) -> str:
    levels = spread if isinstance(spread, int) else 1
    if levels <= 0 or not isinstance(value, dict | list) or not value:
        return json.dumps(value, ensure_ascii=False)
    inner = indent + "  "
    if isinstance(value, list):
        items = [inner + _layout(v, levels - 1, inner) for v in value]
        return "[\n" + ",\n".join(items) + f"\n{indent}]"
    items = []
    for key, item in value.items():
        deeper = spread[key] if isinstance(spread, Mapping) else levels - 1
        items.append(
            f"{inner}{json.dumps(key, ensure_ascii=False)}: {_layout(item, deeper, inner)}"
        )
    return "{\n" + ",\n".join(items) + f"\n{indent}}}"


def write_study(study: Study | None, directory: Path) -> Path | None:
    """Write ``study``'s effective file into ``directory`` (``study.json``); with ``None`` remove
    one an earlier study run left there, so a report never sits beside another run's study."""
    target = directory / STUDY_FILE
    if study is None:
        target.unlink(missing_ok=True)
        return None
    temporary = directory / f".{STUDY_FILE}.tmp"
    temporary.write_text(study_json(study), encoding="utf-8")
    temporary.replace(target)
    return target
