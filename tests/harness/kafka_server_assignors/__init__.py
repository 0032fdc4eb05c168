"""Kafka 4's server-side assignors from the fetched jars, driven from Python: the differential test
(tests/unit/assignors/test_server_vs_kafka.py) and the benchmark (bench_server_assignors.py).

``KafkaServerAssignorHarness.java`` beside this file is compiled with javac against the jars of
Kafka 4.4 (``.cache/kafka/4.4.0/lib``) on first use (``kafka_tools.compile_java``: the classes
are cached under ``.cache/java-programs/``, by the digest of the source and the jars' manifest).
A missing JDK or jar cache raises :class:`KafkaUnavailableError` naming the fix: tests fail with
it, they never skip.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from coordkit.strategies.target_assignment import (
    GroupSpec,
    SubscriptionType,
    TargetAssignment,
    TopicDescriber,
)
from coordkit.testing.servers.kafka_tools import (
    KAFKA_KRAFT_VERSION,
    compile_java,
    require_java,
)

SOURCE = Path(__file__).with_name("KafkaServerAssignorHarness.java")
MAIN_CLASS = "KafkaServerAssignorHarness"


def _signed(bits: int) -> int:
    return bits - (1 << 64) if bits >= 1 << 63 else bits


def compiled_classpath(version: str = KAFKA_KRAFT_VERSION) -> str:
    """The classpath that runs the harness (compiled now if not cached) against Kafka's jars."""
    return compile_java(SOURCE, MAIN_CLASS, version)


def encode(group: GroupSpec, topics: TopicDescriber, topic_ids: Sequence[uuid.UUID]) -> str:
    """The harness's ``group`` block for ``group`` (topics numbered as in ``topic_ids``)."""
    index = {t: i for i, t in enumerate(topic_ids)}
    homogeneous = group.subscription_type is SubscriptionType.HOMOGENEOUS
    lines = [f"group {len(topic_ids)} {len(group.members)} {int(homogeneous)}"]
    for t in topic_ids:
        lines.append(f"topic {_signed(t.int >> 64)} {_signed(t.int & (2**64 - 1))} "
                     f"{topics.num_partitions(t)}")  # fmt: skip
    for member, spec in group.members.items():
        fields = [
            "member", member, spec.instance_id or "-", spec.rack or "-",
            str(len(spec.subscribed_topic_ids)), *(str(index[t]) for t in spec.subscribed_topic_ids),
            str(len(spec.assignment)),
        ]  # fmt: skip
        for t, partitions in spec.assignment.items():
            fields += [str(index[t]), str(len(partitions)), *map(str, partitions)]
        lines.append(" ".join(fields))
    return "\n".join(lines) + "\n"


def _topic_ids(group: GroupSpec, topics: TopicDescriber) -> list[uuid.UUID]:
    """The described topics, then those subscribed to but unknown (described with ``-1``
    partitions: Kafka's describer answers so)."""
    unknown = {t for m in group.members.values() for t in m.subscribed_topic_ids} - set(
        topics.topics
    )
    return [*topics.topics, *sorted(unknown)]


class KafkaServerAssignors:
    """One JVM running Kafka's ``uniform`` and ``range`` (and share groups' ``simple``) on the
    groups handed to it."""

    def __init__(self, *, jvm_options: Sequence[str] = ("-Xms2g", "-Xmx4g")):
        classpath = compiled_classpath()
        self._process = subprocess.Popen(
            [require_java(), *jvm_options, "-cp", classpath, MAIN_CLASS],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8",
        )  # fmt: skip

    def __enter__(self) -> KafkaServerAssignors:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        self._process.wait(timeout=60)

    def _send(self, text: str) -> list[str]:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._process.stdin.write(text)
        self._process.stdin.flush()
        lines = []
        while (line := self._process.stdout.readline()) != "end\n":
            if not line:
                raise RuntimeError("Kafka's harness exited (see its stderr above)")
            lines.append(line.rstrip("\n"))
        return lines

    def assign(self, name: str, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment | str:
        """Kafka's target for ``group`` (members it leaves out get nothing), or its error text."""
        topic_ids = _topic_ids(group, topics)
        lines = self._send(encode(group, topics, topic_ids) + f"assign {name}\n")
        if lines and lines[0].startswith("error "):
            return lines[0].removeprefix("error ")
        out: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in group.members}
        for line in lines:
            _, member, topic, *partitions = line.split(" ")
            out[member][topic_ids[int(topic)]] = sorted(int(p) for p in partitions)
        return TargetAssignment(out)

    def load(self, group: GroupSpec, topics: TopicDescriber) -> None:
        """Hand the JVM a group to time (:meth:`time`)."""
        assert self._process.stdin is not None
        self._process.stdin.write(encode(group, topics, _topic_ids(group, topics)))

    def time(self, name: str, rounds: int) -> list[int]:
        """Nanoseconds of ``rounds`` calls of Kafka's ``assign`` on the loaded group."""
        return [int(line.split(" ")[1]) for line in self._send(f"time {name} {rounds}\n")]
