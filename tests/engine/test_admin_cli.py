"""Issue 14, item 3: Kafka's admin tools in Kafka's vocabulary, on any store, without starting
brokers — ``coordkit topics`` (kafka-topics.sh --zookeeper), ``coordkit reassign``
(kafka-reassign-partitions.sh), ``coordkit elect-preferred`` (kafka-preferred-replica-election.sh)
and ``coordkit brokers``, and ``coordkit delete-node`` (zkCli's ``delete``); on every backend given
with ``--backend``.

Three kinds of tree: one the engine wrote (a running cluster whose controller acts on what the
commands write), one written by hand in Kafka's layout with Kafka's exact JSON (no cluster), and
the files Kafka's own tools read and write. Refused input is one ``error:`` line naming the option,
file or entry, exit status 2, and the store unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from coordkit.cli import cli
from coordkit.engine import Cluster, EngineConfig
from coordkit.errors import NoNodeError
from coordkit.kafka import layout
from coordkit.plugins import get_plugin_manager, open_store
from coordkit.store import MetadataStore
from coordkit.strategies.placement import BrokerMetadata, ClusterLayout
from harness.cli import one_error_line, snapshot
from harness.waiting import wait_for

FAST = EngineConfig(
    replica_fetch_wait_max=0.02,
    # Dead brokers leave ISRs through the controller at once; a lag time a loaded machine's
    # thread stalls cannot reach keeps live followers in.
    replica_lag_time_max=5.0,
    auto_leader_rebalance=False,
)


def invoke(*args: str, columns: int = 200) -> Result:
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": str(columns)})


def ok(*args: str, columns: int = 200) -> Result:
    result = invoke(*args, columns=columns)
    assert result.exit_code == 0, result.output
    return result


def proposal(output: str) -> str:
    """The JSON line ``reassign --generate`` prints after its "Proposed ..." heading."""
    lines = output.splitlines()
    return lines[lines.index("Proposed partition reassignment configuration") + 1]


# -- a tree written by hand, as Kafka 2.x brokers, controller and tools write it -----------------

BROKER_JSON = (
    '{{"listener_security_protocol_map":{{"PLAINTEXT":"PLAINTEXT"}},'
    '"endpoints":["PLAINTEXT://kafka-{id}:9092"],"rack":"{rack}","jmx_port":-1,'
    '"host":"kafka-{id}","timestamp":"1700000000000","port":9092,"version":4}}'
)
ORDERS = (
    b'{"version":2,"partitions":{"0":[1,2],"1":[2,3],"2":[3,1]},'
    b'"adding_replicas":{},"removing_replicas":{}}'
)
STATES = {
    0: b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":5,"isr":[1,2]}',
    1: b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":2,"isr":[2]}',
    2: b'{"controller_epoch":3,"leader":-1,"version":1,"leader_epoch":7,"isr":[3]}',
}
ORDERS_CONFIG = b'{"version":1,"config":{"retention.ms":"86400000","cleanup.policy":"compact"}}'


def write_kafka_tree(store: MetadataStore) -> MetadataStore:
    """Brokers 1, 2, 4 registered (ephemeral, on ``store``'s session) and 3 registered by hand
    (persistent); topic ``orders`` (3 partitions: one healthy, one under-replicated, one without
    a leader) with config overrides, and ``audit`` queued for deletion; a controller."""
    for broker, rack in ((1, "r1"), (2, "r2"), (3, "r1"), (4, "r2")):
        store.create(
            f"/brokers/ids/{broker}",
            BROKER_JSON.format(id=broker, rack=rack).encode(),
            ephemeral=broker != 3,
            make_parents=True,
        )
    store.create("/brokers/topics/orders", ORDERS, make_parents=True)
    for partition, state in STATES.items():
        store.create(
            f"/brokers/topics/orders/partitions/{partition}/state", state, make_parents=True
        )
    store.create("/config/topics/orders", ORDERS_CONFIG, make_parents=True)
    store.create("/brokers/topics/audit", b'{"version":1,"partitions":{"0":[4]}}')
    store.create(
        "/brokers/topics/audit/partitions/0/state",
        b'{"controller_epoch":3,"leader":4,"version":1,"leader_epoch":0,"isr":[4]}',
        make_parents=True,
    )
    store.create("/config/topics/audit", b'{"version":1,"config":{}}')
    store.create("/admin/delete_topics/audit", b"", make_parents=True)
    store.create(
        "/controller", b'{"version":1,"brokerid":1,"timestamp":"1700000000000"}', ephemeral=True
    )
    store.create("/controller_epoch", b"3")
    return store


@pytest.fixture
def kafka_tree(open_session: Callable[[], MetadataStore]) -> MetadataStore:
    return write_kafka_tree(open_session())


def test_describe_prints_kafkas_layout(store_url: str, kafka_tree: MetadataStore) -> None:
    result = ok("topics", "describe", "--store", store_url)
    assert result.stdout == (
        "Topic: audit\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: "
        "\tMarkedForDeletion: true\n"
        "\tTopic: audit\tPartition: 0\tLeader: 4\tReplicas: 4\tIsr: 4\tMarkedForDeletion: true\n"
        "Topic: orders\tPartitionCount: 3\tReplicationFactor: 2"
        "\tConfigs: cleanup.policy=compact,retention.ms=86400000\n"
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2\n"
        "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: 3\n"
    )
    # With a filter Kafka prints only the matching partitions' lines.
    under = ok("topics", "describe", "--store", store_url, "--under-replicated-partitions")
    assert [line.split("\t")[2] for line in under.stdout.splitlines()] == [
        "Partition: 1",
        "Partition: 2",
    ]
    unavailable = ok("topics", "describe", "--store", store_url, "--unavailable-partitions")
    assert unavailable.stdout == (
        "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: 3\n"
    )
    document = json.loads(
        ok(
            "topics", "describe", "--store", store_url, "--topic", "orders", "--format", "json"
        ).stdout
    )
    (orders,) = document["topics"]
    assert orders["configs"] == {"cleanup.policy": "compact", "retention.ms": "86400000"}
    assert [
        (p["leader"], p["isr"], p["under_replicated"], p["unavailable"])
        for p in orders["partitions"]
    ] == [
        (1, [1, 2], False, False),
        (2, [2], True, False),
        (None, [3], True, True),
    ]
    listing = ok("topics", "list", "--store", store_url)
    assert listing.stdout == "audit - marked for deletion\norders\n"


def test_a_leader_that_is_not_registered_is_unavailable(
    store_url: str, kafka_tree: MetadataStore
) -> None:
    kafka_tree.set(
        "/brokers/topics/orders/partitions/0/state",
        b'{"controller_epoch":3,"leader":7,"version":1,"leader_epoch":6,"isr":[7]}',
    )
    result = ok("topics", "describe", "--store", store_url, "--unavailable-partitions")
    assert [line.split("\t")[2:4] for line in result.stdout.splitlines()] == [
        ["Partition: 0", "Leader: 7"],
        ["Partition: 2", "Leader: none"],
    ]


def test_create_writes_what_kafkas_admin_zk_client_writes(
    store_url: str, kafka_tree: MetadataStore
) -> None:
    result = ok(
        "topics", "create", "--store", store_url, "--topic", "payments",
        "--replica-assignment", "1:2,2:4",
        "--config", "retention.ms=1000", "--config", "cleanup.policy = compact",
    )  # fmt: skip
    assert result.stdout == "Created topic payments.\n"
    assert kafka_tree.get("/config/topics/payments")[0] == (
        b'{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"1000"}}'
    )
    # Kafka 2.8+'s AdminZkClient: version 3, a new topic id, no reassignment in progress.
    written = json.loads(kafka_tree.get("/brokers/topics/payments")[0])
    assert written == {
        "version": 3, "partitions": {"0": [1, 2], "1": [2, 4]},
        "adding_replicas": {}, "removing_replicas": {}, "topic_id": written["topic_id"],
    }  # fmt: skip
    assert len(written["topic_id"]) == 22
    # No controller runs: the partition states are the controller's to create.
    assert kafka_tree.children("/brokers/topics/payments") == []

    ok(
        "topics", "create", "--store", store_url, "--topic", "clicks",
        "--partitions", "4", "--replication-factor", "2",
    )  # fmt: skip
    placed = layout.TOPIC.decode(kafka_tree.get("/brokers/topics/clicks")[0])
    rack = {1: "r1", 2: "r2", 3: "r1", 4: "r2"}
    assert sorted(placed.partitions) == [0, 1, 2, 3]
    for replicas in placed.partitions.values():
        assert len(set(replicas)) == 2
        assert {rack[r] for r in replicas} == {"r1", "r2"}  # Kafka's rack-aware placement

    before = snapshot(kafka_tree)
    again = ok(
        "topics", "create", "--store", store_url, "--topic", "clicks",
        "--partitions", "9", "--replication-factor", "1", "--if-not-exists",
    )  # fmt: skip
    assert again.output == ""
    assert snapshot(kafka_tree) == before


def test_alter_adds_partitions_and_config_in_kafkas_json(
    store_url: str, kafka_tree: MetadataStore
) -> None:
    result = ok(
        "topics", "alter", "--store", store_url, "--topic", "orders", "--partitions", "5",
        # kafka-topics.sh's form: every partition's list, the existing ones as they are
        "--replica-assignment", "1:2,2:3,3:1,4:1,2:4",
        "--config", "retention.ms=1000", "--delete-config", "cleanup.policy",
    )  # fmt: skip
    assert result.stdout.splitlines() == [
        "Updated config for topic orders.",
        "WARNING: If partitions are increased for a topic that has a key, the partition logic "
        "or ordering of the messages will be affected",
        "Adding partitions succeeded!",
    ]
    # Kafka's addPartitions writes version 3 and keeps the topic's id (this tree's has none).
    assert kafka_tree.get("/brokers/topics/orders")[0] == (
        b'{"version":3,"partitions":{"0":[1,2],"1":[2,3],"2":[3,1],"3":[4,1],"4":[2,4]},'
        b'"adding_replicas":{},"removing_replicas":{}}'
    )
    assert kafka_tree.get("/config/topics/orders")[0] == (
        b'{"version":1,"config":{"retention.ms":"1000"}}'
    )
    # Only the new partitions' lists is accepted too.
    ok(
        "topics", "alter", "--store", store_url, "--topic", "orders", "--partitions", "6",
        "--replica-assignment", "4:2",
    )  # fmt: skip
    assert layout.TOPIC.decode(kafka_tree.get("/brokers/topics/orders")[0]).partitions[5] == (
        4,
        2,
    )


def test_delete_queues_the_topic_for_the_controller(
    store_url: str, kafka_tree: MetadataStore
) -> None:
    result = ok("topics", "delete", "--store", store_url, "--topic", "orders")
    assert result.stdout.splitlines() == [
        "Topic orders is marked for deletion (/admin/delete_topics/orders).",
        "The controller deletes /brokers/topics/orders, its partition states and "
        "/config/topics/orders.",
    ]
    assert kafka_tree.get("/admin/delete_topics/orders")[0] == b""
    assert kafka_tree.exists("/brokers/topics/orders") is not None  # the controller's job
    again = ok("topics", "delete", "--store", store_url, "--topic", "audit")
    assert again.stdout == "Topic audit is already marked for deletion.\n"


def test_reassign_generate_then_execute_writes_kafkas_json(
    store_url: str, kafka_tree: MetadataStore, tmp_path: Path
) -> None:
    move = tmp_path / "topics-to-move.json"
    move.write_text('{"topics":\n\t[{"topic": "orders"}],\n"version":1\n}')  # Kafka's --help
    generated = ok(
        "reassign", "--store", store_url, "--generate",
        "--topics-to-move-json-file", str(move), "--broker-list", "1,2,4",
    )  # fmt: skip
    lines = generated.stdout.splitlines()
    assert lines[:3] == [
        "Current partition replica assignment",
        '{"version":1,"partitions":['
        '{"topic":"orders","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"orders","partition":1,"replicas":[2,3],"log_dirs":["any","any"]},'
        '{"topic":"orders","partition":2,"replicas":[3,1],"log_dirs":["any","any"]}]}',
        "",
    ]
    assert lines[3] == "Proposed partition reassignment configuration"
    # The proposal is the strategy's rebalance() over the listed brokers, with their racks.
    expected = (
        get_plugin_manager()
        .placement("kafka-rack-aware")
        .rebalance(
            ClusterLayout(
                brokers=(BrokerMetadata(1, "r1"), BrokerMetadata(2, "r2"), BrokerMetadata(4, "r2")),
                assignment={"orders": {0: (1, 2), 1: (2, 3), 2: (3, 1)}},
            )
        )
    )
    plan = json.loads(lines[4])
    assert plan["version"] == 1
    assert {(e["topic"], e["partition"]): tuple(e["replicas"]) for e in plan["partitions"]} == (
        expected
    )
    for entry in plan["partitions"]:
        assert list(entry) == ["topic", "partition", "replicas", "log_dirs"]
        assert set(entry["replicas"]) <= {1, 2, 4}
        assert entry["log_dirs"] == ["any"] * len(entry["replicas"])

    plan_file = tmp_path / "plan.json"
    plan_file.write_text(proposal(generated.stdout))
    executed = ok("reassign", "--store", store_url, "--execute", "--reassignment-json-file",
                  str(plan_file))  # fmt: skip
    assert executed.stdout == (
        "Current partition replica assignment\n\n" + lines[1] + "\n\n"
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Successfully started reassignment of partitions.\n"
    )
    written = kafka_tree.get(layout.REASSIGN_PARTITIONS)[0]
    assert (
        written
        == (
            '{"version":1,"partitions":['
            + ",".join(
                f'{{"topic":"orders","partition":{p},"replicas":[{",".join(map(str, r))}]}}'
                for (_, p), r in sorted(expected.items())
            )
            + "]}"
        ).encode()
    )
    # No controller runs here: the request stays pending.
    verified = invoke("reassign", "--store", store_url, "--verify", "--reassignment-json-file",
                      str(plan_file))  # fmt: skip
    assert verified.exit_code == 1
    assert verified.stdout.splitlines()[0] == "Status of partition reassignment:"
    assert verified.stdout.splitlines()[1:] == [
        f"Reassignment of partition orders-{p} is still in progress" for _, p in sorted(expected)
    ]


def test_a_plan_file_written_by_kafka_is_accepted(
    store_url: str, kafka_tree: MetadataStore, tmp_path: Path
) -> None:
    """Kafka 2.x writes ``log_dirs``; files written by hand (and Kafka 1.0's) have none."""
    plan = tmp_path / "kafka-plan.json"
    plan.write_text(
        '{"version":1,"partitions":[{"topic":"orders","partition":1,"replicas":[4,3],'
        '"log_dirs":["any","any"]},\n  {"topic": "orders", "partition": 0, "replicas": [2, 1]}]}'
    )
    ok("reassign", "--store", store_url, "--execute", "--reassignment-json-file", str(plan))
    assert kafka_tree.get(layout.REASSIGN_PARTITIONS)[0] == (
        b'{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[2,1]},'
        b'{"topic":"orders","partition":1,"replicas":[4,3]}]}'
    )


def test_execute_refuses_while_a_reassignment_runs(
    store_url: str, kafka_tree: MetadataStore, tmp_path: Path
) -> None:
    kafka_tree.create(
        layout.REASSIGN_PARTITIONS,
        b'{"version":1,"partitions":[{"topic":"orders","partition":2,"replicas":[1,3]}]}',
    )
    plan = tmp_path / "plan.json"
    plan.write_text('{"partitions":[{"topic":"orders","partition":0,"replicas":[4,1]}]}')
    before = snapshot(kafka_tree)
    result = invoke(
        "reassign", "--store", store_url, "--execute", "--reassignment-json-file", str(plan)
    )
    assert "/admin/reassign_partitions exists" in one_error_line(result)
    assert result.stdout == ""
    assert snapshot(kafka_tree) == before


def test_elect_preferred_writes_kafkas_request(
    store_url: str, kafka_tree: MetadataStore, tmp_path: Path
) -> None:
    request = tmp_path / "election.json"
    request.write_text('{"partitions":\n\t[{"topic": "orders", "partition": 1}]\n}')
    result = ok("elect-preferred", "--store", store_url, "--path-to-json-file", str(request))
    assert result.stdout.splitlines() == [
        "Created preferred replica election path with orders-1",
        "Successfully started preferred replica election for partitions orders-1",
    ]
    assert kafka_tree.get(layout.PREFERRED_REPLICA_ELECTION)[0] == (
        b'{"version":1,"partitions":[{"topic":"orders","partition":1}]}'
    )
    again = invoke("elect-preferred", "--store", store_url)
    assert "already running for orders-1" in one_error_line(again)


def test_brokers_lists_registrations_with_what_each_leads_and_holds(
    store_url: str, kafka_tree: MetadataStore
) -> None:
    kafka_tree.set(  # a partition led by a broker nobody registered
        "/brokers/topics/audit/partitions/0/state",
        b'{"controller_epoch":3,"leader":7,"version":1,"leader_epoch":1,"isr":[7]}',
    )
    document = json.loads(ok("brokers", "--store", store_url, "--format", "json").stdout)
    assert document["controller"] == 1
    brokers = {b["id"]: b for b in document["brokers"]}
    assert sorted(brokers) == [1, 2, 3, 4, 7]
    assert brokers[1] == {
        "id": 1,
        "registered": True,
        "host": "kafka-1",
        "port": 9092,
        "rack": "r1",
        "endpoints": ["PLAINTEXT://kafka-1:9092"],
        "ephemeral": True,
        "leader_of": ["orders-0"],
        "replicas": ["orders-0", "orders-2"],
    }
    assert brokers[3]["ephemeral"] is False  # registered by hand
    assert brokers[3]["leader_of"] == []
    assert brokers[4]["replicas"] == ["audit-0"]
    assert brokers[7]["registered"] is False
    assert brokers[7]["leader_of"] == ["audit-0"]

    table = ok("brokers", "--store", store_url, columns=80).stdout
    assert all(len(line) <= 80 for line in table.splitlines()), table
    assert "4 broker(s) registered; controller: 1" in table
    rows = [
        [c.strip() for c in line.split("│")[1:-1]] for line in table.splitlines() if "│" in line
    ]
    assert ["1", "kafka-1:9092", "r1", "yes", "1", "orders[0]", "2", "orders[0,2]"] in rows
    assert ["3", "kafka-3:9092", "r1", "no", "0", "-", "2", "orders[1-2]"] in rows
    assert ["7", "(not registered)", "-", "-", "1", "audit[0]", "0", "-"] in rows


def test_store_text_is_printed_inert(store_url: str, kafka_tree: MetadataStore) -> None:
    kafka_tree.set(
        "/config/topics/orders", b'{"version":1,"config":{"x.y":"\\u001b]0;owned\\u0007"}}'
    )
    kafka_tree.set(
        "/brokers/ids/1",
        BROKER_JSON.format(id=1, rack="\\u001b[31mred").encode(),
    )
    described = ok("topics", "describe", "--store", store_url, "--topic", "orders").stdout
    assert "\x1b" not in described
    assert "Configs: x.y=\\x1b]0;owned\\x07\n" in described
    table = ok("brokers", "--store", store_url).stdout
    assert "\x1b" not in table
    assert "\\x1b[31mred" in table


# -- refusals: one line naming the option, file or entry; exit status 2; nothing written -------

DEEP = "[" * 200 + "]" * 200


def _plan(*entries: str) -> str:
    return '{"version":1,"partitions":[' + ",".join(entries) + "]}"


REFUSALS: list[tuple[str, list[str], dict[str, str], list[str]]] = [
    # (id, arguments after the command, files in the test's folder, what the line must name)
    ("unregistered broker", ["topics", "create", "--topic", "x", "--replica-assignment", "1:9"],
     {}, ["--replica-assignment '1:9'", "broker 9", "not registered"]),
    ("broker not a number", ["topics", "create", "--topic", "x", "--replica-assignment", "1:x"],
     {}, ["--replica-assignment '1:x'", "'x' is not a whole number"]),
    ("broker twice", ["topics", "create", "--topic", "x", "--replica-assignment", "1:1"],
     {}, ["--replica-assignment '1:1'", "broker 1 more than once"]),
    ("uneven factor", ["topics", "create", "--topic", "x", "--replica-assignment", "1:2,3"],
     {}, ["--replica-assignment '1:2,3'", "partition 1 has 1 replicas"]),
    ("assignment vs partitions", ["topics", "create", "--topic", "x", "--partitions", "3",
                                  "--replica-assignment", "1:2"],
     {}, ["--partitions 3", "lists 1 partitions"]),
    ("bad topic name", ["topics", "create", "--topic", "a b", "--partitions", "1",
                        "--replication-factor", "1"],
     {}, ["--topic 'a b'"]),
    ("config without value", ["topics", "create", "--topic", "x", "--partitions", "1",
                              "--replication-factor", "1", "--config", "retention.ms"],
     {}, ["--config 'retention.ms'", "name=value"]),
    ("topic exists", ["topics", "create", "--topic", "orders", "--partitions", "1",
                      "--replication-factor", "1"],
     {}, ["--topic 'orders'", "already exists"]),
    ("factor above brokers", ["topics", "create", "--topic", "x", "--partitions", "1",
                              "--replication-factor", "5"],
     {}, ["--replication-factor 5", "replication factor 5 is larger than the 4 broker(s)"]),
    ("partitions not a number", ["topics", "create", "--topic", "x", "--partitions", "1e3",
                                 "--replication-factor", "1"],
     {}, ["--partitions '1e3'", "not a whole number"]),
    ("unknown placement", ["topics", "create", "--topic", "x", "--partitions", "1",
                           "--replication-factor", "1", "--placement", "nope"],
     {}, ["--placement 'nope'", "kafka-rack-aware"]),
    ("fewer partitions", ["topics", "alter", "--topic", "orders", "--partitions", "2"],
     {}, ["--partitions 2", "has 3 partitions", "can only be increased"]),
    ("existing list changed", ["topics", "alter", "--topic", "orders", "--partitions", "4",
                               "--replica-assignment", "2:1,2:3,3:1,4:1"],
     {}, ["--replica-assignment '2:1,2:3,3:1,4:1'", "partition 0", "coordkit reassign"]),
    ("alter a deleted topic", ["topics", "alter", "--topic", "audit", "--partitions", "2"],
     {}, ["--partitions 2", "'audit' is marked for deletion"]),
    ("nothing to alter", ["topics", "alter", "--topic", "orders"],
     {}, ["nothing to alter", "--partitions"]),
    ("alter unknown topic", ["topics", "alter", "--topic", "nope", "--partitions", "9"],
     {}, ["--topic 'nope'", "does not exist"]),
    ("delete unknown topic", ["topics", "delete", "--topic", "nope"],
     {}, ["--topic 'nope'", "does not exist"]),
    ("describe unknown topic", ["topics", "describe", "--topic", "nope"],
     {}, ["--topic 'nope'", "does not exist"]),
    ("plan file is a directory", ["reassign", "--verify", "--reassignment-json-file", "{dir}"],
     {}, ["--reassignment-json-file", "is a directory"]),
    ("plan file name unopenable", ["reassign", "--verify", "--reassignment-json-file",
                                   "{dir}/\udd00"],
     {}, ["--reassignment-json-file", "not a file name this system can open"]),
    ("plan file missing", ["reassign", "--execute", "--reassignment-json-file", "{dir}/none.json"],
     {}, ["--reassignment-json-file", "none.json", "no such file"]),
    ("plan not JSON", ["reassign", "--execute", "--reassignment-json-file", "{dir}/p.json"],
     {"p.json": "{'version': 1}"}, ["--reassignment-json-file", "p.json", "not valid JSON"]),
    ("plan too deep", ["reassign", "--execute", "--reassignment-json-file", "{dir}/p.json"],
     {"p.json": DEEP}, ["p.json", "nested deeper than 64 levels"]),
    ("plan unregistered broker", ["reassign", "--execute", "--reassignment-json-file",
                                  "{dir}/p.json"],
     {"p.json": _plan('{"topic":"orders","partition":0,"replicas":[1,9]}')},
     ["p.json: partitions[0] (orders-0)", "broker 9 is not registered"]),
    ("plan unknown topic", ["reassign", "--execute", "--reassignment-json-file", "{dir}/p.json"],
     {"p.json": _plan('{"topic":"orders","partition":0,"replicas":[1]}',
                      '{"topic":"nope","partition":0,"replicas":[1]}')},
     ["partitions[1] (nope-0)", "does not exist"]),
    ("plan unknown partition", ["reassign", "--execute", "--reassignment-json-file",
                                "{dir}/p.json"],
     {"p.json": _plan('{"topic":"orders","partition":7,"replicas":[1]}')},
     ["partitions[0] (orders-7)", "partitions 0..2"]),
    ("plan empty replicas", ["reassign", "--execute", "--reassignment-json-file", "{dir}/p.json"],
     {"p.json": _plan('{"topic":"orders","partition":0,"replicas":[]}')},
     ["partitions[0] (orders-0)", "'replicas' is empty"]),
    ("plan broker twice", ["reassign", "--execute", "--reassignment-json-file", "{dir}/p.json"],
     {"p.json": _plan('{"topic":"orders","partition":0,"replicas":[1,1]}')},
     ["partitions[0] (orders-0)", "broker 1 more than once"]),
    ("plan partition twice", ["reassign", "--execute", "--reassignment-json-file",
                              "{dir}/p.json"],
     {"p.json": _plan('{"topic":"orders","partition":0,"replicas":[1,2]}',
                      '{"topic":"orders","partition":0,"replicas":[2,1]}')},
     ["partitions[1] (orders-0)", "listed twice"]),
    ("plan log_dirs length", ["reassign", "--execute", "--reassignment-json-file",
                              "{dir}/p.json"],
     {"p.json": _plan('{"topic":"orders","partition":0,"replicas":[1,2],"log_dirs":["any"]}')},
     ["partitions[0] (orders-0)", "'log_dirs' has 1 entries for 2 replicas"]),
    ("plan log dir path", ["reassign", "--execute", "--reassignment-json-file", "{dir}/p.json"],
     {"p.json": _plan('{"topic":"orders","partition":0,"replicas":[1],"log_dirs":["/data"]}')},
     ["partitions[0] (orders-0)", "'/data'", "only 'any'"]),
    ("plan version", ["reassign", "--execute", "--reassignment-json-file", "{dir}/p.json"],
     {"p.json": '{"version":2,"partitions":[]}'}, ["p.json", "'version'", "2"]),
    ("plan partition true", ["reassign", "--verify", "--reassignment-json-file", "{dir}/p.json"],
     {"p.json": _plan('{"topic":"orders","partition":true,"replicas":[1]}')},
     ["partitions[0]", "'partition'", "true"]),
    ("plan without partitions", ["reassign", "--execute", "--reassignment-json-file",
                                 "{dir}/p.json"],
     {"p.json": '{"version":1}'}, ["p.json", "'partitions' is missing"]),
    ("broker list not numbers", ["reassign", "--generate", "--topics-to-move-json-file",
                                 "{dir}/t.json", "--broker-list", "1,x"],
     {"t.json": '{"topics":[{"topic":"orders"}],"version":1}'},
     ["--broker-list '1,x'", "'x' is not a whole number"]),
    ("broker list repeats", ["reassign", "--generate", "--topics-to-move-json-file",
                             "{dir}/t.json", "--broker-list", "1,2,1"],
     {"t.json": '{"topics":[{"topic":"orders"}],"version":1}'},
     ["--broker-list '1,2,1'", "broker 1 is listed twice"]),
    ("broker list unregistered", ["reassign", "--generate", "--topics-to-move-json-file",
                                  "{dir}/t.json", "--broker-list", "1,2,9"],
     {"t.json": '{"topics":[{"topic":"orders"}],"version":1}'},
     ["--broker-list '1,2,9'", "broker 9 is not registered"]),
    ("broker list too short", ["reassign", "--generate", "--topics-to-move-json-file",
                               "{dir}/t.json", "--broker-list", "4"],
     {"t.json": '{"topics":[{"topic":"orders"}],"version":1}'},
     ["--broker-list '4'", "replication factor 2"]),
    ("topic to move unknown", ["reassign", "--generate", "--topics-to-move-json-file",
                               "{dir}/t.json", "--broker-list", "1,2"],
     {"t.json": '{"topics":[{"topic":"orders"},{"topic":"nope"}],"version":1}'},
     ["--topics-to-move-json-file", "t.json: topics[1]", "'nope' does not exist"]),
    ("no action", ["reassign", "--reassignment-json-file", "{dir}/p.json"],
     {}, ["exactly one of --generate, --execute, --verify"]),
    ("two actions", ["reassign", "--execute", "--verify", "--reassignment-json-file",
                     "{dir}/p.json"],
     {}, ["exactly one of", "--execute and --verify"]),
    ("generate option on execute", ["reassign", "--execute", "--broker-list", "1",
                                    "--reassignment-json-file", "{dir}/p.json"],
     {}, ["--broker-list", "only used by --generate"]),
    ("election unknown partition", ["elect-preferred", "--path-to-json-file", "{dir}/e.json"],
     {"e.json": '{"partitions":[{"topic":"orders","partition":5}]}'},
     ["--path-to-json-file", "e.json: partitions[0] (orders-5)", "partitions 0..2"]),
    ("election file empty", ["elect-preferred", "--path-to-json-file", "{dir}/e.json"],
     {"e.json": "{}"}, ["e.json", "'partitions' is missing"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("arguments", "files", "names"),
    [pytest.param(a, f, n, id=i) for i, a, f, n in REFUSALS],
)
def test_refused_input_is_one_line_and_writes_nothing(
    store_url: str,
    kafka_tree: MetadataStore,
    tmp_path: Path,
    arguments: list[str],
    files: dict[str, str],
    names: list[str],
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    args = [a.replace("{dir}", str(tmp_path)) for a in arguments]
    before = snapshot(kafka_tree)
    command = 2 if args[0] == "topics" else 1
    line = one_error_line(invoke(*args[:command], "--store", store_url, *args[command:]))
    for name in names:
        assert name in line, (name, line)
    assert snapshot(kafka_tree) == before


def test_nothing_is_created_in_a_namespace_nobody_wrote(backend_name: str, store_url: str) -> None:
    """A write command refused against an empty namespace: its read-only session created
    nothing (no ZooKeeper chroot), and it never opened a writing one."""
    result = invoke("topics", "delete", "--store", store_url, "--topic", "orders")
    line = one_error_line(result)
    if backend_name == "memory":  # an unopened name reads as an empty tree
        assert "--topic 'orders': topic does not exist" in line
        with open_store(store_url, read_only=True) as store:
            assert store.children("/") == []
    else:  # no chroot (ZooKeeper) or store prefix (Redis) was created
        assert "(nothing was created)" in line
        with pytest.raises(NoNodeError):
            open_store(store_url, read_only=True)


# -- a tree the engine wrote: a running cluster acts on what the commands write --------------


def _done(cluster: Cluster) -> bool:
    """The controller finished: no admin request pending, invariants hold, ISRs full."""
    result = cluster.converged()
    return (
        cluster.admin_store.exists(layout.REASSIGN_PARTITIONS) is None
        and cluster.admin_store.exists(layout.PREFERRED_REPLICA_ELECTION) is None
        and bool(result)
        and not result.under_replicated
        and bool(cluster.settled())
    )


def test_topics_and_brokers_on_a_running_cluster(
    store_url: str, make_cluster: Callable[..., Any]
) -> None:
    cluster: Cluster = make_cluster(4, config=FAST)
    ok(
        "topics", "create", "--store", store_url, "--topic", "orders",
        "--partitions", "6", "--replication-factor", "2", "--config", "retention.ms=1000",
    )  # fmt: skip
    wait_for(
        lambda: _done(cluster) and len(cluster.view().partitions) == 6,
        what="the controller to create the partitions",
    )
    view = {p.partition: p for p in cluster.view().partitions}
    described = ok("topics", "describe", "--store", store_url, "--topic", "orders").stdout
    lines = described.splitlines()
    assert lines[0] == (
        "Topic: orders\tPartitionCount: 6\tReplicationFactor: 2\tConfigs: retention.ms=1000"
    )
    assert lines[1:] == [
        f"\tTopic: orders\tPartition: {p}\tLeader: {view[p].leader}"
        f"\tReplicas: {','.join(map(str, view[p].replicas))}"
        f"\tIsr: {','.join(map(str, view[p].isr))}"
        for p in range(6)
    ]
    assert ok("topics", "describe", "--store", store_url, "--unavailable-partitions").stdout == ""

    document = json.loads(ok("brokers", "--store", store_url, "--format", "json").stdout)
    assert [b["id"] for b in document["brokers"]] == [0, 1, 2, 3]
    assert all(b["registered"] and b["ephemeral"] for b in document["brokers"])
    assert document["controller"] == cluster.view().controller
    led = sorted(tp for b in document["brokers"] for tp in b["leader_of"])
    assert led == sorted(f"orders-{p}" for p in range(6))
    assert sum(len(b["replicas"]) for b in document["brokers"]) == 12

    cluster.kill(3)
    wait_for(lambda: _done(cluster), what="the controller to handle broker 3's loss")
    lost = ok("topics", "describe", "--store", store_url, "--under-replicated-partitions")
    expected = sorted(p for p, v in view.items() if 3 in v.replicas)
    assert [int(line.split("\t")[2].split(": ")[1]) for line in lost.stdout.splitlines()] == (
        expected
    )
    cluster.restart(3)

    ok("topics", "alter", "--store", store_url, "--topic", "orders", "--partitions", "8")
    wait_for(
        lambda: _done(cluster) and len(cluster.view().partitions) == 8,
        what="the controller to initialise the new partitions",
    )
    deleted = ok("topics", "delete", "--store", store_url, "--topic", "orders")
    assert "marked for deletion" in deleted.stdout
    wait_for(
        lambda: cluster.admin_store.exists("/brokers/topics/orders") is None and _done(cluster),
        what="the controller to delete the topic",
    )
    assert ok("topics", "list", "--store", store_url).stdout == ""


def test_reassign_and_elect_on_a_running_cluster(
    store_url: str, make_cluster: Callable[..., Any], tmp_path: Path
) -> None:
    """--generate (balanced placement, broker 0 left out), --execute, the controller moves the
    replicas, --verify reports every partition completed; then a preferred election."""
    cluster: Cluster = make_cluster(4, config=FAST)
    ok(
        "topics", "create", "--store", store_url, "--topic", "orders",
        "--replica-assignment", "0:1,1:2,2:0,0:3,3:1,1:0",
    )  # fmt: skip
    wait_for(lambda: _done(cluster) and len(cluster.view().partitions) == 6, what="the topic")
    move = tmp_path / "move.json"
    move.write_text('{"topics":[{"topic":"orders"}],"version":1}')
    generated = ok(
        "reassign", "--store", store_url, "--generate", "--topics-to-move-json-file", str(move),
        "--broker-list", "1,2,3", "--placement", "balanced",
    )  # fmt: skip
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(proposal(generated.stdout))
    plan = {
        (e["topic"], e["partition"]): e["replicas"]
        for e in json.loads(plan_file.read_text())["partitions"]
    }
    assert {p for _, p in plan} >= {0, 2, 3, 5}  # every partition with a replica on 0
    executed = ok(
        "reassign", "--store", store_url, "--execute", "--reassignment-json-file", str(plan_file)
    )
    assert executed.stdout.endswith("Successfully started reassignment of partitions.\n")
    wait_for(lambda: _done(cluster), timeout=60, what="the controller to move the replicas")
    verified = ok(
        "reassign", "--store", store_url, "--verify", "--reassignment-json-file", str(plan_file)
    )
    assert verified.stdout.splitlines() == [
        "Status of partition reassignment:",
        *(f"Reassignment of partition orders-{p} completed successfully" for _, p in sorted(plan)),
    ]
    view = cluster.view()
    assert all(0 not in p.replicas for p in view.partitions)
    assert {p.tp: list(p.replicas) for p in view.partitions if p.tp in plan} == plan

    # Leadership away from the preferred replica, then back by request (every partition).
    victim = view.partitions[0].leader
    cluster.kill(victim)
    cluster.restart(victim)
    wait_for(lambda: _done(cluster), what="the broker back in the ISRs")
    assert any(p.leader != p.replicas[0] for p in cluster.view().partitions)
    elected = ok("elect-preferred", "--store", store_url)
    assert elected.stdout.splitlines()[0] == (
        "Created preferred replica election path with " + ",".join(f"orders-{p}" for p in range(6))
    )

    def preferred_lead() -> bool:
        # An election is one-shot (as Kafka's): a partition whose preferred replica was out of
        # the ISR at that moment keeps its leader. Ask again, as an operator would.
        if cluster.admin_store.exists(layout.PREFERRED_REPLICA_ELECTION) is None and not all(
            p.leader == p.replicas[0] for p in cluster.view().partitions
        ):
            ok("elect-preferred", "--store", store_url)
        return _done(cluster) and all(p.leader == p.replicas[0] for p in cluster.view().partitions)

    wait_for(preferred_lead, what="the preferred replicas to lead")
    assert cluster.history is not None
    assert cluster.history.violations() == []


def test_adding_partitions_keeps_the_topics_id(store_url: str, kafka_tree: MetadataStore) -> None:
    ok("topics", "create", "--store", store_url, "--topic", "kept", "--partitions", "1",
       "--replication-factor", "1")  # fmt: skip
    before = layout.TOPIC.decode(kafka_tree.get("/brokers/topics/kept")[0])
    ok("topics", "alter", "--store", store_url, "--topic", "kept", "--partitions", "3")
    after = layout.TOPIC.decode(kafka_tree.get("/brokers/topics/kept")[0])
    assert before.topic_id is not None
    assert after.topic_id == before.topic_id
    assert (after.version, after.partition_count) == (3, 3)


def test_delete_node_deletes_one_node_and_refuses_a_parent(
    store_url: str, open_session: Callable[[], MetadataStore]
) -> None:
    store = open_session()
    store.create("/a/b", b"x", make_parents=True)
    before = snapshot(store)
    refused = one_error_line(invoke("delete-node", "--store", store_url, "/a"))
    assert refused == "error: /a has 1 child node(s); delete-node deletes one node"
    assert one_error_line(invoke("delete-node", "--store", store_url, "/nope")) == (
        "error: /nope: no node"
    )
    assert snapshot(store) == before
    deleted = ok("delete-node", "--store", store_url, "/a/b")
    assert deleted.output == "deleted /a/b (version 0, 1 bytes)\n"
    assert store.exists("/a/b") is None
    assert store.exists("/a") is not None
