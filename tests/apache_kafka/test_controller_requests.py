"""The controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica) refused as a Kafka 3.9
broker refuses them (issue #34, item 2): the same requests, built from each side's own ZooKeeper
values, to three Kafka 3.9 brokers on one chroot and to a ``coordkit serve`` of three brokers on
another chroot of the same ZooKeeper; the answers compared code by code.

Only requests a broker must refuse or leave without effect are sent (a stale broker epoch, a
stale controller epoch, a leader epoch not newer than the broker's, a replica set without the
broker, an older leader epoch to stop): the Kafka cluster is the oracle, not something to break.
After them, both clusters still show the leaders they had: nothing refused was applied.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from coordkit.engine.cluster_id import kafka_uuid
from coordkit.plugins import open_store
from coordkit.protocol import messages
from coordkit.serve.classes import nested
from coordkit.serve.control_plane.channel import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from coordkit.store import MetadataStore
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from coordkit.testing.servers.ports import free_port
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient, ServeProcess

TOPIC = "fenced"
PARTITIONS = 2
BROKER = 1  # the broker every request goes to (ids 1-3 on both sides)


@attrs.frozen
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int
    replicas: tuple[int, ...]


@attrs.define
class Side:
    """One cluster as the requests see it: its broker's address and its ZooKeeper values."""

    name: str
    address: str
    store: MetadataStore

    def controller(self) -> tuple[int, int]:
        """(controller id, controller epoch) in the side's tree."""
        data, _ = self.store.get("/controller")
        epoch, _ = self.store.get("/controller_epoch")
        return int(json.loads(data)["brokerid"]), int(epoch)

    def broker_epoch(self, broker_id: int) -> int:
        stat = self.store.exists(f"/brokers/ids/{broker_id}")
        assert stat is not None, f"{self.name}: broker {broker_id} is not registered"
        return stat.czxid

    def topic_id(self) -> uuid.UUID:
        data, _ = self.store.get(f"/brokers/topics/{TOPIC}")
        return kafka_uuid(json.loads(data)["topic_id"])

    def state(self, partition: int) -> PartitionState:
        data, stat = self.store.get(f"/brokers/topics/{TOPIC}/partitions/{partition}/state")
        found = json.loads(data)
        assignment, _ = self.store.get(f"/brokers/topics/{TOPIC}")
        replicas = json.loads(assignment)["partitions"][str(partition)]
        return PartitionState(found["leader"], found["leader_epoch"], tuple(found["isr"]),
                              found["controller_epoch"], stat.version, tuple(replicas))  # fmt: skip

    def call(self, request: Any, version: int) -> Any:
        client = RawClient(self.address)
        try:
            return client.call(request, version)
        finally:
            client.sock.close()


@pytest.fixture(scope="module")
def sides(zookeeper: StandaloneZooKeeper, zookeeper_mode_cluster: KafkaCluster) -> Iterator[
    tuple[Side, Side]
]:  # fmt: skip
    kafka_store = open_store(f"zookeeper://{zookeeper.hosts}{zookeeper_mode_cluster.chroot}")
    chroot = f"/coordkit-controller-requests-{uuid.uuid4().hex[:8]}"
    url = f"zookeeper://{zookeeper.hosts}{chroot}"
    # One process per broker, as a cluster of separate processes runs.
    served = [ServeProcess(["--store", url, "--broker-id", str(b), "--port", str(free_port())])
              for b in (1, 2, 3)]  # fmt: skip
    bootstrap = ",".join(a for process in served for a in process.addresses.values())
    coordkit_store = open_store(url)
    try:
        kafka = Side("kafka", zookeeper_mode_cluster.node(BROKER).address, kafka_store)
        coordkit = Side("coordkit", served[0].addresses[BROKER], coordkit_store)
        created = zookeeper_mode_cluster.tool(
            "kafka-topics", "--bootstrap-server", zookeeper_mode_cluster.bootstrap, "--create",
            "--topic", TOPIC, "--partitions", str(PARTITIONS), "--replication-factor", "3",
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        created = zookeeper_mode_cluster.tool(
            "kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "3",
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        for side in (kafka, coordkit):
            wait_for(lambda side=side: all(_elected(side, p) for p in range(PARTITIONS)),
                     what=f"{side.name}: {TOPIC}'s leaders", timeout=60)  # fmt: skip
            # The broker the requests go to has heard from the controller (it serves the stored
            # leaders): before that, a request of the previous controller epoch is no older than
            # the newest it has seen, on Kafka as on coordkit.
            wait_for(lambda side=side: _served(side) == _stored(side),
                     what=f"{side.name}: broker {BROKER} serving {TOPIC}'s stored leaders",
                     timeout=60)  # fmt: skip
        yield kafka, coordkit
    finally:
        for process in served:
            process.stop()
        kafka_store.close()
        coordkit_store.close()


def _elected(side: Side, partition: int) -> bool:
    try:
        return side.state(partition).leader >= 0
    except Exception:
        return False


def leader_and_isr(side: Side, *, broker_epoch: int = 0, controller_epoch: int = 0,
                   states: list[Any] | None = None) -> Any:  # fmt: skip
    """A LeaderAndIsr v7 from the side's controller to broker 1, epochs shifted by the deltas."""
    controller, epoch = side.controller()
    return LeaderAndIsrRequest(
        controller_id=controller, controller_epoch=epoch + controller_epoch,
        broker_epoch=side.broker_epoch(BROKER) + broker_epoch, type=0,
        topic_states=[LeaderAndIsrTopicState(topic_name=TOPIC, topic_id=side.topic_id(),
                                             partition_states=states or [])],
        live_leaders=[],
    )  # fmt: skip


def partition_state(side: Side, partition: int, *, epoch_delta: int = 0,
                    replicas: tuple[int, ...] | None = None, leader: int | None = None) -> Any:  # fmt: skip
    found = side.state(partition)
    return LeaderAndIsrPartitionState(
        partition_index=partition, controller_epoch=found.controller_epoch,
        leader=found.leader if leader is None else leader,
        leader_epoch=found.leader_epoch + epoch_delta, isr=list(found.isr),
        partition_epoch=found.version, replicas=list(replicas or found.replicas),
        adding_replicas=[], removing_replicas=[], is_new=False, leader_recovery_state=0,
    )  # fmt: skip


def errors_of(answer: Any) -> tuple[int, list[tuple[int, int]]]:
    """(the top error, sorted (partition, error) pairs) of a LeaderAndIsr or StopReplica answer."""
    pairs = [(e.partition_index, e.error_code) for t in getattr(answer, "topics", None) or ()
             for e in t.partition_errors]  # fmt: skip
    pairs += [(e.partition_index, e.error_code) for e in getattr(answer, "partition_errors", None)
              or ()]  # fmt: skip
    return answer.error_code, sorted(pairs)


def both(sides: tuple[Side, Side], build: Any, version: int) -> tuple[Any, Any]:
    kafka, coordkit = sides
    return errors_of(kafka.call(build(kafka), version)), errors_of(
        coordkit.call(build(coordkit), version)
    )


def test_leader_and_isr_for_an_earlier_registration_is_stale_broker_epoch(sides: Any) -> None:
    kafka, coordkit = both(sides, lambda s: leader_and_isr(
        s, broker_epoch=-1, states=[partition_state(s, 0, epoch_delta=5, leader=2)]), 7)  # fmt: skip
    # Kafka's error answer names every partition, with the request's error.
    assert kafka == coordkit == (77, [(0, 77)])


def test_leader_and_isr_from_an_older_controller_is_stale_controller_epoch(sides: Any) -> None:
    kafka, coordkit = both(sides, lambda s: leader_and_isr(
        s, controller_epoch=-1, states=[partition_state(s, 0, epoch_delta=5, leader=2)]), 7)  # fmt: skip
    assert kafka == coordkit == (11, [(0, 11)])


def test_leader_and_isr_per_partition_rules(sides: Any) -> None:
    # Partition 0 at the leader epoch the broker has (already applied: ignored), partition 1 at
    # a newer one without the broker among its replicas (not its replica: not applied).
    kafka, coordkit = both(sides, lambda s: leader_and_isr(s, states=[
        partition_state(s, 0),
        partition_state(s, 1, epoch_delta=1, replicas=(2, 3), leader=2),
    ]), 7)  # fmt: skip
    assert kafka == coordkit == (0, [(0, 11), (1, 3)])


def test_update_metadata_stale_epochs_are_refused(sides: Any) -> None:
    def build(side: Side, broker_epoch: int, controller_epoch: int) -> Any:
        controller, epoch = side.controller()
        found = side.state(0)
        return UpdateMetadataRequest(
            controller_id=controller, controller_epoch=epoch + controller_epoch,
            broker_epoch=side.broker_epoch(BROKER) + broker_epoch,
            topic_states=[UpdateMetadataTopicState(
                topic_name=TOPIC, topic_id=side.topic_id(), partition_states=[
                    UpdateMetadataPartitionState(
                        partition_index=0, controller_epoch=found.controller_epoch, leader=-1,
                        leader_epoch=found.leader_epoch + 5, isr=[], zk_version=found.version + 5,
                        replicas=list(found.replicas), offline_replicas=[])])],
            live_brokers=[],
        )  # fmt: skip

    assert both(sides, lambda s: build(s, -1, 0), 8) == ((77, []), (77, []))
    assert both(sides, lambda s: build(s, 0, -1), 8) == ((11, []), (11, []))


def test_stop_replica_rules(sides: Any) -> None:
    def build(side: Side, broker_epoch: int, controller_epoch: int) -> Any:
        controller, epoch = side.controller()
        current = side.state(0).leader_epoch
        # An older leader epoch that is not one of the sentinels (-1: none, -2: deleting).
        older = current - 1 if current >= 1 else -3
        return StopReplicaRequest(
            controller_id=controller, controller_epoch=epoch + controller_epoch,
            broker_epoch=side.broker_epoch(BROKER) + broker_epoch,
            topic_states=[StopReplicaTopicState(topic_name=TOPIC, partition_states=[
                StopReplicaPartitionState(partition_index=0, leader_epoch=older,
                                          delete_partition=True)])],
        )  # fmt: skip

    assert both(sides, lambda s: build(s, -1, 0), 4) == ((77, []), (77, []))
    assert both(sides, lambda s: build(s, 0, -1), 4) == ((11, []), (11, []))
    assert both(sides, lambda s: build(s, 0, 0), 4) == ((0, [(0, 74)]), (0, [(0, 74)]))


def test_nothing_refused_was_applied(sides: Any) -> None:
    """Run after the refusals (file order): the leaders both clusters had are the ones they
    serve."""
    for side in sides:
        assert _served(side) == _stored(side), side.name


def _served(side: Side) -> dict[int, tuple[int, int]]:
    """Partition → (leader, leader epoch) as the side's broker answers Metadata."""
    client = RawClient(side.address)
    try:
        answer = client.call(messages.MetadataRequest(
            topics=[nested(messages.MetadataRequest, "MetadataRequestTopic")(name=TOPIC)],
            allow_auto_topic_creation=False), 12)  # fmt: skip
    finally:
        client.sock.close()
    return {p.partition_index: (p.leader_id, p.leader_epoch)
            for topic in answer.topics for p in topic.partitions}  # fmt: skip


def _stored(side: Side) -> dict[int, tuple[int, int]]:
    """Partition → (leader, leader epoch) in the side's ZooKeeper."""
    return {p: (side.state(p).leader, side.state(p).leader_epoch) for p in range(PARTITIONS)}


def _live_brokers(side: Side) -> list[Any]:
    """The side's registered brokers as an UpdateMetadata lists them (so that a request the
    broker applies leaves its idea of the cluster as it was)."""
    brokers = []
    for name in side.store.children("/brokers/ids"):
        data, _ = side.store.get(f"/brokers/ids/{name}")
        found = json.loads(data)
        endpoints = []
        for endpoint in found.get("endpoints", []):
            listener, _, address = endpoint.partition("://")
            host, _, port = address.rpartition(":")
            endpoints.append(UpdateMetadataEndpoint(port=int(port), host=host, listener=listener,
                                                    security_protocol=0))  # fmt: skip
        brokers.append(UpdateMetadataBroker(id=int(name), v0_host=found.get("host") or "",
                                            v0_port=found.get("port", -1), rack=found.get("rack"),
                                            endpoints=endpoints))  # fmt: skip
    return brokers


def test_leader_and_isr_for_an_epoch_update_metadata_brought_first_is_applied(sides: Any) -> None:
    """Run after every other (file order): both brokers end one leader epoch ahead of their
    store on a partition they follow. UpdateMetadata fills Kafka's metadata cache, not its
    partitions: the LeaderAndIsr for the same new epoch is applied (NONE), and only a second one
    is already applied (STALE_CONTROLLER_EPOCH)."""

    def followed(side: Side) -> int:
        return next(p for p in range(PARTITIONS) if side.state(p).leader != BROKER)

    def update_metadata(side: Side) -> Any:
        controller, epoch = side.controller()
        partition = followed(side)
        found = side.state(partition)
        return UpdateMetadataRequest(
            controller_id=controller, controller_epoch=epoch,
            broker_epoch=side.broker_epoch(BROKER),
            topic_states=[UpdateMetadataTopicState(
                topic_name=TOPIC, topic_id=side.topic_id(), partition_states=[
                    UpdateMetadataPartitionState(
                        partition_index=partition, controller_epoch=found.controller_epoch,
                        leader=found.leader, leader_epoch=found.leader_epoch + 1,
                        isr=list(found.isr), zk_version=found.version,
                        replicas=list(found.replicas), offline_replicas=[])])],
            live_brokers=_live_brokers(side),
        )  # fmt: skip

    def leader_and_isr_ahead(side: Side) -> Any:
        return leader_and_isr(side, states=[partition_state(side, followed(side), epoch_delta=1)])

    def codes(answer: tuple[int, list[tuple[int, int]]]) -> tuple[int, list[int]]:
        # The partition each side follows may differ (their leaders are elected apart).
        return answer[0], [code for _, code in answer[1]]

    assert both(sides, update_metadata, 8) == ((0, []), (0, []))
    kafka, coordkit = both(sides, leader_and_isr_ahead, 7)
    assert codes(kafka) == codes(coordkit) == (0, [0])
    kafka, coordkit = both(sides, leader_and_isr_ahead, 7)
    assert codes(kafka) == codes(coordkit) == (0, [11])
