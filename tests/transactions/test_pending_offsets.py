"""Offsets committed inside an open transaction (issue 38), as Kafka's group coordinator keeps
them: a read_committed consumer of confluent-kafka (librdkafka asks OffsetFetch with
``require_stable``, and retries while the coordinator answers UNSTABLE_OFFSET_COMMIT) gets the
transaction's offsets once it commits, never the ones before; and the pending offsets survive
the group coordinator's failover: with three ``coordkit serve --broker-id`` processes, the
process coordinating the group is killed while the transaction is open, the next coordinator
reads the pending offsets back from the store (a ``require_stable`` fetch finds them unstable)
and the transaction's commit makes them the group's."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coordkit.protocol import messages
from coordkit.serve.context import ServeSettings
from coordkit.testing.backends import NOT_APPLICABLE, Capability, capabilities_of
from coordkit.testing.waiting import wait_for
from harness.backends import Backend
from serve import test_multiprocess
from serve.conftest import STOP_SECONDS, RawClient
from serve.inprocess import InProcessFactory
from serve.test_replication import _state

#: The processes' fixture (one ``coordkit serve --broker-id N`` each).
start_broker = test_multiprocess.start_broker

SETTINGS = ServeSettings(transaction_state_num_partitions=5)
TIMEOUT = 30
UNSTABLE_OFFSET_COMMIT = 88


def _consumer(bootstrap: str, group: str, isolation: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False, "isolation.level": isolation})  # fmt: skip


def _committed(bootstrap: str, group: str, isolation: str, partitions: int) -> list[int]:
    consumer = _consumer(bootstrap, group, isolation)
    try:
        asked = [TopicPartition("input", p) for p in range(partitions)]
        return [tp.offset for tp in consumer.committed(asked, TIMEOUT)]
    finally:
        consumer.close()


def test_a_read_committed_consumer_gets_the_offsets_once_the_transaction_commits(
    in_process: InProcessFactory,
) -> None:
    server = in_process(brokers=3, settings=SETTINGS)
    server.server.cluster.create_topic("input", 2, 3)
    wait_for(lambda: all(_state(server, ("input", p)) for p in range(2)), TIMEOUT, "leaders")
    group = "stable-readers"
    before = _consumer(server.bootstrap, group, "read_uncommitted")
    before.commit(offsets=[TopicPartition("input", 0, 3), TopicPartition("input", 1, 4)],
                  asynchronous=False)  # fmt: skip
    metadata = before.consumer_group_metadata()
    before.close()
    producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "stable"})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition("input", 0, 7)], metadata, TIMEOUT)

    # Without require_stable (read_uncommitted): the committed offsets, the pending one unseen.
    assert _committed(server.bootstrap, group, "read_uncommitted", 2) == [3, 4]
    found: list[list[int]] = []
    asked = threading.Thread(
        target=lambda: found.append(_committed(server.bootstrap, group, "read_committed", 2))
    )
    asked.start()
    time.sleep(2)  # librdkafka retries UNSTABLE_OFFSET_COMMIT meanwhile
    assert found == [], f"a read_committed consumer got {found} while the offset was pending"
    producer.commit_transaction(TIMEOUT)
    asked.join(TIMEOUT)
    assert found == [[7, 4]]

    # An aborted transaction's offset: unstable until the abort, then the committed one stays.
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition("input", 1, 9)], metadata, TIMEOUT)
    producer.abort_transaction(TIMEOUT)
    assert _committed(server.bootstrap, group, "read_committed", 2) == [7, 4]


def _find_coordinator(address: str, key: str, key_type: int) -> int:
    client = RawClient(address)
    try:
        request = messages.FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        found = wait_for(lambda: (a := client.call(request, 4).coordinators[0]).error_code == 0
                         and a, TIMEOUT, f"a coordinator of {key}")  # fmt: skip
        return int(found.node_id)
    finally:
        client.close()


def _stable_fetch(address: str, group: str) -> list[tuple[int, int, int]]:
    """OffsetFetch v8 with require_stable of the group's input partitions: (partition,
    offset, code), or the group's error alone."""
    Request: Any = messages.OffsetFetchRequest
    request = Request(require_stable=True, groups=[Request.OffsetFetchRequestGroup(
        group_id=group, topics=[Request.OffsetFetchRequestTopics(
            name="input", partition_indexes=[0, 1, 2])])])  # fmt: skip
    client = RawClient(address)
    try:
        answer = client.call(request, 8).groups[0]
    finally:
        client.close()
    if answer.error_code:
        return [(-1, -1, answer.error_code)]
    return [(p.partition_index, p.committed_offset, p.error_code)
            for t in answer.topics for p in t.partitions]  # fmt: skip


def test_pending_offsets_survive_the_group_coordinators_failover(
    backend: Backend, start_broker: test_multiprocess.StartBroker
) -> None:
    if Capability.SHARED_ACROSS_PROCESSES not in capabilities_of(backend):
        pytest.skip(f"{NOT_APPLICABLE}: {backend.name} is not shared across processes")
    url = test_multiprocess._with_session_timeout(backend.new_url())
    configs = ("--config", "transaction.state.log.num.partitions=5",
               "--config", "offsets.topic.num.partitions=5")  # fmt: skip
    processes = {b: start_broker(url, b, *configs) for b in (1, 2, 3)}
    address = {b: p.addresses[b] for b, p in processes.items()}
    bootstrap = ",".join(address.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("input", 3, 3)]).values():
        future.result(TIMEOUT)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "kept"})
    producer.init_transactions(TIMEOUT)
    transaction_coordinator = _find_coordinator(address[1], "kept", 1)
    # A group coordinated by another process than the transaction's (the one killed).
    group, coordinator = next(
        (g, c) for g in (f"group-{n}" for n in range(50))
        if (c := _find_coordinator(address[1], g, 0)) != transaction_coordinator
    )  # fmt: skip
    member = _consumer(bootstrap, group, "read_committed")
    metadata = member.consumer_group_metadata()
    member.close()
    producer.begin_transaction()
    offsets = [TopicPartition("input", p, 10 + p) for p in range(3)]
    producer.send_offsets_to_transaction(offsets, metadata, TIMEOUT)
    unstable = [(p, -1, UNSTABLE_OFFSET_COMMIT) for p in range(3)]
    assert _stable_fetch(address[coordinator], group) == unstable

    processes[coordinator].process.kill()
    processes[coordinator].process.communicate(timeout=STOP_SECONDS)
    survivor = next(b for b in address if b not in (coordinator,))
    successor = wait_for(
        lambda: (c := _find_coordinator(address[survivor], group, 0)) != coordinator and c,
        test_multiprocess.WAIT_SECONDS, "another group coordinator",
    )  # fmt: skip
    # The successor read the pending offsets back: still unstable, not committed.
    assert wait_for(lambda: (found := _stable_fetch(address[successor], group)) == unstable
                    and found, TIMEOUT, "the successor to load the partition") == unstable  # fmt: skip

    producer.commit_transaction(test_multiprocess.WAIT_SECONDS)
    expected = [(p, 10 + p, 0) for p in range(3)]
    wait_for(lambda: _stable_fetch(address[successor], group) == expected, TIMEOUT,
             "the transaction's offsets committed")  # fmt: skip
    alive = ",".join(a for b, a in address.items() if b != coordinator)
    assert _committed(alive, group, "read_committed", 3) == [10, 11, 12]
