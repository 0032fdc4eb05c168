"""The tools' script: every command, in the order it runs against each cluster.

Both clusters have brokers 0, 1 and 2; topics are created with an explicit replica assignment
(each cluster places replicas its own way otherwise), so leaders, replicas and ISRs compare as
they are. Commands marked ``default`` are the default run's share (one or two per tool, on the
memory store); every command runs in ``tox -e py311-tools`` on memory, ZooKeeper and Redis.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tools.runner import Command, in_order, json_lines, lines, log_dirs, table_rows

TOPIC, OTHER, CONFIGURED, MOVED, SHRUNK, GROUP, KCAT_GROUP = (
    "tools-a", "tools-b", "tools-c", "tools-r", "tools-s", "tools-g", "tools-kg")  # fmt: skip
#: The quota entities, the group with configs and the client-metrics subscription of the script.
QUOTA_USER, QUOTA_CLIENT, QUOTA_IP, CONFIG_GROUP, SUBSCRIPTION = (
    "tools-u", "tools-cl", "10.9.8.7", "tools-cg", "tools-sub")  # fmt: skip
B = "--bootstrap-server"
RECORDS = "".join(f"k{i}:v{i}\n" for i in range(4))
LINGER = "linger.ms=1000"


#: What a member of a classic group sends (kcat -G, the console consumer with --group).
GROUP_MEMBER = ("FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "OffsetFetch",
                "OffsetCommit", "LeaveGroup", "ListOffsets", "Fetch")  # fmt: skip
#: What kafka-consumer-groups sends to describe a group (Kafka 4's admin client asks
#: ConsumerGroupDescribe first, DescribeGroups for a classic group).
GROUP_DESCRIBE = ("FindCoordinator", "ConsumerGroupDescribe", "DescribeGroups", "OffsetFetch",
                  "ListOffsets")  # fmt: skip
#: The apis a tool's subcommand sends besides ApiVersions and Metadata (which every client
#: sends), by the tool and an option of the command: the table of served apis in docs/serve.md
#: says which tools exercise each api from these (tools/api_coverage.py).
CALLS: dict[tuple[str, str], tuple[str, ...]] = {
    ("kafka-topics", "--create"): ("CreateTopics",),
    ("kafka-topics", "--describe"): ("DescribeTopicPartitions",),
    ("kafka-topics", "--alter"): ("CreatePartitions",),
    ("kafka-topics", "--delete"): ("DeleteTopics",),
    ("kcat", "-P"): ("Produce",),
    ("kcat", "-C"): ("ListOffsets", "Fetch"),
    ("kcat", "-Q"): ("ListOffsets",),
    ("kcat", "-G"): GROUP_MEMBER,
    ("kafka-console-consumer", "--group"): GROUP_MEMBER,
    ("kafka-get-offsets", B): ("ListOffsets",),
    ("kafka-consumer-groups", "--list"): ("ListGroups",),
    ("kafka-consumer-groups", "--describe"): GROUP_DESCRIBE,
    ("kafka-consumer-groups", "--reset-offsets"): GROUP_DESCRIBE,
    ("kafka-consumer-groups", "--execute"): ("OffsetCommit",),
    ("kafka-consumer-groups", "--delete-offsets"): ("OffsetDelete",),
    ("kafka-consumer-groups", "--delete"): ("DeleteGroups",),
    ("kafka-configs", "--describe"): ("DescribeConfigs",),
    ("kafka-configs", "--alter"): ("DescribeConfigs", "IncrementalAlterConfigs"),
    ("kafka-reassign-partitions", "--list"): ("ListPartitionReassignments",),
    ("kafka-reassign-partitions", "--execute"): ("AlterPartitionReassignments",
                                                 "ListPartitionReassignments"),
    ("kafka-reassign-partitions", "--verify"): ("ListPartitionReassignments",),
    ("kafka-reassign-partitions", "--cancel"): ("AlterPartitionReassignments",
                                                "ListPartitionReassignments"),
    ("kafka-leader-election", "--election-type"): ("ElectLeaders",),
    ("kafka-delete-records", "--offset-json-file"): ("DeleteRecords",),
    ("kafka-log-dirs", "--describe"): ("DescribeLogDirs",),
}  # fmt: skip


def c(name: str, tool: str, *args: str, **options: Any) -> Command:
    """A command; its ``needs`` are what :data:`CALLS` says of its options, and any given."""
    calls = [api for (named, option), apis in CALLS.items() if named == tool and option in args
             for api in apis]  # fmt: skip
    needs = dict.fromkeys([*calls, *options.pop("needs", ())])
    return Command(name, tool, args, needs=tuple(needs), **options)


def topics(name: str, *args: str, **options: Any) -> Command:
    return c(name, "kafka-topics", B, "{bootstrap}", *args, **options)


def configs(name: str, *args: str, **options: Any) -> Command:
    return c(name, "kafka-configs", B, "{bootstrap}", *args, **options)


#: What kafka-configs sends for quotas: DescribeClientQuotas (and, for users, the SCRAM
#: credentials) to describe, AlterClientQuotas to alter.
QUOTA_DESCRIBE = ("DescribeClientQuotas",)
USER_DESCRIBE = ("DescribeClientQuotas", "DescribeUserScramCredentials")
QUOTA_ALTER = ("AlterClientQuotas",)


def quotas(name: str, *args: str, needs: tuple[str, ...], **options: Any) -> Command:
    """A kafka-configs command on client quotas (its apis are not :data:`CALLS`' configs)."""
    return Command(name, "kafka-configs", (B, "{bootstrap}", *args), needs=needs, **options)


def groups(name: str, *args: str, **options: Any) -> Command:
    return c(name, "kafka-consumer-groups", B, "{bootstrap}", *args, **options)


def offsets(name: str, *args: str, **options: Any) -> Command:
    return c(name, "kafka-get-offsets", B, "{bootstrap}", *args, **options)


def reassign(name: str, *args: str, **options: Any) -> Command:
    return c(name, "kafka-reassign-partitions", B, "{bootstrap}", *args, **options)


def kcat(name: str, *args: str, **options: Any) -> Command:
    return c(name, "kcat", "-b", "{bootstrap}", *args, **options)


def generated_current(text: str) -> list[str]:
    """``--generate``'s current assignment (its proposal starts at a random broker)."""
    out = lines(text)
    if "Current partition replica assignment" in out:
        return out[: out.index("Current partition replica assignment") + 2]
    return out


def kcat_metadata(text: str) -> list[Any]:
    """kcat -L: the broker that answered is any of them."""
    return table_rows(re.sub(r"\(from broker \d+: [^)]*\)", "(from broker)", text))


def kcat_metadata_json(text: str) -> list[Any]:
    """kcat -L -J: without the broker that answered nor the controller (KRaft's is any)."""
    out = []
    for document in json_lines(text):
        out.append({k: v for k, v in document.items()
                    if k not in ("originating_broker", "controllerid")}
                   if isinstance(document, dict) else document)  # fmt: skip
    return out


REASSIGNMENT = json.dumps({"version": 1, "partitions": [
    {"topic": MOVED, "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]})  # fmt: skip
SHRINKING = json.dumps({"version": 1, "partitions": [
    {"topic": SHRUNK, "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]})  # fmt: skip
TOPICS_TO_MOVE = json.dumps({"version": 1, "topics": [{"topic": TOPIC}]})
ELECTION = json.dumps({"partitions": [{"topic": TOPIC, "partition": 1}]})
DELETE_RECORDS = json.dumps(
    {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "offset": 1}]}
)

SCRIPT: tuple[Command, ...] = (
    # kafka-topics: create, list, describe, alter (delete at the end)
    topics("topics-create", "--create", "--topic", TOPIC, "--replica-assignment",
           "0:1,1:2,2:0", default=True),
    topics("topics-create-partitions", "--create", "--topic", OTHER, "--partitions", "2",
           "--replication-factor", "3"),
    topics("topics-create-config", "--create", "--topic", CONFIGURED, "--replica-assignment",
           "0:1", "--config", "retention.ms=3600000", "--config", "max.message.bytes=100000"),
    topics("topics-create-exists", "--create", "--topic", TOPIC, "--replica-assignment", "0:1"),
    topics("topics-create-if-not-exists", "--create", "--if-not-exists", "--topic", TOPIC,
           "--replica-assignment", "0:1"),
    topics("topics-list", "--list"),
    topics("topics-list-exclude-internal", "--list", "--exclude-internal"),
    topics("topics-describe", "--describe", "--topic", TOPIC, needs=("DescribeConfigs",)),
    topics("topics-describe-overrides", "--describe", "--topics-with-overrides",
           needs=("DescribeConfigs",)),
    topics("topics-describe-under-replicated", "--describe", "--under-replicated-partitions"),
    topics("topics-describe-unavailable", "--describe", "--unavailable-partitions"),
    topics("topics-describe-at-min-isr", "--describe", "--at-min-isr-partitions",
           needs=("DescribeConfigs",)),
    topics("topics-describe-under-min-isr", "--describe", "--under-min-isr-partitions",
           needs=("DescribeConfigs",)),
    topics("topics-alter-partitions", "--alter", "--topic", OTHER, "--partitions", "3"),
    topics("topics-alter-assignment", "--alter", "--topic", CONFIGURED, "--partitions", "2",
           "--replica-assignment", "0:1,1:2"),
    # kcat: produce, metadata, consume, query, a group. Each produce lingers a second, so its four
    # records go in one batch on both clusters: with librdkafka's 5 ms a loaded machine split
    # them into two, and kafka-log-dirs' sizes differed by a batch header (61 bytes).
    kcat("kcat-produce", "-P", "-t", TOPIC, "-p", "0", "-K:", "-X", LINGER, "-l",
         "{dir}/records.txt", files=(("records.txt", RECORDS),), default=True),
    kcat("kcat-produce-stdin", "-P", "-t", TOPIC, "-p", "1", "-K:", "-X", LINGER, input=RECORDS),
    # Records in every partition: a consumer that reads them all has a position in each, whatever
    # the order it fetched them in (its commit on leaving then names every partition).
    kcat("kcat-produce-partition-2", "-P", "-t", TOPIC, "-p", "2", "-K:", "-X", LINGER,
         input=RECORDS),
    kcat("kcat-metadata", "-L", "-t", TOPIC, normalise=kcat_metadata),
    kcat("kcat-metadata-json", "-L", "-J", "-t", TOPIC, normalise=kcat_metadata_json),
    kcat("kcat-consume", "-C", "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-f",
         "%k=%s@%o\n", normalise=in_order),
    kcat("kcat-consume-from-offset", "-C", "-t", TOPIC, "-p", "1", "-o", "2", "-c", "1", "-f",
         "%k=%s@%o\n", normalise=in_order),
    kcat("kcat-consume-from-end", "-C", "-t", TOPIC, "-p", "0", "-o", "-2", "-e", "-f",
         "%k=%s@%o\n", normalise=in_order),
    kcat("kcat-query-offsets", "-Q", "-t", f"{TOPIC}:0:-1", "-t", f"{TOPIC}:1:-2"),
    kcat("kcat-group", "-G", KCAT_GROUP, "-o", "beginning", "-e", "-f", "%t %p %k=%s@%o\n",
         TOPIC, default=True),
    # kafka-get-offsets
    offsets("get-offsets", "--topic", TOPIC, default=True),
    offsets("get-offsets-earliest", "--topic", TOPIC, "--time", "earliest"),
    offsets("get-offsets-max-timestamp", "--topic", TOPIC, "--time", "max-timestamp"),
    offsets("get-offsets-partitions", "--topic", TOPIC, "--partitions", "0,2"),
    offsets("get-offsets-topic-partitions", "--topic-partitions", "tools-.*:0"),
    offsets("get-offsets-all", "--exclude-internal-topics"),
    # kafka-consumer-groups (a group of Kafka's console consumer, and kcat's)
    c("console-consumer", "kafka-console-consumer", B, "{bootstrap}", "--topic", TOPIC,
      "--group", GROUP, "--from-beginning", "--max-messages", "12", "--timeout-ms", "60000",
      "--formatter-property", "print.key=true"),
    groups("groups-list", "--list"),
    groups("groups-list-state", "--list", "--state"),
    groups("groups-describe", "--describe", "--group", KCAT_GROUP, default=True),
    groups("groups-describe-offsets", "--describe", "--offsets", "--group", GROUP),
    groups("groups-describe-members", "--describe", "--members", "--group", GROUP),
    groups("groups-describe-members-verbose", "--describe", "--members", "--verbose",
           "--group", GROUP),
    groups("groups-describe-state", "--describe", "--state", "--group", GROUP),
    groups("groups-describe-all", "--describe", "--all-groups"),
    groups("groups-describe-missing", "--describe", "--group", "tools-nogroup"),
    groups("groups-reset-earliest-dry-run", "--reset-offsets", "--group", GROUP, "--topic",
           TOPIC, "--to-earliest", "--dry-run"),
    groups("groups-reset-export", "--reset-offsets", "--group", GROUP, "--all-topics",
           "--to-latest", "--dry-run", "--export"),
    groups("groups-reset-to-offset", "--reset-offsets", "--group", GROUP, "--topic",
           f"{TOPIC}:0", "--to-offset", "1", "--execute"),
    groups("groups-reset-shift-by", "--reset-offsets", "--group", GROUP, "--topic", TOPIC,
           "--shift-by", "-1", "--execute"),
    groups("groups-reset-to-datetime", "--reset-offsets", "--group", GROUP, "--topic", TOPIC,
           "--to-datetime", "2020-01-01T00:00:00.000", "--dry-run"),
    groups("groups-reset-by-duration", "--reset-offsets", "--group", GROUP, "--topic", TOPIC,
           "--by-duration", "PT1H", "--dry-run"),
    groups("groups-reset-from-file", "--reset-offsets", "--group", GROUP, "--from-file",
           "{dir}/reset.csv", "--execute", files=(("reset.csv", f"{TOPIC},1,2\n"),)),
    groups("groups-delete-offsets", "--delete-offsets", "--group", GROUP, "--topic", TOPIC,
           needs=("OffsetDelete",)),
    groups("groups-delete", "--delete", "--group", KCAT_GROUP, needs=("DeleteGroups",)),
    # kafka-configs
    configs("configs-describe", "--describe", "--entity-type", "topics", "--entity-name",
            TOPIC, default=True),
    configs("configs-describe-overrides", "--describe", "--entity-type", "topics",
            "--entity-name", CONFIGURED),
    configs("configs-alter-add", "--alter", "--entity-type", "topics", "--entity-name", TOPIC,
            "--add-config", "retention.ms=86400000,cleanup.policy=compact",
            needs=("DescribeConfigs", "IncrementalAlterConfigs")),
    configs("configs-describe-altered", "--describe", "--entity-type", "topics", "--entity-name",
            TOPIC, settled=lambda out: "retention.ms=86400000" in out),
    configs("configs-alter-delete", "--alter", "--entity-type", "topics", "--entity-name", TOPIC,
            "--delete-config", "cleanup.policy",
            needs=("DescribeConfigs", "IncrementalAlterConfigs")),
    configs("configs-alter-bad-value", "--alter", "--entity-type", "topics", "--entity-name",
            TOPIC, "--add-config", "retention.ms=soon",
            needs=("DescribeConfigs", "IncrementalAlterConfigs")),
    configs("configs-describe-all-topics", "--describe", "--entity-type", "topics"),
    configs("configs-describe-all", "--describe", "--all", "--entity-type", "topics",
            "--entity-name", CONFIGURED),
    configs("configs-describe-broker", "--describe", "--entity-type", "brokers", "--entity-name",
            "0"),
    configs("configs-describe-broker-default", "--describe", "--entity-type", "brokers",
            "--entity-default"),
    configs("configs-alter-broker-default", "--alter", "--entity-type", "brokers",
            "--entity-default", "--add-config", "log.cleaner.min.cleanable.ratio=0.6",
            needs=("DescribeConfigs", "IncrementalAlterConfigs")),
    configs("configs-describe-after-broker-default", "--describe", "--all", "--entity-type",
            "topics", "--entity-name", CONFIGURED),
    # kafka-configs: client quotas (users, a user's client id, client ids, ips; names, defaults)
    quotas("configs-quota-alter-user", "--alter", "--entity-type", "users", "--entity-name",
           QUOTA_USER, "--add-config", "producer_byte_rate=1024,request_percentage=12.5",
           needs=QUOTA_ALTER),
    quotas("configs-quota-alter-user-client", "--alter", "--entity-type", "users",
           "--entity-name", QUOTA_USER, "--entity-type", "clients", "--entity-name",
           QUOTA_CLIENT, "--add-config", "consumer_byte_rate=2048", needs=QUOTA_ALTER),
    quotas("configs-quota-alter-client-default", "--alter", "--entity-type", "clients",
           "--entity-default", "--add-config", "controller_mutation_rate=100",
           needs=QUOTA_ALTER),
    quotas("configs-quota-alter-ip", "--alter", "--entity-type", "ips", "--entity-name",
           QUOTA_IP, "--add-config", "connection_creation_rate=5", needs=QUOTA_ALTER),
    quotas("configs-quota-describe-user", "--describe", "--entity-type", "users",
           "--entity-name", QUOTA_USER, needs=USER_DESCRIBE,
           settled=lambda out: "producer_byte_rate" in out),
    quotas("configs-quota-describe-users", "--describe", "--entity-type", "users",
           needs=USER_DESCRIBE),
    quotas("configs-quota-describe-user-clients", "--describe", "--entity-type", "users",
           "--entity-name", QUOTA_USER, "--entity-type", "clients", needs=QUOTA_DESCRIBE,
           settled=lambda out: "consumer_byte_rate" in out),
    quotas("configs-quota-describe-clients", "--describe", "--entity-type", "clients",
           needs=QUOTA_DESCRIBE, settled=lambda out: "controller_mutation_rate" in out),
    quotas("configs-quota-describe-client-default", "--describe", "--entity-type", "clients",
           "--entity-default", needs=QUOTA_DESCRIBE),
    quotas("configs-quota-describe-ips", "--describe", "--entity-type", "ips",
           needs=QUOTA_DESCRIBE, settled=lambda out: QUOTA_IP in out),
    quotas("configs-quota-alter-fraction", "--alter", "--entity-type", "users", "--entity-name",
           QUOTA_USER, "--add-config", "producer_byte_rate=1.5", needs=QUOTA_ALTER),
    quotas("configs-quota-alter-unknown", "--alter", "--entity-type", "users", "--entity-name",
           QUOTA_USER, "--add-config", "bogus=1", needs=()),
    quotas("configs-quota-delete", "--alter", "--entity-type", "users", "--entity-name",
           QUOTA_USER, "--delete-config", "request_percentage", needs=QUOTA_ALTER),
    quotas("configs-quota-describe-after-delete", "--describe", "--entity-type", "users",
           "--entity-name", QUOTA_USER, needs=USER_DESCRIBE,
           settled=lambda out: "request_percentage" not in out),
    quotas("configs-quota-delete-client-default", "--alter", "--entity-type", "clients",
           "--entity-default", "--delete-config", "controller_mutation_rate", needs=QUOTA_ALTER),
    # kafka-configs: Kafka 4's group configs and client-metrics subscriptions
    configs("configs-group-alter", "--alter", "--entity-type", "groups", "--entity-name",
            CONFIG_GROUP, "--add-config", "consumer.session.timeout.ms=50000",
            needs=("DescribeConfigs", "IncrementalAlterConfigs")),
    configs("configs-group-describe", "--describe", "--entity-type", "groups", "--entity-name",
            CONFIG_GROUP, settled=lambda out: "50000" in out),
    configs("configs-group-describe-all", "--describe", "--entity-type", "groups",
            needs=("ListConfigResources",), settled=lambda out: CONFIG_GROUP in out),
    configs("configs-group-alter-out-of-range", "--alter", "--entity-type", "groups",
            "--entity-name", CONFIG_GROUP, "--add-config", "consumer.session.timeout.ms=1000",
            needs=("DescribeConfigs", "IncrementalAlterConfigs")),
    configs("configs-group-delete", "--alter", "--entity-type", "groups", "--entity-name",
            CONFIG_GROUP, "--delete-config", "consumer.session.timeout.ms",
            needs=("DescribeConfigs", "IncrementalAlterConfigs")),
    configs("configs-client-metrics-alter", "--alter", "--entity-type", "client-metrics",
            "--entity-name", SUBSCRIPTION, "--add-config",
            "interval.ms=1000,metrics=org.apache.kafka.producer.",
            needs=("DescribeConfigs", "IncrementalAlterConfigs")),
    configs("configs-client-metrics-describe", "--describe", "--entity-type", "client-metrics",
            "--entity-name", SUBSCRIPTION, settled=lambda out: "interval.ms=1000" in out),
    configs("configs-client-metrics-describe-all", "--describe", "--entity-type",
            "client-metrics", needs=("ListConfigResources",),
            settled=lambda out: SUBSCRIPTION in out),
    configs("configs-client-metrics-alter-bad", "--alter", "--entity-type", "client-metrics",
            "--entity-name", SUBSCRIPTION, "--add-config", "interval.ms=10",
            needs=("DescribeConfigs", "IncrementalAlterConfigs")),
    configs("configs-client-metrics-delete", "--alter", "--entity-type", "client-metrics",
            "--entity-name", SUBSCRIPTION, "--delete-config", "interval.ms,metrics",
            needs=("DescribeConfigs", "IncrementalAlterConfigs")),
    # kafka-reassign-partitions
    reassign("reassign-list", "--list", needs=("ListPartitionReassignments",), default=True),
    topics("topics-create-to-move", "--create", "--topic", MOVED, "--replica-assignment", "0:1"),
    topics("topics-create-to-shrink", "--create", "--topic", SHRUNK, "--replica-assignment",
           "1:0:2"),
    reassign("reassign-generate", "--generate", "--topics-to-move-json-file", "{dir}/move.json",
             "--broker-list", "0,1,2", files=(("move.json", TOPICS_TO_MOVE),),
             normalise=generated_current),
    reassign("reassign-execute", "--execute", "--reassignment-json-file", "{dir}/reassign.json",
             files=(("reassign.json", REASSIGNMENT),),
             needs=("AlterPartitionReassignments", "ListPartitionReassignments")),
    reassign("reassign-verify", "--verify", "--reassignment-json-file", "{dir}/reassign.json",
             needs=("ListPartitionReassignments",),
             settled=lambda out: "is complete" in out and "still in progress" not in out),
    reassign("reassign-cancel", "--cancel", "--reassignment-json-file", "{dir}/reassign.json",
             needs=("AlterPartitionReassignments", "ListPartitionReassignments")),
    reassign("reassign-execute-shrink", "--execute", "--reassignment-json-file",
             "{dir}/shrink.json", files=(("shrink.json", SHRINKING),),
             needs=("AlterPartitionReassignments", "ListPartitionReassignments")),
    reassign("reassign-verify-shrink", "--verify", "--reassignment-json-file",
             "{dir}/shrink.json", needs=("ListPartitionReassignments",),
             settled=lambda out: "is complete" in out and "still in progress" not in out),
    # kafka-leader-election
    c("leader-election-preferred-all", "kafka-leader-election", B, "{bootstrap}",
      "--election-type", "preferred", "--all-topic-partitions", needs=("ElectLeaders",),
      default=True),
    c("leader-election-preferred-partition", "kafka-leader-election", B, "{bootstrap}",
      "--election-type", "preferred", "--topic", TOPIC, "--partition", "0",
      needs=("ElectLeaders",)),
    c("leader-election-unclean-file", "kafka-leader-election", B, "{bootstrap}",
      "--election-type", "unclean", "--path-to-json-file", "{dir}/election.json",
      files=(("election.json", ELECTION),), needs=("ElectLeaders",)),
    # kafka-delete-records
    c("delete-records", "kafka-delete-records", B, "{bootstrap}", "--offset-json-file",
      "{dir}/delete.json", files=(("delete.json", DELETE_RECORDS),), needs=("DeleteRecords",),
      default=True),
    offsets("get-offsets-earliest-after-delete", "--topic", f"{TOPIC}", "--partitions", "0",
            "--time", "earliest"),
    # kafka-log-dirs
    c("log-dirs-describe-topic", "kafka-log-dirs", B, "{bootstrap}", "--describe",
      "--topic-list", TOPIC, needs=("DescribeLogDirs",), normalise=log_dirs, default=True),
    c("log-dirs-describe", "kafka-log-dirs", B, "{bootstrap}", "--describe", "--broker-list",
      "0,1", needs=("DescribeLogDirs",), normalise=log_dirs),
    # kafka-topics --delete
    topics("topics-delete", "--delete", "--topic", OTHER),
    topics("topics-list-after-delete", "--list",
           settled=lambda out: OTHER not in out.split()),
)  # fmt: skip
BY_NAME = {run.name: run for run in SCRIPT}
assert len(BY_NAME) == len(SCRIPT), "command names are unique"
