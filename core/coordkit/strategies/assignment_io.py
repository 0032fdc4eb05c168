"""Assignor input and output as JSON, and the summary of an assignment.

Input (what ``coordkit assign`` reads)::

    {"topics": {"t0": 3,
                "t1": {"partitions": 2, "replica_racks": [["a", "b"], ["b", "c"]], "loads": [5, 1]}},
     "members": {"C0": {"topics": ["t0", "t1"], "instance_id": "i1", "owned": ["t0-0"],
                        "generation": 1, "rack": "a"}}}

Every member field but ``topics`` is optional. Invalid input raises
:class:`~coordkit.errors.AssignmentInputError` whose message starts with the JSON path of the
offending field, e.g. ``members.C0.owned[1]: partition t0-7 does not exist (t0 has 3 partitions)``.
The input is bounded before anything is allocated for it: its size and nesting (through
:mod:`coordkit.support.jsontext`), and the partitions of all topics together (``max_partitions``, checked
before an assignor or the summary allocates per partition; :class:`AssignmentTooLargeError`).
Parsing lives here, not in the model: :mod:`coordkit.strategies.assignment` stays free of input concerns.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from attrs import frozen

from coordkit.errors import AssignmentInputError
from coordkit.store.paths import numeric_name
from coordkit.strategies.assignment import (
    DEFAULT_GENERATION,
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    PartitionSpace,
    TopicMetadata,
    load_balance,
)
from coordkit.support import jsontext

TOP_LEVEL_FIELDS = ("topics", "members")
TOPIC_FIELDS = ("partitions", "replica_racks", "loads")
MEMBER_FIELDS = ("topics", "instance_id", "owned", "generation", "rack")

#: The most partitions (all topics together) an input may describe unless the caller allows more:
#: Kafka's own scale, a million. Assignors and the summary allocate per partition.
DEFAULT_MAX_PARTITIONS = 1_000_000
#: The largest input read, in bytes.
MAX_INPUT_BYTES = jsontext.MAX_BYTES
#: Kafka's generation ids are 32-bit; -1 means "unknown".
MAX_GENERATION = 2**31 - 1


class AssignmentTooLargeError(AssignmentInputError):
    """The input asks for more partitions than the limit allows; nothing was allocated.

    :param requested: the partitions the input describes up to and including the topic at fault.
    :param limit: the limit in force.
    """

    def __init__(self, message: str, *, requested: int, limit: int):
        super().__init__(message)
        self.requested = requested
        self.limit = limit


class _JSONObject(dict[str, Any]):
    """A decoded JSON object that remembers keys given more than once (json keeps the last)."""

    duplicates: list[str]


def _object_pairs(pairs: list[tuple[str, Any]]) -> _JSONObject:
    obj = _JSONObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _fail(path: str, reason: str) -> AssignmentInputError:
    return AssignmentInputError(f"{path}: {reason}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _object(value: object, path: str, allowed: tuple[str, ...] | None) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, f"expected an object, got {jsontext.kind_of(value)}")
    duplicates = getattr(value, "duplicates", [])
    if duplicates:
        raise _fail(_join(path, duplicates[0]), "given more than once")
    if allowed is not None:
        unknown = [k for k in value if k not in allowed]
        if unknown:
            raise _fail(_join(path, unknown[0]), f"unknown field (allowed: {', '.join(allowed)})")
    return value


#: A key written bare in a field path; any other is written quoted, ``members["a.b"]``, so a
#: name holding ``.``, ``[`` or ``:`` cannot make the path ambiguous.
_BARE_KEY = re.compile(r"[A-Za-z0-9_\-]+")


def _join(path: str, key: str) -> str:
    """The field path of ``key`` inside ``path`` (``input`` is the document itself)."""
    if _BARE_KEY.fullmatch(key):
        return key if path == "input" else f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _name(key: str, path: str, what: str) -> str:
    if not key:
        raise _fail(path, f"{what} name must not be empty")
    return key


def _list(value: object, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(path, f"expected a list, got {jsontext.kind_of(value)}")
    return value


def _optional_string(value: object, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _fail(path, f"expected a non-empty string or null, got {jsontext.kind_of(value)}")
    return value


# -- input ----------------------------------------------------------------------------------------


def loads_group(
    text: str | bytes, *, max_partitions: int = DEFAULT_MAX_PARTITIONS
) -> GroupSubscription:
    """Parse assignor input from JSON text (UTF-8 bytes or a string)."""
    try:
        data = jsontext.loads(text, max_bytes=MAX_INPUT_BYTES, object_pairs_hook=_object_pairs)
    except jsontext.JSONTextError as exc:
        raise AssignmentInputError(f"input: {exc}") from None
    return parse_group(data, max_partitions=max_partitions)


def parse_group(data: object, *, max_partitions: int = DEFAULT_MAX_PARTITIONS) -> GroupSubscription:
    """Build a :class:`GroupSubscription` from decoded JSON, checking every field.

    :raises AssignmentTooLargeError: the topics have more than ``max_partitions`` partitions.
    """
    root = _object(data, "input", TOP_LEVEL_FIELDS)
    for required in TOP_LEVEL_FIELDS:
        if required not in root:
            raise _fail(required, "missing (the input needs 'topics' and 'members')")
    topics_json = _object(root["topics"], "topics", None)
    topics: dict[str, TopicMetadata] = {}
    total = 0
    for name, value in topics_json.items():
        path = _join("topics", name)
        _name(name, path, "topic")
        meta = _parse_topic(value, path, used=total, limit=max_partitions)
        topics[name] = meta
        total += meta.partitions
    members_json = _object(root["members"], "members", None)
    if not members_json:
        raise _fail("members", "a group needs at least one member")
    members: dict[str, MemberSubscription] = {}
    instance_owner: dict[str, str] = {}
    for member_id, value in members_json.items():
        path = _join("members", member_id)
        member = _parse_member(_name(member_id, path, "member"), value, path, topics)
        if member.instance_id is not None:
            other = instance_owner.setdefault(member.instance_id, member_id)
            if other != member_id:
                # The coordinator fences the older of two members sharing a group.instance.id, so
                # both can never be in one group.
                raise _fail(
                    f"{path}.instance_id",
                    f"instance id {member.instance_id!r} is also used by member {other} "
                    "(group.instance.id must be unique in a group)",
                )
        members[member_id] = member
    return GroupSubscription(topics, members)


def _parse_topic(value: object, path: str, *, used: int, limit: int) -> TopicMetadata:
    """One topic, when the topics before it have ``used`` of the ``limit`` partitions."""
    if _is_int(value):
        fields: Mapping[str, Any] = {"partitions": value}
    elif not isinstance(value, dict):
        raise _fail(
            path,
            f"expected a partition count or an object with 'partitions', got {jsontext.kind_of(value)}",
        )
    else:
        fields = _object(value, path, TOPIC_FIELDS)
        if "partitions" not in fields:
            raise _fail(f"{path}.partitions", "missing")
    partitions = fields["partitions"]
    where = path if _is_int(value) else f"{path}.partitions"
    if not _is_int(partitions) or partitions < 0:
        raise _fail(where, f"partition count must be a non-negative integer, got {partitions!r}")
    if used + partitions > limit:
        requested = used + partitions
        raise AssignmentTooLargeError(
            f"{where}: {partitions:,} partitions make {requested:,} in all, more than the limit "
            f"of {limit:,}",
            requested=requested,
            limit=limit,
        )

    racks: list[list[str]] | None = None
    if fields.get("replica_racks") is not None:
        racks_path = f"{path}.replica_racks"
        racks = []
        raw = _list(fields["replica_racks"], racks_path)
        if len(raw) != partitions:
            raise _fail(racks_path, f"lists {len(raw)} partitions, the topic has {partitions}")
        for p, replica in enumerate(raw):
            entries = _list(replica, f"{racks_path}[{p}]")
            for r, rack in enumerate(entries):
                if not isinstance(rack, str) or not rack:
                    raise _fail(
                        f"{racks_path}[{p}][{r}]",
                        f"rack must be a non-empty string, got {jsontext.kind_of(rack)}",
                    )
            racks.append(entries)

    loads: list[float] | None = None
    if fields.get("loads") is not None:
        loads_path = f"{path}.loads"
        raw = _list(fields["loads"], loads_path)
        if len(raw) != partitions:
            raise _fail(loads_path, f"lists {len(raw)} partitions, the topic has {partitions}")
        loads = []
        for p, load in enumerate(raw):
            if (
                isinstance(load, bool)
                or not isinstance(load, int | float)
                or not math.isfinite(load)
                or load < 0
            ):
                raise _fail(
                    f"{loads_path}[{p}]", f"load must be a non-negative number, got {load!r}"
                )
            loads.append(float(load))
    return TopicMetadata(partitions, replica_racks=racks, loads=loads)


def _parse_member(
    member_id: str, value: object, path: str, topics: Mapping[str, TopicMetadata]
) -> MemberSubscription:
    fields = _object(value, path, MEMBER_FIELDS)
    if "topics" not in fields:
        raise _fail(f"{path}.topics", "missing (every member lists the topics it subscribes to)")
    subscribed: list[str] = []
    for i, topic in enumerate(_list(fields["topics"], f"{path}.topics")):
        where = f"{path}.topics[{i}]"
        if not isinstance(topic, str) or not topic:
            raise _fail(where, f"topic must be a non-empty string, got {jsontext.kind_of(topic)}")
        if topic in subscribed:
            raise _fail(where, f"topic {topic} is listed twice")
        subscribed.append(topic)  # topics without metadata are allowed: assignors skip them

    owned: list[str] = []
    for i, item in enumerate(_list(fields.get("owned", []), f"{path}.owned")):
        where = f"{path}.owned[{i}]"
        if not isinstance(item, str):
            raise _fail(where, f"expected 'topic-partition', got {jsontext.kind_of(item)}")
        topic, sep, number_text = item.rpartition("-")
        number = numeric_name(number_text)
        if not sep or not topic or number is None:
            raise _fail(
                where,
                f"{item!r} is not a partition written topic-partition, the partition in digits "
                "without leading zeros (e.g. 'orders-3')",
            )
        meta = topics.get(topic)
        if meta is None:
            known = ", ".join(sorted(topics)) or "none"
            raise _fail(where, f"unknown topic {topic} (topics: {known})")
        if number >= meta.partitions:
            raise _fail(
                where, f"partition {item} does not exist ({topic} has {meta.partitions} partitions)"
            )
        if item in owned:
            raise _fail(where, f"partition {item} is listed twice")
        owned.append(item)

    generation = fields.get("generation", DEFAULT_GENERATION)
    if not _is_int(generation):
        raise _fail(
            f"{path}.generation", f"expected an integer, got {jsontext.kind_of(generation)}"
        )
    if not DEFAULT_GENERATION <= generation <= MAX_GENERATION:
        raise _fail(
            f"{path}.generation",
            f"{generation} is out of range (a generation is {DEFAULT_GENERATION} for unknown, or "
            f"0 to {MAX_GENERATION:,})",
        )
    return MemberSubscription(
        subscribed,
        instance_id=_optional_string(fields.get("instance_id"), f"{path}.instance_id"),
        owned=owned,
        generation=generation,
        rack=_optional_string(fields.get("rack"), f"{path}.rack"),
    )


def dump_group(group: GroupSubscription) -> dict[str, Any]:
    """The JSON form of ``group`` (the inverse of :func:`parse_group`)."""
    topics: dict[str, Any] = {}
    for name, meta in group.topics.items():
        if meta.replica_racks is None and meta.loads is None:
            topics[name] = meta.partitions
        else:
            entry: dict[str, Any] = {"partitions": meta.partitions}
            if meta.replica_racks is not None:
                entry["replica_racks"] = [list(r) for r in meta.replica_racks]
            if meta.loads is not None:
                entry["loads"] = list(meta.loads)
            topics[name] = entry
    members: dict[str, Any] = {}
    for member_id, sub in group.members.items():
        member: dict[str, Any] = {"topics": list(sub.topics)}
        if sub.instance_id is not None:
            member["instance_id"] = sub.instance_id
        if sub.owned:
            member["owned"] = [
                f"{t}-{p}" for t, parts in sorted(sub.owned.items()) for p in sorted(parts)
            ]
        if sub.generation != DEFAULT_GENERATION:
            member["generation"] = sub.generation
        if sub.rack is not None:
            member["rack"] = sub.rack
        members[member_id] = member
    return {"topics": topics, "members": members}


# -- output ---------------------------------------------------------------------------------------


@frozen
class AssignmentSummary:
    """How an assignment came out.

    :param counts: per member, the partitions it gets this round plus those withheld for it (the
        target of the rebalance).
    :param balance: largest minus smallest count.
    :param load_balance: most loaded member's load / mean load, when some topic gives loads.
    :param moves: previously owned partitions whose target owner is none of their claimants.
    :param withheld: partitions withheld this round (cooperative assignors).
    :param time_s: how long ``assign()`` took.
    """

    members: int
    partitions: int
    counts: Mapping[str, int]
    balance: int
    load_balance: float | None
    moves: int
    withheld: int
    time_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "members": self.members,
            "partitions": self.partitions,
            "counts": dict(self.counts),
            "balance": self.balance,
            "load_balance": self.load_balance,
            "moves": self.moves,
            "withheld": self.withheld,
            "time_s": self.time_s,
        }


def member_loads(group: GroupSubscription, assignment: GroupAssignment) -> dict[str, float]:
    """Per member, the total load of its target partitions (1.0 per partition without loads);
    ``inf`` for a total beyond the largest float."""
    return _member_weights(group, assignment, scaled=False)


def _member_weights(
    group: GroupSubscription, assignment: GroupAssignment, *, scaled: bool
) -> dict[str, float]:
    """Per member, the summed weights of its target partitions; ``scaled`` divides every weight by
    the largest first, so the sums stay finite (and comparable) whatever the loads."""
    space = assignment.space
    weights = np.ones(space.total, dtype=np.float64)
    for topic, meta in group.topics.items():
        if meta.loads is not None and topic in space and meta.partitions:
            base = space.base(topic)
            weights[base : base + meta.partitions] = meta.loads
    if scaled and space.total:
        largest = float(weights.max())
        if largest > 0:
            weights /= largest
    with np.errstate(over="ignore"):
        return {m: float(weights[_target(assignment, m)].sum()) for m in assignment.members}


def _target(assignment: GroupAssignment, member: str) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.concatenate(
        (
            np.asarray(assignment.indices(member), dtype=np.int64),
            np.asarray(assignment.withheld_indices(member), dtype=np.int64),
        )
    )


def summarize(
    group: GroupSubscription, assignment: GroupAssignment, time_s: float = 0.0
) -> AssignmentSummary:
    space = assignment.space
    counts = {
        m: len(assignment.indices(m)) + len(assignment.withheld_indices(m))
        for m in assignment.members
    }
    withheld = sum(len(assignment.withheld_indices(m)) for m in assignment.members)
    balance = None
    if any(meta.loads is not None for meta in group.topics.values()) and counts:
        balance = load_balance(_member_weights(group, assignment, scaled=True).values())
    return AssignmentSummary(
        members=len(counts),
        partitions=sum(counts.values()),
        counts=counts,
        balance=max(counts.values()) - min(counts.values()) if counts else 0,
        load_balance=balance,
        moves=count_moves(group, assignment, space),
        withheld=withheld,
        time_s=time_s,
    )


def count_moves(
    group: GroupSubscription, assignment: GroupAssignment, space: PartitionSpace | None = None
) -> int:
    """Previously owned partitions whose new owner (assigned or withheld) is none of their claimants.

    Partitions nobody gets any more (their topic left every subscription) are revocations, not
    moves, and are not counted.
    """
    space = space or assignment.space
    number = {m: i for i, m in enumerate(assignment.members)}
    target = np.full(space.total, -1, dtype=np.int64)
    for member, i in number.items():
        target[_target(assignment, member)] = i
    claimed = np.zeros(space.total, dtype=bool)
    stayed = np.zeros(space.total, dtype=bool)
    for member, sub in group.members.items():
        i = number.get(member, -2)
        for topic, parts in sub.owned.items():
            count = space.count(topic)
            if not count:
                continue
            idx = np.asarray([p for p in parts if 0 <= p < count], dtype=np.int64) + space.base(
                topic
            )
            claimed[idx] = True
            stayed[idx[target[idx] == i]] = True
    return int(np.count_nonzero(claimed & ~stayed & (target >= 0)))


def assignment_to_json(
    assignor: str, assignment: GroupAssignment, summary: AssignmentSummary | None = None
) -> dict[str, Any]:
    """``{"assignor", "assignment", "withheld", "summary"}`` with partitions written topic-partition."""
    out: dict[str, Any] = {
        "assignor": assignor,
        "assignment": assignment.as_strings(),
        "withheld": assignment.withheld_as_strings(),
    }
    if summary is not None:
        out["summary"] = summary.to_json()
    return out


def assignment_from_json(
    data: Mapping[str, Any], topics: Mapping[str, int] | PartitionSpace
) -> GroupAssignment:
    """Rebuild a :class:`GroupAssignment` from :func:`assignment_to_json` output."""
    assigned = _object(data.get("assignment"), "assignment", None)
    withheld = _object(data.get("withheld", {}), "withheld", None)
    try:
        return GroupAssignment.from_partitions(topics, assigned, withheld)
    except (KeyError, ValueError) as exc:
        raise AssignmentInputError(f"assignment: {exc}") from None
