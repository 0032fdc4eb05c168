"""Client quotas and group configs in Kafka's ZooKeeper layout (engine/quotas.py,
engine/group_configs.py), on the memory store: the nodes and bytes Kafka 3.9 writes (checked
against a running Kafka 3.9 in tests/apache_kafka/test_quotas_layout.py), SCRAM credentials kept
beside quotas, and Kafka's clean-up of empty quota nodes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from coordkit.engine.configs import GROUPS, ConfigAdmin
from coordkit.engine.group_configs import GroupConfigs
from coordkit.engine.quotas import (
    ClientQuotaEntity,
    ClientQuotas,
    entity_path,
    java_double_text,
    sanitize,
)
from coordkit.kafka import layout
from coordkit.plugins import open_store
from coordkit.serve.listeners.scram import (
    new_credential,
    read_user_configs,
    user_path,
    write_user_configs,
)
from coordkit.store import MetadataStore
from coordkit.testing.waiting import wait_for


@pytest.fixture
def store() -> Iterator[MetadataStore]:
    with open_store(f"memory://quotas-{uuid.uuid4().hex}") as opened:
        yield opened


def _changes(store: MetadataStore) -> list[bytes]:
    names = sorted(store.children(layout.CONFIG_CHANGES))
    return [store.get(f"{layout.CONFIG_CHANGES}/{n}")[0] for n in names]


@pytest.mark.parametrize(
    ("value", "text"),
    [(12.5, "12.5"), (100.0, "100.0"), (1e10, "1.0E10"), (0.001, "0.001"), (1e-4, "1.0E-4"),
     (1234567.0, "1234567.0"), (12345678.9, "1.23456789E7"), (-2.5e-5, "-2.5E-5")],
)  # fmt: skip
def test_doubles_are_written_as_java_writes_them(value: float, text: str) -> None:
    assert java_double_text(value) == text


def test_names_are_sanitized_as_kafka_does() -> None:
    assert sanitize("user@example.com") == "user%40example.com"
    assert sanitize("a b*~") == "a%20b%2A%7E"
    entity = ClientQuotaEntity.of(user="CN=x,O=y", client_id=None)
    assert entity_path(entity) == "users/CN%3Dx%2CO%3Dy/clients/<default>"
    with pytest.raises(ValueError, match="no quota entity"):
        entity_path(ClientQuotaEntity.of(ip="1.2.3.4", user="u"))
    # A SCRAM user's node is named the same way (its quotas and credentials share it).
    assert user_path("a b*~") == "/config/users/a%20b%2A%7E"


def test_quota_nodes_and_notifications(store: MetadataStore) -> None:
    quotas = ClientQuotas(store)
    alice = ClientQuotaEntity.of(user="alice")
    both = ClientQuotaEntity.of(user="alice", client_id="c1")
    assert quotas.alter(alice, {"producer_byte_rate": 1024.0, "request_percentage": 12.5})
    assert quotas.alter(both, {"consumer_byte_rate": 2048.0})
    assert quotas.alter(ClientQuotaEntity.of(ip=None), {"connection_creation_rate": 40.0})
    assert store.get("/config/users/alice")[0] == (
        b'{"version":1,"config":{"request_percentage":"12.5","producer_byte_rate":"1024"}}'
    )
    assert store.get("/config/users/alice/clients/c1")[0] == (
        b'{"version":1,"config":{"consumer_byte_rate":"2048"}}'
    )
    assert store.exists("/config/ips/<default>") is not None
    assert _changes(store) == [
        b'{"version":2,"entity_path":"users/alice"}',
        b'{"version":2,"entity_path":"users/alice/clients/c1"}',
        b'{"version":2,"entity_path":"ips/<default>"}',
    ]
    assert quotas.read_all() == {
        alice: {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        both: {"consumer_byte_rate": 2048.0},
        ClientQuotaEntity.of(ip=None): {"connection_creation_rate": 40.0},
    }
    # Nothing changed: nothing written.
    assert not quotas.alter(alice, {"producer_byte_rate": 1024.0})
    assert len(_changes(store)) == 3
    with pytest.raises(ValueError, match="connection_creation_rate"):
        quotas.alter(alice, {"connection_creation_rate": 1.0})


def test_scram_credentials_and_quotas_share_the_users_node(store: MetadataStore) -> None:
    quotas = ClientQuotas(store)
    alice = ClientQuotaEntity.of(user="alice")
    credential = new_credential("SCRAM-SHA-256", "secret", 4096).to_text()
    write_user_configs(store, "alice", {"SCRAM-SHA-256": credential})
    quotas.alter(alice, {"producer_byte_rate": 10.0})
    assert read_user_configs(store, "alice") == {
        "SCRAM-SHA-256": credential,
        "producer_byte_rate": "10",
    }
    # SCRAM's writer keeps the quota (it rewrites the whole map it read).
    config = read_user_configs(store, "alice")
    config["SCRAM-SHA-512"] = new_credential("SCRAM-SHA-512", "other", 4096).to_text()
    write_user_configs(store, "alice", config)
    assert quotas.read(alice) == {"producer_byte_rate": 10.0}
    # The quota removed: the node stays for its credentials, and a user with no quota is not
    # listed.
    quotas.alter(alice, {"producer_byte_rate": None})
    assert set(read_user_configs(store, "alice")) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert quotas.read_all() == {}


def test_empty_quota_nodes_are_deleted_as_kafka_does(store: MetadataStore) -> None:
    quotas = ClientQuotas(store)
    both = ClientQuotaEntity.of(user="bob", client_id="c1")
    other = ClientQuotaEntity.of(user="bob", client_id="c2")
    quotas.alter(both, {"producer_byte_rate": 1.0})
    quotas.alter(other, {"producer_byte_rate": 1.0})
    # The parent Kafka made on the way has no data: no quotas of its own.
    assert quotas.read(ClientQuotaEntity.of(user="bob")) == {}
    quotas.alter(both, {"producer_byte_rate": None})
    assert store.exists("/config/users/bob/clients/c1") is None
    assert store.exists("/config/users/bob/clients") is not None
    quotas.alter(other, {"producer_byte_rate": None})
    assert store.exists("/config/users/bob") is None  # no config left, no other child
    quotas.alter(ClientQuotaEntity.of(client_id="c3"), {"consumer_byte_rate": 5.0})
    quotas.alter(ClientQuotaEntity.of(client_id="c3"), {"consumer_byte_rate": None})
    assert store.exists("/config/clients/c3") is None


def test_group_configs_follow_the_node(store: MetadataStore) -> None:
    admin = ConfigAdmin(store)
    reader = GroupConfigs(store)
    try:
        assert reader.int_value("g/1", "consumer.session.timeout.ms") is None
        admin.write(GROUPS, "g/1", {"consumer.session.timeout.ms": " 50000 "})
        assert store.exists("/config/groups/g%2F1") is not None
        wait_for(lambda: reader.int_value("g/1", "consumer.session.timeout.ms") == 50000, 10)
        assert admin.names(GROUPS) == ["g/1"]
        admin.write(GROUPS, "g/1", {})
        assert store.exists("/config/groups/g%2F1") is None
        wait_for(lambda: reader.overrides("g/1") == {}, 10)
        # Group configs are not announced: a Kafka 3.9 broker knows no such entity type.
        assert not store.exists(layout.CONFIG_CHANGES)
    finally:
        reader.close()


def test_a_consumer_groups_own_session_and_heartbeat_apply(store: MetadataStore) -> None:
    """The consumer-protocol coordinator gives a group's members its own
    ``consumer.heartbeat.interval.ms`` and holds their sessions for its own
    ``consumer.session.timeout.ms``; another group keeps the broker's."""
    from coordkit.engine.config import EngineConfig
    from coordkit.engine.groups.modern.group import ConsumerGroup
    from coordkit.engine.groups.modern.heartbeat import ConsumerGroupHeartbeats
    from coordkit.engine.groups.modern.topics import TopicsImage
    from coordkit.support.clock import ManualClock

    clock = ManualClock()
    reader = GroupConfigs(store)
    heartbeats = ConsumerGroupHeartbeats(EngineConfig(), clock, {}, TopicsImage(store), reader)
    ConfigAdmin(store).write(GROUPS, "own", {"consumer.session.timeout.ms": "50000",
                                             "consumer.heartbeat.interval.ms": "8000"})  # fmt: skip
    try:
        own, other = ConsumerGroup("own", 0), ConsumerGroup("other", 1)
        assert heartbeats.group_heartbeat_interval_ms("own") == 8000
        assert heartbeats.group_heartbeat_interval_ms("other") == 5000
        heartbeats.touch(own, "m1")
        heartbeats.touch(other, "m1")
        assert own.session_deadlines["m1"] == clock.monotonic() + 50.0
        assert other.session_deadlines["m1"] == clock.monotonic() + 45.0
        ConfigAdmin(store).write(GROUPS, "own", {})
        wait_for(lambda: heartbeats.group_heartbeat_interval_ms("own") == 5000, 10)
    finally:
        reader.close()
