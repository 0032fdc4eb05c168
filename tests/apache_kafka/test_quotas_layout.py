"""Client quotas in Kafka 3.9's ZooKeeper layout, both ways (#35): what a Kafka 3.9 broker writes
for AlterClientQuotas (users, a user's client ids, client ids, addresses, each by name or the
default) is read by coordkit (:class:`~coordkit.engine.quotas.ClientQuotas`) and is byte for byte
what coordkit writes for the same quotas, with the same change notifications; what coordkit
writes is what Kafka's broker then describes; a user's SCRAM credential and quotas share its
node either way; removing a quota deletes the same nodes on both. Run by py311-tools with
kafka-configs' quota commands (marked slow: out of the default run's budget)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from coordkit.engine.quotas import (
    ClientQuotaEntity,
    ClientQuotas,
    encode_properties,
    entity_path,
    quota_text,
    quota_types,
)
from coordkit.kafka import layout
from coordkit.plugins import open_store
from coordkit.protocol import messages
from coordkit.serve.listeners.scram import new_credential, read_user_configs, write_user_configs
from coordkit.store import MetadataStore
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient

pytestmark = pytest.mark.slow

WAIT_SECONDS = 60

#: Quotas set through Kafka (and, on another entity of the same shape, through coordkit).
QUOTAS: dict[ClientQuotaEntity, dict[str, float]] = {
    ClientQuotaEntity.of(user="alice"): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
    ClientQuotaEntity.of(user="alice", client_id="c1"): {"consumer_byte_rate": 2048.0},
    ClientQuotaEntity.of(user=None): {"producer_byte_rate": 100.0},
    ClientQuotaEntity.of(user=None, client_id=None): {"controller_mutation_rate": 1e10},
    ClientQuotaEntity.of(client_id="c2 x*~"): {"consumer_byte_rate": 300.0},
    ClientQuotaEntity.of(client_id=None): {"request_percentage": 100.0},
    ClientQuotaEntity.of(ip="127.0.0.1"): {"connection_creation_rate": 30.0},
    ClientQuotaEntity.of(ip=None): {"connection_creation_rate": 40.0},
}


@pytest.fixture(scope="module")
def kafka(zookeeper: StandaloneZooKeeper) -> Iterator[KafkaCluster]:
    with KafkaCluster(zookeeper=zookeeper.hosts, broker_ids=(1,)) as cluster:
        yield cluster


@pytest.fixture
def store(kafka: KafkaCluster, zookeeper: StandaloneZooKeeper) -> Iterator[MetadataStore]:
    with open_store(f"zookeeper://{zookeeper.hosts}{kafka.chroot}") as opened:
        yield opened


@pytest.fixture
def client(kafka: KafkaCluster) -> Iterator[RawClient]:
    node = kafka.nodes[1]
    raw = RawClient(f"{node.host}:{node.port}")
    yield raw
    raw.close()


def _alter(client: RawClient, quotas: dict[ClientQuotaEntity, dict[str, float | None]]) -> None:
    Request: Any = messages.AlterClientQuotasRequest
    Entry = Request.EntryData
    request = Request(entries=[Entry(
        entity=[Entry.EntityData(entity_type=t, entity_name=n) for t, n in entity.entries],
        ops=[Entry.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()])
        for entity, ops in quotas.items()], validate_only=False)  # fmt: skip
    answer = client.call(request, 1)
    assert [(e.error_code, e.error_message) for e in answer.entries] == [(0, None)] * len(quotas)


def _described(client: RawClient) -> dict[ClientQuotaEntity, dict[str, float]]:
    Request: Any = messages.DescribeClientQuotasRequest
    answer = client.call(Request(components=[], strict=False), 1)
    assert answer.error_code == 0
    return {
        ClientQuotaEntity(tuple(sorted((d.entity_type, d.entity_name) for d in e.entity))): {
            v.key: v.value for v in e.values
        }
        for e in answer.entries
    }


def _notifications(store: MetadataStore) -> list[bytes]:
    names = sorted(store.children(layout.CONFIG_CHANGES))
    return [store.get(f"{layout.CONFIG_CHANGES}/{n}")[0] for n in names]


def _expected_bytes(entity: ClientQuotaEntity, quotas: dict[str, float]) -> bytes:
    types = quota_types(entity)
    return encode_properties({k: quota_text(types[k], v) for k, v in quotas.items()})


def test_quotas_kafka_writes_are_coordkits_bytes_and_read_by_coordkit(
    store: MetadataStore, client: RawClient
) -> None:
    _alter(client, dict(QUOTAS))
    assert ClientQuotas(store).read_all() == QUOTAS
    notified = _notifications(store)
    for entity, quotas in QUOTAS.items():
        path = f"{layout.CONFIG}/{entity_path(entity)}"
        assert store.get(path)[0] == _expected_bytes(entity, quotas), path
        assert layout.encode_config_change(entity_path(entity)) in notified
    # Removing them deletes what Kafka's tryCleanQuotaNodes deletes: nothing is left.
    _alter(client, {e: dict.fromkeys(q) for e, q in QUOTAS.items()})
    assert ClientQuotas(store).read_all() == {}
    for root in ("/config/users", "/config/clients", "/config/ips"):
        assert store.children(root) == []


def test_quotas_coordkit_writes_are_described_by_kafka(
    store: MetadataStore, client: RawClient
) -> None:
    quotas = ClientQuotas(store)
    before = len(_notifications(store))
    written = {
        ClientQuotaEntity.of(user="carol"): {"producer_byte_rate": 5000.0},
        ClientQuotaEntity.of(user="carol", client_id=None): {"request_percentage": 0.5},
        ClientQuotaEntity.of(ip="10.1.2.3"): {"connection_creation_rate": 7.0},
    }
    for entity, values in written.items():
        quotas.alter(entity, values)
    assert _notifications(store)[before:] == [
        b'{"version":2,"entity_path":"users/carol"}',
        b'{"version":2,"entity_path":"users/carol/clients/<default>"}',
        b'{"version":2,"entity_path":"ips/10.1.2.3"}',
    ]
    wait_for(lambda: _described(client) == written, WAIT_SECONDS,
             "Kafka's broker to describe the quotas coordkit wrote")  # fmt: skip
    for entity, values in written.items():
        quotas.alter(entity, dict.fromkeys(values))
    wait_for(lambda: _described(client) == {}, WAIT_SECONDS)


def test_scram_credentials_and_quotas_share_a_users_node_with_kafka(
    store: MetadataStore, client: RawClient
) -> None:
    dave = ClientQuotaEntity.of(user="dave")
    credential = new_credential("SCRAM-SHA-256", "secret", 4096).to_text()
    write_user_configs(store, "dave", {"SCRAM-SHA-256": credential})
    _alter(client, {dave: {"producer_byte_rate": 10.0}})  # Kafka 3.9 keeps the credential
    assert read_user_configs(store, "dave") == {
        "SCRAM-SHA-256": credential,
        "producer_byte_rate": "10",
    }
    ClientQuotas(store).alter(dave, {"consumer_byte_rate": 20.0})
    wait_for(
        lambda: (
            _described(client).get(dave) == {"producer_byte_rate": 10.0, "consumer_byte_rate": 20.0}
        ),
        WAIT_SECONDS,
    )
    _alter(client, {dave: {"producer_byte_rate": None, "consumer_byte_rate": None}})
    assert read_user_configs(store, "dave") == {"SCRAM-SHA-256": credential}
