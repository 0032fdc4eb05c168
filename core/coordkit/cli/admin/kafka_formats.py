"""The text formats of Kafka's admin tools (ZooKeeper era), read and written as Kafka's own do.

* reassignment plans (``kafka-reassign-partitions.sh --reassignment-json-file``, and what
  ``--generate`` prints): ``{"version":1,"partitions":[{"topic":"t","partition":0,
  "replicas":[4,5,6],"log_dirs":["any","any","any"]}]}`` — written byte for byte as Kafka's
  ``formatAsReassignmentJson`` writes it, read with or without ``log_dirs``;
* topics to move (``--topics-to-move-json-file``): ``{"topics":[{"topic":"foo"}],"version":1}``;
* preferred replica elections (``kafka-preferred-replica-election.sh --path-to-json-file``):
  ``{"partitions":[{"topic":"t","partition":0}]}``;
* ``kafka-topics.sh`` option values: ``--replica-assignment 0:1:2,1:2:0``, ``--config k=v``,
  and ``--broker-list 4,5,6``.

Files are parsed with :func:`coordkit.support.jsontext.loads` (bounded size and depth). Every refusal is a
:class:`~coordkit.cli.errors.CommandError` naming the option, the file and the entry at fault
(``--reassignment-json-file plan.json: partitions[2] (t-5): ...``). Where Kafka's tools accept
an entry a store cannot honour (a log directory other than ``any``) or skip one silently (an
election naming an unknown partition), these refuse it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from coordkit.cli.admin.options import MAX_INT32
from coordkit.cli.errors import CommandError
from coordkit.cli.numbers import parse_integer
from coordkit.kafka.model import validate_topic_name
from coordkit.support import jsontext

#: A partition: ``(topic, partition)``.
TP = tuple[str, int]
#: What Kafka writes in ``log_dirs`` for "wherever the broker likes" (``AnyLogDir``).
ANY_LOG_DIR = "any"
#: The only ``version`` Kafka's tools read or write in these files.
FILE_VERSION = 1
#: Topic config names as Kafka spells them (``retention.ms``, ``cleanup.policy``, ...).
_CONFIG_NAME = re.compile(r"[A-Za-z0-9._-]+")


def partition_name(tp: TP) -> str:
    """``t-0``, as Kafka's ``TopicPartition`` prints itself."""
    return f"{tp[0]}-{tp[1]}"


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- files ------------------------------------------------------------------------------------


def read_json_file(path: str, option: str) -> Any:
    """The JSON document in ``path`` (within :mod:`coordkit.support.jsontext`'s bounds)."""
    where = f"{option} {path}"
    try:
        with open(path, "rb") as file:
            # Read one byte past the limit so an oversized file is refused without reading it all.
            data = file.read(jsontext.MAX_BYTES + 1)
    except FileNotFoundError:
        raise CommandError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise CommandError(f"{where}: is a directory, not a JSON file") from None
    except OSError as exc:
        raise CommandError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except ValueError:  # a NUL or an unpaired surrogate: no file can have that name
        raise CommandError(f"{where}: not a file name this system can open") from None
    try:
        return jsontext.loads(data)
    except jsontext.JSONTextError as exc:
        raise CommandError(f"{where}: {exc}") from None


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CommandError(f"{where}: expected a JSON object, got {_shown(value)}")
    return value


def _version(document: dict[str, Any], where: str) -> None:
    # Kafka reads a missing version as its earliest, 1, and refuses any other.
    version = document.get("version", FILE_VERSION)
    if type(version) is not int or version != FILE_VERSION:
        raise CommandError(
            f"{where}: field 'version': {_shown(version)} is not supported (Kafka's tools read "
            f"version {FILE_VERSION})"
        )


def _list(document: dict[str, Any], name: str, where: str) -> list[Any]:
    value = document.get(name)
    if value is None:
        raise CommandError(f"{where}: field {name!r} is missing")
    if not isinstance(value, list):
        raise CommandError(f"{where}: field {name!r}: expected a list, got {_shown(value)}")
    if not value:
        raise CommandError(f"{where}: field {name!r} is empty")
    return value


def _topic(entry: dict[str, Any], where: str) -> str:
    topic = entry.get("topic")
    if not isinstance(topic, str):
        raise CommandError(f"{where}: field 'topic': expected a topic name, got {_shown(topic)}")
    try:
        return validate_topic_name(topic)
    except ValueError as exc:
        raise CommandError(f"{where}: field 'topic': {exc}") from None


def _id(value: Any, what: str, where: str, field: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_INT32:
        raise CommandError(
            f"{where}: field {field!r}: {_shown(value)} is not a {what} (0 to {MAX_INT32:,})"
        )
    return value


def _partition_entry(entry: Any, where: str) -> tuple[TP, dict[str, Any]]:
    obj = _object(entry, where)
    topic = _topic(obj, where)
    if "partition" not in obj:
        raise CommandError(f"{where}: field 'partition' is missing")
    return (topic, _id(obj["partition"], "partition number", where, "partition")), obj


def parse_reassignment(document: Any, where: str) -> dict[TP, tuple[int, ...]]:
    """A reassignment plan (partition → target replicas), in the file's order.

    Kafka's ``parsePartitionReassignmentData`` and ``parseAndValidate`` rules: version 1 (or
    none); every entry names a topic, a partition and a non-empty replica list without repeats;
    no partition twice; ``log_dirs``, when given, as long as ``replicas``. Log directories other
    than ``"any"`` are refused: a store holds no log directories to move replicas between.
    """
    obj = _object(document, where)
    _version(obj, where)
    plan: dict[TP, tuple[int, ...]] = {}
    for index, entry in enumerate(_list(obj, "partitions", where)):
        at = f"{where}: partitions[{index}]"
        tp, fields = _partition_entry(entry, at)
        at = f"{at} ({partition_name(tp)})"
        raw = fields.get("replicas")
        if not isinstance(raw, list):
            raise CommandError(f"{at}: field 'replicas': expected a list of broker ids")
        replicas = tuple(_id(r, "broker id", at, "replicas") for r in raw)
        if not replicas:
            raise CommandError(f"{at}: field 'replicas' is empty")
        repeated = sorted({r for r in replicas if replicas.count(r) > 1})
        if repeated:
            raise CommandError(
                f"{at}: field 'replicas': {list(replicas)} lists broker "
                f"{', '.join(map(str, repeated))} more than once"
            )
        if "log_dirs" in fields:
            dirs = fields["log_dirs"]
            if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
                raise CommandError(f"{at}: field 'log_dirs': expected a list of strings")
            if len(dirs) != len(replicas):
                raise CommandError(
                    f"{at}: field 'log_dirs' has {len(dirs)} entries for {len(replicas)} replicas"
                )
            other = [d for d in dirs if d != ANY_LOG_DIR]
            if other:
                raise CommandError(
                    f"{at}: field 'log_dirs': {_shown(other[0])}: only {ANY_LOG_DIR!r} is "
                    "supported (the store holds no log directories to place replicas in)"
                )
        if tp in plan:
            raise CommandError(f"{at}: the partition is listed twice")
        plan[tp] = replicas
    return plan


def parse_topics_to_move(document: Any, where: str) -> list[str]:
    """The topics of a ``--topics-to-move-json-file`` (Kafka's ``parseTopicsData``), in order."""
    obj = _object(document, where)
    _version(obj, where)
    topics: list[str] = []
    for index, entry in enumerate(_list(obj, "topics", where)):
        at = f"{where}: topics[{index}]"
        topic = _topic(_object(entry, at), at)
        if topic in topics:
            raise CommandError(f"{at}: topic {topic!r} is listed twice")
        topics.append(topic)
    return topics


def parse_election(document: Any, where: str) -> list[TP]:
    """The partitions of a preferred replica election file, in order (no ``version`` field:
    Kafka's ``parsePreferredReplicaElectionData`` reads none)."""
    obj = _object(document, where)
    partitions: list[TP] = []
    for index, entry in enumerate(_list(obj, "partitions", where)):
        at = f"{where}: partitions[{index}]"
        tp, _ = _partition_entry(entry, at)
        if tp in partitions:
            raise CommandError(f"{at} ({partition_name(tp)}): the partition is listed twice")
        partitions.append(tp)
    return partitions


def reassignment_json(plan: Mapping[TP, Sequence[int]]) -> str:
    """``plan`` as Kafka's ``formatAsReassignmentJson`` writes it (compact, fields in Kafka's
    order, ``log_dirs`` all ``"any"``), partitions sorted by topic and number."""
    entries = [
        {
            "topic": topic,
            "partition": partition,
            "replicas": list(replicas),
            "log_dirs": [ANY_LOG_DIR] * len(replicas),
        }
        for (topic, partition), replicas in sorted(plan.items())
    ]
    return json.dumps(
        {"version": FILE_VERSION, "partitions": entries}, separators=(",", ":"), ensure_ascii=False
    )


# -- option values ----------------------------------------------------------------------------


def _broker(text: str, where: str) -> int:
    try:
        return parse_integer(text.strip(), 0, MAX_INT32)
    except ValueError as exc:
        raise CommandError(f"{where}: broker {exc}") from None


def parse_broker_list(text: str, option: str = "--broker-list") -> list[int]:
    """``4,5,6``: distinct broker ids, in the order given."""
    where = f"{option} {text!r}"
    if not text.strip():
        raise CommandError(f"{where}: expected broker ids such as 4,5,6")
    brokers = [_broker(part, where) for part in text.split(",")]
    repeated = sorted({b for b in brokers if brokers.count(b) > 1})
    if repeated:
        raise CommandError(f"{where}: broker {', '.join(map(str, repeated))} is listed twice")
    return brokers


def parse_replica_assignment(
    text: str, option: str = "--replica-assignment"
) -> dict[int, list[int]]:
    """``0:1:2,1:2:0``: partition N's replica list is the N-th comma-separated entry (Kafka's
    ``parseReplicaAssignment``); every list has the same length and no repeated broker."""
    where = f"{option} {text!r}"
    assignment: dict[int, list[int]] = {}
    for partition, entry in enumerate(text.split(",")):
        if not entry.strip():
            raise CommandError(f"{where}: partition {partition} has no replica list")
        replicas = [_broker(b, f"{where}: partition {partition}") for b in entry.split(":")]
        repeated = sorted({b for b in replicas if replicas.count(b) > 1})
        if repeated:
            raise CommandError(
                f"{where}: partition {partition} lists broker "
                f"{', '.join(map(str, repeated))} more than once"
            )
        if assignment and len(replicas) != len(assignment[0]):
            raise CommandError(
                f"{where}: partition {partition} has {len(replicas)} replicas, partition 0 has "
                f"{len(assignment[0])} (every partition needs the same replication factor)"
            )
        assignment[partition] = replicas
    return assignment


def parse_configs(values: Sequence[str], option: str = "--config") -> dict[str, str]:
    """``name=value`` pairs (Kafka's form: one ``=``, blanks around it dropped)."""
    configs: dict[str, str] = {}
    for text in values:
        name, sep, value = text.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or "=" in value or not name or not value:
            raise CommandError(f"{option} {text!r}: expected name=value")
        if not _CONFIG_NAME.fullmatch(name):
            raise CommandError(
                f"{option} {text!r}: {name!r} is not a config name (letters, digits, '.', '_', '-')"
            )
        if not value.isprintable():
            raise CommandError(f"{option} {text!r}: the value holds unprintable characters")
        if name in configs and configs[name] != value:
            raise CommandError(f"{option} {text!r}: {name} is also given as {configs[name]!r}")
        configs[name] = value
    return configs


def parse_config_names(values: Sequence[str], option: str = "--delete-config") -> list[str]:
    names = []
    for text in values:
        name = text.strip()
        if not _CONFIG_NAME.fullmatch(name):
            raise CommandError(f"{option} {text!r}: not a config name")
        names.append(name)
    return names
