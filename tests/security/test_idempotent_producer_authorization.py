"""InitProducerId of an idempotent producer under an authorizer, beside Kafka 4.4 (KRaft,
``StandardAuthorizer``): Kafka's ``KafkaApis`` wants IdempotentWrite on the cluster or Write on
some topic (``authorizeByResourceType``: an ALLOW on the wildcard, a literal or a prefix that no
DENY dominates; a DENY on the wildcard refuses everything), else CLUSTER_AUTHORIZATION_FAILED.
The same users and ACLs (made by the same CreateAcls request of a super user) on a Kafka 4.4
node and a coordkit serve; each principal's answer compared (tox -e py311-security)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from coordkit.kafka.acls import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from coordkit.protocol import messages
from coordkit.serve.classes import nested
from coordkit.testing.waiting import wait_for
from security.sasl_kafka import PlainClient, SaslKafka
from serve.security_servers import SecureServe

USERS = ("admin", "alice", "bob", "carol", "dave", "erin", "frank", "grace")
PASSWORDS = {user: f"{user}-pw-{n}9c1" for n, user in enumerate(USERS)}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items())
    + ";"
)
CONFIGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # The node's own PLAINTEXT connections (controller, the fixture's checks) are ANONYMOUS.
    "super.users": "User:ANONYMOUS;User:admin",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
}
T, C = ResourceType.TOPIC, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
W = AclOperation.WRITE
#: alice writes topics orders-*; bob may write idempotently on the cluster; carol only reads a
#: topic; dave writes xfer but a DENY on the prefix xf dominates it; erin may do anything on
#: every topic; frank writes t1 but is denied every topic; grace's literal a is denied, her
#: prefix b is not.
ACLS = [
    (T, "orders-", PRE, "User:alice", W, ALLOW),
    (C, CLUSTER_NAME, LIT, "User:bob", AclOperation.IDEMPOTENT_WRITE, ALLOW),
    (T, "orders-x", LIT, "User:carol", AclOperation.READ, ALLOW),
    (T, "xfer", LIT, "User:dave", W, ALLOW),
    (T, "xf", PRE, "User:dave", W, DENY),
    (T, "*", LIT, "User:erin", AclOperation.ALL, ALLOW),
    (T, "t1", LIT, "User:frank", W, ALLOW),
    (T, "*", LIT, "User:frank", W, DENY),
    (T, "a", LIT, "User:grace", W, ALLOW),
    (T, "a", LIT, "User:grace", W, DENY),
    (T, "b", PRE, "User:grace", W, ALLOW),
]
Creation = nested(messages.CreateAclsRequest, "AclCreation")
INIT_PRODUCER_ID = 4


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    cluster = SaslKafka(broker_ids=(1,), properties=CONFIGS)
    cluster.sasl_ports = {}
    with cluster:
        yield f"127.0.0.1:{cluster.sasl_ports[1]}"


@pytest.fixture(scope="module")
def coordkit() -> Iterator[str]:
    words = ["listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
             *(f"{name}={value}" for name, value in CONFIGS.items())]  # fmt: skip
    server = SecureServe([arg for word in words for arg in ("--config", word)])
    yield server.listeners["SASL_PLAINTEXT"]
    out, err = server.stop()
    for password in PASSWORDS.values():
        assert password not in out + err


def _init(address: str, user: str, transactional_id: str | None = None) -> tuple[int, bool]:
    client = PlainClient(address, user, PASSWORDS[user])
    try:
        request = messages.InitProducerIdRequest(
            transactional_id=transactional_id, transaction_timeout_ms=60_000, producer_id=-1,
            producer_epoch=-1)  # fmt: skip
        answer: Any = client.call(request, INIT_PRODUCER_ID)
    finally:
        client.close()
    return int(answer.error_code), answer.producer_id >= 0


def _answers(address: str) -> dict[str, tuple[int, bool]]:
    admin = PlainClient(address, "admin", PASSWORDS["admin"])
    try:
        creations = [Creation(resource_type=int(kind), resource_name=name,
                              resource_pattern_type=int(pattern), principal=who, host="*",
                              operation=int(op), permission_type=int(permission))
                     for kind, name, pattern, who, op, permission in ACLS]  # fmt: skip
        answer = admin.call(messages.CreateAclsRequest(creations=creations), 3)
        assert [int(r.error_code) for r in answer.results] == [0] * len(ACLS)
    finally:
        admin.close()
    for user in ("alice", "bob", "erin", "grace"):  # each allowed by its own ACLs
        wait_for(lambda u=user: _init(address, u)[0] == 0, 60, f"{user}'s ACLs taken in")  # type: ignore[misc]
    found = {user: _init(address, user) for user in USERS}
    found["alice, transactional"] = _init(address, "alice", "alices-txn")
    return found


def test_an_idempotent_producer_is_authorized_as_kafka_authorizes_it(
    kafka: str, coordkit: str
) -> None:
    expected = _answers(kafka)
    assert _answers(coordkit) == expected
    # Both allowances and refusals are in the comparison.
    allowed, refused = (0, True), (31, False)
    assert [expected[u] for u in USERS] == [allowed, allowed, allowed, refused, refused,
                                            allowed, refused, allowed]  # fmt: skip
    assert expected["alice, transactional"] == (53, False)
