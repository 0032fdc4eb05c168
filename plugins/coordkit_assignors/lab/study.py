"""The ``study`` workload: one consumer group and its events given as data — a study file's group,
or a legacy group read from a cluster's store (``coordkit lab run --workload-file`` /
``--from-store``; the lab's ``coordkit_lab.study`` reads those and builds the scenarios).

The group travels inside the scenario, so any Spark executor can rebuild it: the workload's one
parameter ``case`` is the canonical JSON text of a *case* (:func:`case_text`), the group format
``coordkit assign`` reads (:mod:`coordkit.strategies.assignment_io`) plus a list of events::

    {"group": "billing",
     "topics": {"orders": {"partitions": 3, "replica_racks": [["a", "b"], ["b", "c"], ["c", "a"]]}},
     "members": {"C0": {"topics": ["orders"], "rack": "a", "instance_id": "c0"}},
     "events": [{"kind": "join", "member": "C1", "topics": ["orders"]},
                {"kind": "crash", "member": "C0"}]}

Members take ``topics``, ``rack`` and ``instance_id`` (not ``owned`` or ``generation``: step 0
assigns the group from scratch). An event is an object with ``kind`` (one of
:data:`EVENT_FIELDS`, the kinds of :mod:`coordkit_assignors.lab.events`) and that kind's fields.
Parsing checks everything a study file can get wrong and names the field, as
:mod:`coordkit.strategies.assignment_io` does: ``members.C0.topics[2]: topic 't9' is not defined``,
``events[3].member: no member 'C9' in the group at this point``. Events are replayed while they
are read, so a study that parses also simulates.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from coordkit.errors import AssignmentInputError
from coordkit.lab import LabError, Param, Params, resolve_params
from coordkit.strategies.assignment import TopicMetadata
from coordkit.strategies.assignment_io import DEFAULT_MAX_PARTITIONS, parse_group
from coordkit.support import jsontext
from coordkit_assignors.lab.events import (
    GroupEvent,
    MemberCrashed,
    MemberJoined,
    MemberLeft,
    PartitionsAdded,
    SubscriptionChanged,
    TopicCreated,
    TopicDeleted,
)
from coordkit_assignors.lab.simulation import AssignmentCase, AssignmentWorkload, Member

STUDY_WORKLOAD = "study"
#: The largest case text the workload decodes (a study file is bounded the same way).
MAX_CASE_BYTES = 16 * 1024 * 1024

#: The fields of a case document.
CASE_FIELDS = ("group", "topics", "members", "events")
#: The member fields a study takes from ``coordkit assign``'s format.
MEMBER_FIELDS = ("topics", "rack", "instance_id")
#: Per event kind: its required fields, then its optional ones (besides ``kind``).
EVENT_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    MemberJoined.kind: (("member", "topics"), ("rack", "instance_id")),
    MemberLeft.kind: (("member",), ()),
    MemberCrashed.kind: (("member",), ()),
    PartitionsAdded.kind: (("topic", "count"), ("loads", "replica_racks")),
    TopicCreated.kind: (("topic", "partitions"), ("subscribers", "loads", "replica_racks")),
    TopicDeleted.kind: (("topic",), ()),
    SubscriptionChanged.kind: (("member", "topics"), ()),
}
#: Names listed in an error before it says "..." (a cluster may have thousands of topics).
_LISTED = 8


# -- documents with field paths -------------------------------------------------------------------


class JSONObject(dict[str, Any]):
    """A decoded JSON object that remembers keys given more than once (``json`` keeps the last);
    :func:`coordkit.strategies.assignment_io.parse_group` and :func:`check_object` refuse those."""

    duplicates: list[str]


def object_pairs(pairs: list[tuple[str, Any]]) -> JSONObject:
    """``object_pairs_hook`` for :func:`coordkit.support.jsontext.loads` building :class:`JSONObject`."""
    obj = JSONObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def fail(path: str, reason: str) -> AssignmentInputError:
    return AssignmentInputError(f"{path}: {reason}")


#: A key written bare in a field path; any other is quoted (``members["a.b"]``), as
#: :mod:`coordkit.strategies.assignment_io` writes them.
_BARE_KEY = re.compile(r"[A-Za-z0-9_\-]+")


def join_path(path: str, key: str) -> str:
    """The field path of ``key`` inside ``path`` (``""``: the document itself)."""
    if _BARE_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def kind_of(value: object) -> str:
    """How an error names a value's kind (TOML adds dates and times to JSON's kinds)."""
    if isinstance(value, dict | list | str | int | float | bool) or value is None:
        return jsontext.kind_of(value)
    return "a date or time"


def check_object(value: object, path: str, allowed: Sequence[str] | None) -> Mapping[str, Any]:
    """``value`` as an object with only ``allowed`` keys (any keys for ``None``), no key twice."""
    if not isinstance(value, dict):
        raise fail(path or "the document", f"expected an object, got {kind_of(value)}")
    duplicates = getattr(value, "duplicates", [])
    if duplicates:
        raise fail(join_path(path, duplicates[0]), "given more than once")
    if allowed is not None:
        unknown = [k for k in value if k not in allowed]
        if unknown:
            raise fail(
                join_path(path, unknown[0]), f"unknown field (allowed: {', '.join(allowed)})"
            )
    return value


def listing(names: Sequence[str]) -> str:
    """``a, b, c`` — at most a few names, then how many more."""
    if not names:
        return "none"
    shown = ", ".join(names[:_LISTED])
    return shown if len(names) <= _LISTED else f"{shown}, ... ({len(names) - _LISTED:,} more)"


def text(value: object, path: str) -> str:
    """``value`` as a non-empty string."""
    if not isinstance(value, str):
        raise fail(path, f"expected a non-empty string, got {kind_of(value)}")
    if not value:
        raise fail(path, "must not be empty")
    return value


def _optional_text(value: object, path: str) -> str | None:
    return None if value is None else text(value, path)


def _count(value: object, path: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        shown = repr(value) if isinstance(value, int | float) else kind_of(value)
        raise fail(path, f"expected a whole number of partitions >= 1, got {shown}")
    return value


def _names(value: object, path: str) -> list[str]:
    if not isinstance(value, list):
        raise fail(path, f"expected a list, got {kind_of(value)}")
    out: list[str] = []
    for i, item in enumerate(value):
        name = text(item, f"{path}[{i}]")
        if name in out:
            raise fail(f"{path}[{i}]", f"{name!r} is listed twice")
        out.append(name)
    return out


def _loads(value: object, path: str, count: int) -> list[float] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise fail(path, f"expected a list, got {kind_of(value)}")
    if len(value) != count:
        raise fail(path, f"lists {len(value)} partitions, the event has {count}")
    out = []
    for i, load in enumerate(value):
        if (
            isinstance(load, bool)
            or not isinstance(load, int | float)
            or not math.isfinite(load)
            or load < 0
        ):
            raise fail(f"{path}[{i}]", f"load must be a non-negative number, got {load!r}")
        out.append(float(load))
    return out


def _racks(value: object, path: str, count: int) -> list[list[str]] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise fail(path, f"expected a list, got {kind_of(value)}")
    if len(value) != count:
        raise fail(path, f"lists {len(value)} partitions, the event has {count}")
    out = []
    for p, replicas in enumerate(value):
        if not isinstance(replicas, list):
            raise fail(f"{path}[{p}]", f"expected a list of racks, got {kind_of(replicas)}")
        out.append([text(rack, f"{path}[{p}][{r}]") for r, rack in enumerate(replicas)])
    return out


# -- parsing -----------------------------------------------------------------------------------------


def parse_case(document: object, *, max_partitions: int = DEFAULT_MAX_PARTITIONS) -> AssignmentCase:
    """A case document (:data:`CASE_FIELDS`) as an :class:`AssignmentCase`."""
    root = check_object(document, "", CASE_FIELDS)
    if "group" in root:
        text(root["group"], "group")
    return parse_group_case(
        root.get("topics"),
        root.get("members"),
        root.get("events"),
        max_partitions=max_partitions,
    )


def parse_group_case(
    topics: object,
    members: object,
    events: object,
    *,
    path: str = "",
    shared_events: object = None,
    group: str | None = None,
    max_partitions: int = DEFAULT_MAX_PARTITIONS,
) -> AssignmentCase:
    """One group: ``topics`` and ``members`` in ``coordkit assign``'s format, and ``events``.

    :param path: where the group's ``members`` and ``events`` are in the document (``groups.G``
        in a study file of several groups); ``topics`` and ``shared_events`` are always at
        ``topics`` and ``events``.
    :param shared_events: events every group of the document goes through before its own.
    :param group: the group's name, for messages about one of several groups.
    :raises AssignmentInputError: the message starts with the field's path.
    """
    if topics is None:
        raise fail("topics", "missing (a study lists its topics)")
    if members is None:
        raise fail(join_path(path, "members"), "missing (a group needs members)")
    members_path = join_path(path, "members")
    for name, fields in check_object(members, members_path, None).items():
        where = join_path(members_path, name)
        if isinstance(fields, dict):
            for key in fields:
                if key in ("owned", "generation"):
                    raise fail(
                        join_path(where, key),
                        "not part of a study (step 0 assigns the group from scratch)",
                    )
            check_object(fields, where, MEMBER_FIELDS)
    try:
        subscription = parse_group(
            {"topics": topics, "members": members}, max_partitions=max_partitions
        )
    except AssignmentInputError as exc:
        message = str(exc)
        if path and message.startswith("members"):
            raise AssignmentInputError(f"{path}.{message}") from None
        raise
    raw_events: list[tuple[str, object]] = []
    for where, given in (("events", shared_events), (join_path(path, "events"), events)):
        if given is None:
            continue
        if not isinstance(given, list):
            raise fail(where, f"expected a list, got {kind_of(given)}")
        raw_events += [(f"{where}[{i}]", item) for i, item in enumerate(given)]
    defined = dict.fromkeys(subscription.topics)
    for _, event in raw_events:  # topics an event creates may be subscribed to before that
        if isinstance(event, dict) and event.get("kind") == TopicCreated.kind:
            topic = event.get("topic")
            if isinstance(topic, str) and topic:
                defined.setdefault(topic)
    initial: list[Member] = []
    for member, sub in subscription.members.items():
        where = join_path(members_path, member)
        for i, topic in enumerate(sub.topics):
            if topic not in defined:
                raise fail(
                    f"{where}.topics[{i}]",
                    f"topic {topic!r} is not defined (topics: {listing(list(defined))})",
                )
        initial.append(Member(member, sub.topics, sub.rack, sub.instance_id))
    replay = _Replay(subscription.topics, initial, defined, max_partitions, name=group)
    parsed = [replay.event(item, where) for where, item in raw_events]
    return AssignmentCase(subscription.topics, initial, parsed)


class _Replay:
    """Reads events in order while applying them to the group, so every event is checked against
    the group as it is at that point (members present, topics existing, bounds kept)."""

    def __init__(
        self,
        topics: Mapping[str, TopicMetadata],
        members: Sequence[Member],
        defined: Mapping[str, None],
        max_partitions: int,
        *,
        name: str | None = None,
    ):
        self.group = "the group" if name is None else f"group {name!r}"
        self.topics = {name: meta.partitions for name, meta in topics.items()}
        self.members = {m.name: m.instance_id for m in members}
        self.defined = defined
        self.max_partitions = max_partitions
        self.total = sum(self.topics.values())

    def _member(self, fields: Mapping[str, Any], path: str) -> str:
        name = text(fields["member"], f"{path}.member")
        if name not in self.members:
            raise fail(f"{path}.member", f"no member {name!r} in {self.group} at this point")
        return name

    def _topic(self, fields: Mapping[str, Any], path: str, *, exists: bool) -> str:
        name = text(fields["topic"], f"{path}.topic")
        if exists and name not in self.topics:
            raise fail(
                f"{path}.topic",
                f"no topic {name!r} at this point (topics: {listing(list(self.topics))})",
            )
        if not exists and name in self.topics:
            raise fail(f"{path}.topic", f"topic {name!r} exists at this point")
        return name

    def _subscription(self, fields: Mapping[str, Any], path: str) -> list[str]:
        topics = _names(fields["topics"], f"{path}.topics")
        for i, topic in enumerate(topics):
            if topic not in self.defined:
                raise fail(
                    f"{path}.topics[{i}]",
                    f"topic {topic!r} is not defined (topics: {listing(list(self.defined))})",
                )
        return topics

    def _grow(self, count: int, path: str) -> None:
        self.total += count
        if self.total > self.max_partitions:
            raise fail(
                path,
                f"{count:,} partitions make {self.total:,} in all, more than the limit of "
                f"{self.max_partitions:,}",
            )

    def event(self, item: object, path: str) -> GroupEvent:
        if not isinstance(item, dict):
            raise fail(path, f"expected an event object, got {kind_of(item)}")
        kind = item.get("kind")
        if kind is None:
            raise fail(f"{path}.kind", f"missing (kinds: {', '.join(EVENT_FIELDS)})")
        if not isinstance(kind, str) or kind not in EVENT_FIELDS:
            shown = repr(kind) if isinstance(kind, str) else kind_of(kind)
            raise fail(
                f"{path}.kind", f"unknown event kind {shown} (kinds: {', '.join(EVENT_FIELDS)})"
            )
        required, optional = EVENT_FIELDS[kind]
        fields = check_object(item, path, ("kind", *required, *optional))
        for name in required:
            if name not in fields:
                raise fail(
                    f"{path}.{name}", f"missing (a {kind} event needs {', '.join(required)})"
                )
        match kind:
            case MemberJoined.kind:
                name = text(fields["member"], f"{path}.member")
                if name in self.members:
                    raise fail(f"{path}.member", f"member {name!r} is already in {self.group}")
                topics = self._subscription(fields, path)
                rack = _optional_text(fields.get("rack"), f"{path}.rack")
                instance = _optional_text(fields.get("instance_id"), f"{path}.instance_id")
                if instance is not None and instance in self.members.values():
                    raise fail(
                        f"{path}.instance_id",
                        f"instance id {instance!r} is in use in {self.group} at this point "
                        "(group.instance.id must be unique in a group)",
                    )
                self.members[name] = instance
                return MemberJoined(name, topics, rack, instance)
            case MemberLeft.kind | MemberCrashed.kind:
                name = self._member(fields, path)
                del self.members[name]
                return MemberLeft(name) if kind == MemberLeft.kind else MemberCrashed(name)
            case SubscriptionChanged.kind:
                name = self._member(fields, path)
                return SubscriptionChanged(name, self._subscription(fields, path))
            case PartitionsAdded.kind:
                topic = self._topic(fields, path, exists=True)
                count = _count(fields["count"], f"{path}.count")
                self._grow(count, f"{path}.count")
                loads = _loads(fields.get("loads"), f"{path}.loads", count)
                racks = _racks(fields.get("replica_racks"), f"{path}.replica_racks", count)
                self.topics[topic] += count
                return PartitionsAdded(topic, count, loads, racks)
            case TopicCreated.kind:
                topic = self._topic(fields, path, exists=False)
                count = _count(fields["partitions"], f"{path}.partitions")
                self._grow(count, f"{path}.partitions")
                subscribers = _names(fields.get("subscribers", []), f"{path}.subscribers")
                for i, member in enumerate(subscribers):
                    if member not in self.members:
                        raise fail(
                            f"{path}.subscribers[{i}]",
                            f"no member {member!r} in {self.group} at this point",
                        )
                loads = _loads(fields.get("loads"), f"{path}.loads", count)
                racks = _racks(fields.get("replica_racks"), f"{path}.replica_racks", count)
                self.topics[topic] = count
                return TopicCreated(topic, count, subscribers, loads, racks)
            case _:  # TopicDeleted.kind, the last of EVENT_FIELDS
                topic = self._topic(fields, path, exists=True)
                del self.topics[topic]
                return TopicDeleted(topic)


# -- writing ------------------------------------------------------------------------------------------


def topic_json(meta: TopicMetadata) -> int | dict[str, Any]:
    """A topic as ``coordkit assign`` reads it: its partition count, or an object when it has
    replica racks or loads."""
    if meta.replica_racks is None and meta.loads is None:
        return meta.partitions
    out: dict[str, Any] = {"partitions": meta.partitions}
    if meta.replica_racks is not None:
        out["replica_racks"] = [list(r) for r in meta.replica_racks]
    if meta.loads is not None:
        out["loads"] = list(meta.loads)
    return out


def member_json(member: Member) -> dict[str, Any]:
    out: dict[str, Any] = {"topics": list(member.topics)}
    if member.rack is not None:
        out["rack"] = member.rack
    if member.instance_id is not None:
        out["instance_id"] = member.instance_id
    return out


def event_json(event: GroupEvent) -> dict[str, Any]:
    """An event as :func:`parse_group_case` reads it (optional fields left out when unset)."""
    out: dict[str, Any] = {"kind": event.kind}
    required, optional = EVENT_FIELDS[event.kind]
    for name in (*required, *optional):
        value = getattr(event, name)
        if value is None or (name == "subscribers" and not value):
            continue
        if isinstance(value, tuple):
            value = [list(v) if isinstance(v, tuple) else v for v in value]
        out[name] = value
    return out


def case_document(case: AssignmentCase, group: str | None = None) -> dict[str, Any]:
    """The case as a document (:func:`parse_case` reads it back equal)."""
    out: dict[str, Any] = {} if group is None else {"group": group}
    out["topics"] = {name: topic_json(meta) for name, meta in case.topics.items()}
    out["members"] = {m.name: member_json(m) for m in case.members}
    out["events"] = [event_json(e) for e in case.events]
    return out


def canonical_json(document: object) -> str:
    """Compact JSON in the document's own key order: the same document, the same text."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def case_text(case: AssignmentCase, group: str | None = None) -> str:
    """The value of the ``study`` workload's ``case`` parameter for ``case``."""
    return canonical_json(case_document(case, group))


@functools.lru_cache(maxsize=8)
def case_from_text(text: str) -> AssignmentCase:
    """The case a ``case`` parameter holds (cached: every strategy of a scenario set reads the
    same text, and a case is immutable)."""
    if not text:
        raise LabError(
            f"workload {STUDY_WORKLOAD!r} runs a given group: use coordkit lab run "
            "--workload-file FILE or --from-store URL (its parameter 'case' is empty)"
        )
    try:
        document = jsontext.loads(text, max_bytes=MAX_CASE_BYTES, object_pairs_hook=object_pairs)
        return parse_case(document)
    except (jsontext.JSONTextError, AssignmentInputError) as exc:
        raise LabError(f"workload {STUDY_WORKLOAD!r} parameter 'case': {exc}") from None


class StudyWorkload(AssignmentWorkload):
    """Registered as ``study``; joins no preset (it has nothing to run without a case)."""

    name: ClassVar[str] = STUDY_WORKLOAD
    description: ClassVar[str] = (
        "a given consumer group and its events: a study file's, or a legacy group read from a "
        "cluster's store (coordkit lab run --workload-file FILE / --from-store URL)"
    )
    defaults: ClassVar[Mapping[str, Param]] = {"case": ""}

    def generate(self, params: Params, seed: int) -> AssignmentCase:
        return case_from_text(str(params["case"]))

    def feasible(self, params: Params) -> bool:
        return bool(resolve_params(self, params)["case"])

    def cost(self, params: Params) -> float:
        case = case_from_text(str(resolve_params(self, params)["case"]))
        partitions = sum(meta.partitions for meta in case.topics.values())
        return float(max(partitions, 1) * (len(case.events) + 1))


STUDY = StudyWorkload()
