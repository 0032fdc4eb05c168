"""ACLs on a store (coordkit.engine.acls) in Kafka 3.9's ZooKeeper layout, and the ``kafka``
authorizer following their change notifications; on every backend (``--backend``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordkit.engine.acls import AclAdmin
from coordkit.kafka import acls as layout
from coordkit.kafka.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from coordkit.store import MetadataStore
from coordkit.strategies.authorization import Action
from coordkit.testing.waiting import wait_for
from coordkit_authorizers.kafka import KAFKA
from harness.backends import Backend

ALICE = "User:alice"
READ = AccessControlEntry(ALICE, "*", AclOperation.READ, AclPermissionType.ALLOW)
TOPIC_T = ResourcePattern(ResourceType.TOPIC, "t")
PREFIX = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)


@pytest.fixture
def stores(backend: Backend, store_url: str) -> Iterator[tuple[MetadataStore, MetadataStore]]:
    one, two = backend.open(store_url), backend.open(store_url)
    yield one, two
    one.close()
    two.close()


def test_acls_written_in_kafkas_layout(stores: tuple[MetadataStore, MetadataStore]) -> None:
    store, _ = stores
    admin = AclAdmin(store)
    admin.add([AclBinding(TOPIC_T, READ), AclBinding(PREFIX, READ)])
    data, _ = store.get("/kafka-acl/Topic/t")
    assert data == layout.encode_entries([READ])
    assert store.exists("/kafka-acl-extended/prefixed/Group/app-") is not None
    literal = [
        store.get(f"/kafka-acl-changes/{n}")[0] for n in store.children("/kafka-acl-changes")
    ]
    assert literal == [b"TOPIC:t"]
    [extended] = store.children("/kafka-acl-extended-changes")
    assert extended.startswith("acl_changes_")
    assert admin.describe(AclBindingFilter()) == sorted(
        [AclBinding(TOPIC_T, READ), AclBinding(PREFIX, READ)]
    )
    # adding what is there changes nothing and announces nothing
    admin.add([AclBinding(TOPIC_T, READ)])
    assert len(store.children("/kafka-acl-changes")) == 1
    # removing the last entry deletes the resource's node
    removed = admin.remove([AclBindingFilter(ResourceType.TOPIC)])
    assert removed == [[AclBinding(TOPIC_T, READ)]]
    assert store.exists("/kafka-acl/Topic/t") is None
    assert len(store.children("/kafka-acl-changes")) == 2


def test_the_kafka_authorizer_follows_changes(stores: tuple[MetadataStore, MetadataStore]) -> None:
    store, other = stores
    authorizer = KAFKA(store, {"super.users": "User:admin"})
    authorizer.start()
    try:
        read = [Action(AclOperation.READ, ResourceType.TOPIC, "t")]
        assert authorizer.authorize(ALICE, "h", read) == [False]
        assert authorizer.authorize("User:admin", "h", read) == [True]
        # written by another session (as another broker or Kafka would)
        AclAdmin(other).add([AclBinding(TOPIC_T, READ)])
        wait_for(lambda: authorizer.authorize(ALICE, "h", read) == [True], what="the ACL read")
        AclAdmin(other).remove([AclBindingFilter(principal=ALICE)])
        wait_for(lambda: authorizer.authorize(ALICE, "h", read) == [False], what="the ACL gone")
    finally:
        authorizer.close()
