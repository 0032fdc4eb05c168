"""The controller and brokers of separate ``coordkit serve --broker-id`` processes talk over Kafka's
inter-broker protocol (issue #34, item 2): leaderships reach brokers of other processes by
LeaderAndIsr and UpdateMetadata (nothing reads partition states from the store), a broker that
stops cleanly asks the controller of another process for a controlled shutdown first, and a stale
controller's request is refused without effect."""

from __future__ import annotations

import json
import re
from typing import Any

import attrs
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from coordkit.plugins import open_store
from coordkit.protocol import messages
from coordkit.serve.classes import nested
from coordkit.testing.backends import NOT_APPLICABLE, Capability, capabilities_of
from harness.backends import Backend
from serve import test_multiprocess
from serve.conftest import RawClient, ServeProcess
from serve.test_multiprocess import StartBroker, _leaders, _wait_for

#: The processes' fixture (one ``coordkit serve --broker-id N`` each).
start_broker = test_multiprocess.start_broker

BROKERS = (1, 2, 3)
TOPIC = "wired"
PARTITIONS = 3
RECORDS = 30


@attrs.define
class Processes:
    """Three processes, one broker each, a topic written to; the controller as the store says."""

    url: str
    processes: dict[int, ServeProcess]
    controller: int
    epoch: int


@pytest.fixture
def cluster(backend: Backend, start_broker: StartBroker) -> Processes:
    if Capability.SHARED_ACROSS_PROCESSES not in capabilities_of(backend):
        pytest.skip(f"{NOT_APPLICABLE}: {backend.name} is not shared across processes")
    url = backend.new_url()
    processes = {b: start_broker(url, b) for b in BROKERS}
    _produce(",".join(a for p in processes.values() for a in p.addresses.values()))
    return Processes(url, processes, *_controller(url))


def _controller(url: str) -> tuple[int, int]:
    store = open_store(url)
    try:
        data, _ = store.get("/controller")
        epoch, _ = store.get("/controller_epoch")
        return int(json.loads(data)["brokerid"]), int(epoch)
    finally:
        store.close()


def _produce(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(RECORDS):
            producer.send(TOPIC, f"r{i}".encode(), partition=i % PARTITIONS).get(timeout=60)
    finally:
        producer.close()


def _read_all(bootstrap: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=20_000)  # fmt: skip
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        got: list[bytes] = []
        for record in consumer:
            got.append(record.value)
            if len(got) == RECORDS:
                break
        return got
    finally:
        consumer.close()


def test_a_clean_stop_asks_the_controller_of_another_process_first(cluster: Processes) -> None:
    processes, controller = cluster.processes, cluster.controller
    leaving = next(b for b in BROKERS if b != controller)
    others = [b for b in BROKERS if b != leaving]
    address = processes[others[0]].addresses[others[0]]
    _wait_for("every partition led", lambda: -1 not in _leaders(address, TOPIC).values())
    code, _out, err = processes.pop(leaving).stop()
    assert code == 0, err
    # The broker's own words, and the controller's (in another process) for the same shutdown.
    assert re.search(rf"broker {leaving}: controlled shutdown done", err), err
    # Leadership moved while the broker was still there: no partition is left without a leader.
    leaders = _wait_for(
        f"broker {leaving} leads nothing",
        lambda: (found := _leaders(address, TOPIC)) and leaving not in found.values() and found,
    )
    assert -1 not in leaders.values()
    rest = ",".join(a for p in processes.values() for a in p.addresses.values())
    assert sorted(_read_all(rest)) == sorted(f"r{i}".encode() for i in range(RECORDS))
    for broker in others:
        _code, _out, err = processes[broker].stop()
        if broker == controller:
            assert f"controlled shutdown of broker {leaving}" in err, err


def test_brokers_of_other_processes_hear_leaderships_from_the_controller(
    cluster: Processes,
) -> None:
    processes, controller, epoch = cluster.processes, cluster.controller, cluster.epoch
    for broker, process in processes.items():
        if broker == controller:
            continue
        # Every partition's leader, as the broker serves it, matches the store's.
        _wait_for(f"broker {broker} knows every leader",
                  lambda a=process.addresses[broker]: -1 not in _leaders(a, TOPIC).values())  # fmt: skip
    for broker, process in processes.items():
        _code, _out, err = process.stop()
        if broker != controller:
            # Told by the controller's requests, in its epoch.
            assert re.search(rf"broker {broker}: LeaderAndIsr from controller {controller} "
                             rf"\(epoch {epoch}\)", err), err  # fmt: skip


def test_a_stale_controller_request_changes_nothing(cluster: Processes) -> None:
    url, processes = cluster.url, cluster.processes
    controller, epoch = cluster.controller, cluster.epoch
    target = next(b for b in BROKERS if b != controller)
    address = processes[target].addresses[target]
    before = _wait_for("leaders", lambda: (f := _leaders(address, TOPIC)) and -1 not in f.values()
                       and f)  # fmt: skip
    store = open_store(url)
    try:
        stat = store.exists(f"/brokers/ids/{target}")
        assert stat is not None
        broker_epoch = stat.czxid
        state, _ = store.get(f"/brokers/topics/{TOPIC}/partitions/0/state")
    finally:
        store.close()
    found = json.loads(state)
    request = messages.LeaderAndIsrRequest(
        controller_id=controller, controller_epoch=epoch - 1, broker_epoch=broker_epoch, type=0,
        topic_states=[nested(messages.LeaderAndIsrRequest, "LeaderAndIsrTopicState")(
            topic_name=TOPIC, partition_states=[
                nested(messages.LeaderAndIsrRequest, "LeaderAndIsrPartitionState")(
                    partition_index=0, controller_epoch=epoch - 1,
                    leader=next(b for b in BROKERS if b != found["leader"]),
                    leader_epoch=found["leader_epoch"] + 10, isr=found["isr"],
                    partition_epoch=99, replicas=list(BROKERS))])],
        live_leaders=[],
    )  # fmt: skip
    client = RawClient(address)
    try:
        answer: Any = client.call(request, 7)
    finally:
        client.close()
    assert answer.error_code == 11  # STALE_CONTROLLER_EPOCH
    assert _leaders(address, TOPIC) == before
    _code, _out, err = processes[target].stop()
    assert len(re.findall(r"LeaderAndIsr from controller \d+ refused", err)) == 1, err
