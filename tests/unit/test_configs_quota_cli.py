"""``coordkit configs`` with kafka-configs' quota entity types (users, clients, ips, users then
clients), on the memory store: the nodes written, kafka-configs' lines printed (the lines
Kafka 4.4's kafka-configs prints for the same quotas), refusals as one line with exit status 2
and nothing written, and SCRAM credentials beside quotas on a user."""

from __future__ import annotations

import uuid

from click.testing import CliRunner, Result

from coordkit.cli import cli
from coordkit.engine.quotas import ClientQuotaEntity, ClientQuotas
from coordkit.plugins import open_store


def _run(url: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["configs", "--store", url, *args])


def test_quotas_are_set_described_and_removed_as_kafka_configs_does() -> None:
    url = f"memory://quota-cli-{uuid.uuid4().hex}"
    steps = [
        (["--entity-type", "users", "--entity-name", "alice", "--alter", "--add-config",
          "producer_byte_rate=1024,request_percentage=12.5"],
         "Completed updating config for user alice.\n"),
        (["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
          "--entity-default", "--alter", "--add-config", "consumer_byte_rate=10"],
         "Completed updating config for user alice.\n"),
        (["--entity-type", "clients", "--entity-default", "--alter", "--add-config",
          "controller_mutation_rate=1e10"],
         "Completed updating default config for clients in the cluster.\n"),
        (["--entity-type", "ips", "--entity-name", "10.0.0.9", "--alter", "--add-config",
          "connection_creation_rate=5"], "Completed updating config for ip 10.0.0.9.\n"),
        (["--entity-type", "users", "--entity-default", "--alter", "--add-config",
          "producer_byte_rate=100"],
         "Completed updating default config for users in the cluster.\n"),
    ]  # fmt: skip
    for args, output in steps:
        done = _run(url, *args)
        assert (done.exit_code, done.output) == (0, output)
    with open_store(url) as store:
        assert ClientQuotas(store).read(ClientQuotaEntity.of(user="alice", client_id=None)) == {
            "consumer_byte_rate": 10.0
        }
    # The lines and the order Kafka 4.4's kafka-configs prints.
    users = _run(url, "--entity-type", "users", "--describe")
    assert users.output == (
        "Quota configs for the default user-principal are producer_byte_rate=100.0\n"
        "Quota configs for user-principal 'alice' are request_percentage=12.5, "
        "producer_byte_rate=1024.0\n"
    )
    both = _run(url, "--entity-type", "users", "--entity-name", "alice", "--entity-type",
                "clients", "--describe")  # fmt: skip
    assert both.output == (
        "Quota configs for user-principal 'alice', the default client-id are "
        "consumer_byte_rate=10.0\n"
    )
    clients = _run(url, "--entity-type", "clients", "--describe")
    assert clients.output == (
        "Quota configs for the default client-id are controller_mutation_rate=1.0E10\n"
    )
    ips = _run(url, "--entity-type", "ips", "--entity-name", "10.0.0.9", "--describe")
    assert ips.output == "Quota configs for ip '10.0.0.9' are connection_creation_rate=5.0\n"
    removed = _run(url, "--entity-type", "users", "--entity-name", "alice", "--alter",
                   "--delete-config", "request_percentage")  # fmt: skip
    assert removed.exit_code == 0
    alice = _run(url, "--entity-type", "users", "--entity-name", "alice", "--describe")
    assert alice.output.startswith(
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0\n"
    )


def test_refused_quota_changes_write_nothing() -> None:
    url = f"memory://quota-cli-{uuid.uuid4().hex}"
    refused = [
        (["--entity-type", "users", "--entity-name", "u", "--add-config", "bogus=1"],
         "bogus: not a quota of this entity"),
        (["--entity-type", "ips", "--entity-name", "1.2.3.4", "--add-config",
          "producer_byte_rate=5"], "producer_byte_rate: not a quota of this entity"),
        (["--entity-type", "users", "--entity-name", "u", "--add-config",
          "producer_byte_rate=1.5"], "a whole number"),
        (["--entity-type", "clients", "--entity-name", "c", "--add-config",
          "producer_byte_rate=abc"], "Cannot parse quota configuration value"),
        (["--entity-type", "clients", "--entity-name", "c", "--add-config",
          "request_percentage=0"], "must be greater than 0"),
        (["--entity-type", "clients", "--entity-type", "users", "--entity-name", "c",
          "--entity-name", "u", "--add-config", "producer_byte_rate=5"], "users then clients"),
        (["--entity-type", "users", "--entity-name", "u", "--add-config",
          "producer_byte_rate=5,SCRAM-SHA-256=[password=pw]"], "separate commands"),
    ]  # fmt: skip
    for args, message in refused:
        done = _run(url, "--alter", *args)
        assert done.exit_code == 2, done.output
        assert message in done.output
    with open_store(url) as store:
        assert ClientQuotas(store).read_all() == {}


def test_a_users_scram_credential_and_quota_are_both_described() -> None:
    url = f"memory://quota-cli-{uuid.uuid4().hex}"
    for config in ("SCRAM-SHA-256=[password=pw-secret]", "producer_byte_rate=9"):
        done = _run(url, "--entity-type", "users", "--entity-name", "zed", "--alter",
                    "--add-config", config)  # fmt: skip
        assert done.exit_code == 0, done.output
    shown = _run(url, "--entity-type", "users", "--entity-name", "zed", "--describe")
    assert shown.output == (
        "Quota configs for user-principal 'zed' are producer_byte_rate=9.0\n"
        "SCRAM credential configs for user-principal 'zed' are SCRAM-SHA-256=iterations=4096\n"
    )
    assert "pw-secret" not in shown.output
