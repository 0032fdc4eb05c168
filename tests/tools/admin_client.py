"""confluent-kafka's AdminClient, every method that needs no transactions, ACLs, SCRAM
credentials or share groups, as a script of calls run against one cluster; each call's answer
made plain data (:func:`plain`) with only what must differ between two clusters replaced: the
cluster id, topic ids, hosts and ports, and the controller (a KRaft cluster's is any of its nodes,
coordkit's the store's elected one).
"""

from __future__ import annotations

import enum
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import attrs
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    ElectionType,
    KafkaError,
    KafkaException,
    Node,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

TIMEOUT = 30.0
TOPIC, OTHER, GROUP = "admin-a", "admin-b", "admin-g"
#: The group whose configs (Kafka 4's GROUP config resource) the script sets.
CONFIG_GROUP = "admin-cg"
#: Fields that differ between any two clusters.
_DROPPED = {"cluster_id", "controller", "coordinator", "host", "port", "topic_id",
            "authorized_operations"}  # fmt: skip
#: Times a call whose answer waits for the cluster to settle is made again (a KRaft broker
#: learns of a config change a little after its controller), and the pause between.
SETTLE_ATTEMPTS, SETTLE_PAUSE = 20, 0.5
#: Bound of the whole script's process (a hang, not an answer).
PROCESS_TIMEOUT = 600.0


def _key(value: Any) -> str:
    if isinstance(value, TopicPartition):
        return f"{value.topic}:{value.partition}"
    if isinstance(value, ConfigResource):
        return f"{value.restype.name}:{value.name}"
    if isinstance(value, ConsumerGroupTopicPartitions):
        return value.group_id
    return str(plain(value))


def plain(value: Any) -> Any:
    """An answer as plain data: futures resolved (an exception is its Kafka error's name)."""
    if isinstance(value, Future):
        try:
            return plain(value.result(TIMEOUT))
        except KafkaException as exc:
            return {"error": plain(exc.args[0])}
    if isinstance(value, KafkaError):
        return value.name()
    if isinstance(value, KafkaException):
        return {"error": plain(value.args[0])}
    if isinstance(value, TopicPartition):
        return {"topic": value.topic, "partition": value.partition, "offset": value.offset,
                "error": plain(value.error) if value.error else None}  # fmt: skip
    if isinstance(value, Node):
        return {"id": value.id, "rack": value.rack}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, dict):
        return {_key(k): plain(v) for k, v in sorted(value.items(), key=lambda kv: _key(kv[0]))}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, ConfigEntry):
        return {"value": value.value, "source": plain(value.source),
                "read_only": value.is_read_only, "sensitive": value.is_sensitive,
                "synonyms": sorted(value.synonyms)}  # fmt: skip
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {k: plain(v) for k, v in sorted(vars(value).items())
                if not k.startswith("_") and k not in _DROPPED}  # fmt: skip
    return value


Call = Callable[..., Any]


#: The apis each AdminClient method sends besides ApiVersions and Metadata (librdkafka's
#: rd_kafka_*): the table of served apis in docs/serve.md is made from these and the tools'.
CALLS: dict[str, tuple[str, ...]] = {
    "create_topics": ("CreateTopics",),
    "delete_topics": ("DeleteTopics",),
    "create_partitions": ("CreatePartitions",),
    "describe_cluster": ("DescribeCluster",),
    "describe_topics": (),
    "list_topics": (),
    "describe_configs": ("DescribeConfigs",),
    "alter_configs": ("AlterConfigs",),
    "incremental_alter_configs": ("IncrementalAlterConfigs",),
    "list_offsets": ("ListOffsets",),
    "delete_records": ("DeleteRecords",),
    "elect_leaders": ("ElectLeaders",),
    "alter_consumer_group_offsets": ("FindCoordinator", "OffsetCommit"),
    "list_consumer_group_offsets": ("FindCoordinator", "OffsetFetch"),
    "list_consumer_groups": ("ListGroups",),
    "list_groups": ("ListGroups",),
    "describe_consumer_groups": ("FindCoordinator", "DescribeGroups"),
    "delete_consumer_groups": ("FindCoordinator", "DeleteGroups"),
    "(a producer)": ("Produce",),
}


@attrs.frozen
class AdminCall:
    """One AdminClient call; ``needs`` as a tool command's (``runner.Command``)."""

    name: str
    method: str
    call: Call
    needs: tuple[str, ...] = attrs.field()
    default: bool = False
    defect: str | None = None
    defect_stores: tuple[str, ...] = ("memory", "zookeeper", "redis")
    #: the call takes the cluster's bootstrap too (a producer's)
    bootstrap: bool = False
    #: the call is made again until its plain answer satisfies this
    settled: Callable[[Any], bool] | None = None

    @needs.default
    def _calls(self) -> tuple[str, ...]:
        return CALLS[self.method]


def _topic_configs(names: list[str]) -> Call:
    def describe(admin: AdminClient) -> Any:
        resource = ConfigResource("topic", TOPIC)
        described = admin.describe_configs([resource], request_timeout=TIMEOUT)[resource]
        entries = described.result(TIMEOUT)
        return {name: plain(entries.get(name)) for name in names}

    return describe


def _group_configs(names: list[str]) -> Call:
    """A group's configs (Kafka 4's GROUP config resource), those of ``names``."""

    def describe(admin: AdminClient) -> Any:
        resource = ConfigResource("group", CONFIG_GROUP)
        entries = admin.describe_configs([resource], request_timeout=TIMEOUT)[resource]
        found = entries.result(TIMEOUT)
        return {name: plain(found.get(name)) for name in names}

    return describe


def _offsets(spec: OffsetSpec) -> Call:
    return lambda admin: admin.list_offsets(
        {TopicPartition(TOPIC, p): spec for p in range(3)}, request_timeout=TIMEOUT
    )


def _produce(_admin: AdminClient, bootstrap: str) -> Any:
    """Four records into partition 0 (the records delete_records and list_offsets act on)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(4):
        producer.produce(TOPIC, key=f"k{i}", value=f"v{i}", partition=0)
    return producer.flush(TIMEOUT)


SCRIPT: tuple[AdminCall, ...] = (
        AdminCall("create-topics", "create_topics", lambda a: a.create_topics(
            [NewTopic(TOPIC, num_partitions=3, replica_assignment=[[0, 1], [1, 2], [2, 0]]),
             NewTopic(OTHER, num_partitions=1, replication_factor=1,
                      config={"retention.ms": "3600000"})],
            request_timeout=TIMEOUT), default=True),
        AdminCall("create-topics-validate-only", "create_topics", lambda a: a.create_topics(
            [NewTopic("admin-never", num_partitions=2, replication_factor=2)],
            validate_only=True, request_timeout=TIMEOUT)),
        AdminCall("create-topics-exists", "create_topics", lambda a: a.create_topics(
            [NewTopic(TOPIC, num_partitions=1, replication_factor=1)], request_timeout=TIMEOUT)),
        AdminCall("list-topics", "list_topics", lambda a: sorted(
            t for t in a.list_topics(timeout=TIMEOUT).topics if t.startswith("admin-"))),
        AdminCall("describe-cluster", "describe_cluster",
                  lambda a: a.describe_cluster(request_timeout=TIMEOUT), default=True),
        AdminCall("describe-topics", "describe_topics", lambda a: a.describe_topics(
            TopicCollection([TOPIC]), request_timeout=TIMEOUT)),
        AdminCall("create-partitions", "create_partitions", lambda a: a.create_partitions(
            [NewPartitions(TOPIC, 4, [[0, 2]])], request_timeout=TIMEOUT)),
        AdminCall("produce", "(a producer)", _produce, default=True, bootstrap=True),
        AdminCall("list-offsets-latest", "list_offsets", _offsets(OffsetSpec.latest()),
                  default=True),
        AdminCall("list-offsets-earliest", "list_offsets", _offsets(OffsetSpec.earliest())),
        # The offset of the newest record, not its time (the producer stamps it).
        AdminCall("list-offsets-max-timestamp", "list_offsets",
                  lambda a: {k: v["offset"] for k, v in plain(
                      _offsets(OffsetSpec.max_timestamp())(a)).items()}),
        # Before cleanup.policy=compact below (Kafka refuses DeleteRecords on a compacted topic).
        AdminCall("delete-records", "delete_records", lambda a: a.delete_records(
            [TopicPartition(TOPIC, 0, 1)], request_timeout=TIMEOUT), default=True),
        AdminCall("list-offsets-after-delete", "list_offsets", _offsets(OffsetSpec.earliest())),
        AdminCall("describe-configs", "describe_configs", _topic_configs(
            ["retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes"]), default=True),
        AdminCall("incremental-alter-configs", "incremental_alter_configs",
                  lambda a: a.incremental_alter_configs([ConfigResource(
                      "topic", TOPIC, incremental_configs=[ConfigEntry(
                          "retention.ms", "86400000",
                          incremental_operation=AlterConfigOpType.SET)])],
                      request_timeout=TIMEOUT)),
        AdminCall("describe-configs-altered", "describe_configs",
                  _topic_configs(["retention.ms"]),
                  settled=lambda answer: answer["retention.ms"]["value"] == "86400000"),
        AdminCall("alter-configs", "alter_configs", lambda a: a.alter_configs(
            [ConfigResource("topic", TOPIC, set_config={"cleanup.policy": "compact"})],
            request_timeout=TIMEOUT)),
        AdminCall("describe-configs-replaced", "describe_configs",
                  _topic_configs(["retention.ms", "cleanup.policy"]),
                  settled=lambda answer: answer["cleanup.policy"]["value"] == "compact"),
        # Kafka 4's group configs (the GROUP config resource).
        AdminCall("describe-group-configs", "describe_configs", _group_configs(
            ["consumer.session.timeout.ms", "share.isolation.level"])),
        AdminCall("incremental-alter-group-configs", "incremental_alter_configs",
                  lambda a: a.incremental_alter_configs([ConfigResource(
                      "group", CONFIG_GROUP, incremental_configs=[ConfigEntry(
                          "consumer.heartbeat.interval.ms", "6000",
                          incremental_operation=AlterConfigOpType.SET)])],
                      request_timeout=TIMEOUT)),
        AdminCall("describe-group-configs-altered", "describe_configs",
                  _group_configs(["consumer.heartbeat.interval.ms"]),
                  settled=lambda answer: (
                      answer["consumer.heartbeat.interval.ms"]["value"] == "6000")),
        AdminCall("incremental-alter-group-configs-refused", "incremental_alter_configs",
                  lambda a: a.incremental_alter_configs([ConfigResource(
                      "group", CONFIG_GROUP, incremental_configs=[ConfigEntry(
                          "consumer.heartbeat.interval.ms", "1",
                          incremental_operation=AlterConfigOpType.SET)])],
                      request_timeout=TIMEOUT)),
        AdminCall("alter-consumer-group-offsets", "alter_consumer_group_offsets",
                  lambda a: a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                      GROUP, [TopicPartition(TOPIC, 0, 2), TopicPartition(TOPIC, 1, 0)])],
                      request_timeout=TIMEOUT), default=True),
        AdminCall("list-consumer-group-offsets", "list_consumer_group_offsets",
                  lambda a: a.list_consumer_group_offsets(
                      [ConsumerGroupTopicPartitions(GROUP)], request_timeout=TIMEOUT)),
        AdminCall("list-consumer-groups", "list_consumer_groups", lambda a: sorted(
            (g.group_id, g.is_simple_consumer_group, plain(g.state))
            for g in a.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT).valid
            if g.group_id.startswith("admin-"))),
        AdminCall("list-groups", "list_groups", lambda a: sorted(
            g.id for g in a.list_groups(timeout=TIMEOUT) if g.id.startswith("admin-"))),
        AdminCall("describe-consumer-groups", "describe_consumer_groups",
                  lambda a: a.describe_consumer_groups([GROUP], request_timeout=TIMEOUT)),
        AdminCall("elect-leaders", "elect_leaders", lambda a: a.elect_leaders(
            ElectionType.PREFERRED,
            # (no request_timeout: confluent-kafka 2.16's binding fails on any keyword here)
            [TopicPartition(TOPIC, 0)])),
        AdminCall("delete-consumer-groups", "delete_consumer_groups",
                  lambda a: a.delete_consumer_groups([GROUP], request_timeout=TIMEOUT)),
        AdminCall("delete-topics", "delete_topics",
                  # Both: the Kafka cluster is the session's (the tools' script runs on it too).
                  lambda a: a.delete_topics([OTHER, TOPIC], request_timeout=TIMEOUT)),
)  # fmt: skip
BY_NAME = {call.name: call for call in SCRIPT}


def run_admin_script(calls: tuple[AdminCall, ...], bootstrap: str) -> dict[str, Any]:
    """Every call in order against one cluster; an exception raised is its Kafka error."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    answers: dict[str, Any] = {}
    for call in calls:
        try:
            for _ in range(SETTLE_ATTEMPTS if call.settled else 1):
                answer = plain(call.call(admin, bootstrap) if call.bootstrap else call.call(admin))
                if call.settled is None or call.settled(answer):
                    break
                time.sleep(SETTLE_PAUSE)
            answers[call.name] = answer
        except KafkaException as exc:
            answers[call.name] = {"raised": plain(exc.args[0])}
        except Exception as exc:  # the binding's own failure, which the test refuses
            answers[call.name] = {"crashed": f"{type(exc).__name__}: {exc}"}
    return answers


def run_in_process(calls: tuple[AdminCall, ...], bootstrap: str) -> dict[str, Any]:
    """:func:`run_admin_script` in a Python process of its own (librdkafka's threads and a
    crash of the binding stay out of pytest's), its answers read back as JSON."""
    tests = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "tools.admin_client", bootstrap, *(c.name for c in calls)],
        capture_output=True, text=True, timeout=PROCESS_TIMEOUT, check=False, cwd=tests,
        env={**os.environ, "PYTHONFAULTHANDLER": "1", "PYTHONPATH": os.pathsep.join([str(tests), *sys.path])},
    )  # fmt: skip
    assert done.returncode == 0, (
        f"the AdminClient script failed ({done.returncode}):\n{done.stderr}"
    )
    answers: dict[str, Any] = json.loads(done.stdout)
    return answers


if __name__ == "__main__":
    _bootstrap, *_names = sys.argv[1:]
    _answers = run_admin_script(tuple(BY_NAME[name] for name in _names), _bootstrap)
    print(json.dumps(_answers, default=str), flush=True)
    # Not Python's finalisation: librdkafka's handles freed by it crash the process now and then
    # (SIGSEGV after the answers were printed, confluent-kafka 2.16).
    os._exit(0)
