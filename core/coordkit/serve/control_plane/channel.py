"""The controller's connections to brokers of other processes (Kafka's ``ControllerChannelManager``
and its ``RequestSendThread``s).

A controller elected in this process decides, pass by pass, what each broker is told
(:mod:`coordkit.engine.controller.broker_requests`); this channel sends it to the brokers that are
not this process's own — other ``coordkit serve`` processes and Kafka 3.9 brokers alike — over
Kafka's protocol: one thread and one connection per broker, requests in order, each answered
before the next is sent (as Kafka's send thread does), a failed connection retried until the
request goes or the broker leaves the live set. Each broker is reached at its endpoint of the
inter-broker listener, through the process's connector (TLS and SASL as that listener asks).
Versions are the highest both speak (ApiVersions on each connection): LeaderAndIsr up to 7,
UpdateMetadata up to 8, StopReplica up to 4 (Kafka 3.9's), at least the versions that group
partitions by topic and carry topic ids where they exist.

A term that ends drops what it queued: a request from an old controller would be refused anyway
(STALE_CONTROLLER_EPOCH), and the next controller tells every broker everything.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from coordkit.engine.controller.broker_requests import (
    BrokerRequests,
    ControllerRequests,
    LiveBroker,
    PartitionState,
)
from coordkit.protocol import messages
from coordkit.protocol.errors import ProtocolError
from coordkit.serve.classes import nested
from coordkit.serve.control_plane.connection import BrokerConnection, UnservedVersionError
from coordkit.serve.control_plane.connector import BrokerConnector

log = logging.getLogger("coordkit.serve")

LeaderAndIsrRequest = messages.LeaderAndIsrRequest
LeaderAndIsrTopicState = nested(LeaderAndIsrRequest, "LeaderAndIsrTopicState")
LeaderAndIsrPartitionState = nested(LeaderAndIsrRequest, "LeaderAndIsrPartitionState")
LeaderAndIsrLiveLeader = nested(LeaderAndIsrRequest, "LeaderAndIsrLiveLeader")
UpdateMetadataRequest = messages.UpdateMetadataRequest
UpdateMetadataTopicState = nested(UpdateMetadataRequest, "UpdateMetadataTopicState")
UpdateMetadataPartitionState = nested(UpdateMetadataRequest, "UpdateMetadataPartitionState")
UpdateMetadataBroker = nested(UpdateMetadataRequest, "UpdateMetadataBroker")
UpdateMetadataEndpoint = nested(UpdateMetadataRequest, "UpdateMetadataEndpoint")
StopReplicaRequest = messages.StopReplicaRequest
StopReplicaTopicState = nested(StopReplicaRequest, "StopReplicaTopicState")
StopReplicaPartitionState = nested(StopReplicaRequest, "StopReplicaPartitionState")

#: api → (the lowest version this channel builds, the highest it speaks).
VERSIONS = {"LeaderAndIsr": (2, 7), "UpdateMetadata": (5, 8), "StopReplica": (3, 4)}
#: Kafka's ``SecurityProtocol`` ids, by name (a listener named otherwise is taken as PLAINTEXT
#: until the security issue maps listeners).
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
ZERO_UUID = uuid.UUID(int=0)
CLIENT_ID = "coordkit-controller"
#: Seconds between two connection attempts to a broker that does not answer.
RETRY_BACKOFF = 0.2


class ControllerChannelManager:
    """Sends a controller's requests to every live broker not in ``own``.

    :param topic_ids: the id of a topic (Kafka's zero id when unknown).
    :param refresh_topic_ids: reads every topic's id again (called when a request names a topic
        whose id is not known yet).
    :param connector: opens the connections (the inter-broker listener's; PLAINTEXT if none).
    """

    def __init__(
        self,
        own: Collection[int],
        topic_ids: Callable[[str], uuid.UUID],
        refresh_topic_ids: Callable[[], None],
        connector: BrokerConnector | None = None,
    ) -> None:
        self.own = frozenset(own)
        self.connector = connector or BrokerConnector()
        self._topic_ids = topic_ids
        self._refresh_topic_ids = refresh_topic_ids
        self._lock = threading.Lock()
        self._senders: dict[int, RequestSendThread] = {}
        self._closed = False

    # -- BrokerRequestChannel ------------------------------------------------------------------

    def targets(self, live: Iterable[int]) -> set[int]:
        return {broker for broker in live if broker not in self.own}

    def send(self, requests: ControllerRequests) -> None:
        with self._lock:
            if self._closed:
                return
            for broker in set(self._senders) - set(requests.live):
                self._senders.pop(broker).stop()  # left the live set (Kafka's removeBroker)
            for broker, told in requests.to.items():
                target = requests.live.get(broker)
                if target is None or broker in self.own:
                    continue
                sender = self._senders.get(broker)
                address = self.connector.address_of(target.info)
                if sender is not None and sender.address != address:
                    sender.stop()  # registered again elsewhere
                    sender = None
                if sender is None:
                    sender = self._senders[broker] = RequestSendThread(broker, address, self)
                    sender.start()
                sender.put(requests, target, told)

    def term_ended(self, controller_epoch: int) -> None:
        with self._lock:
            for sender in self._senders.values():
                sender.drop_before(controller_epoch + 1)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            senders, self._senders = list(self._senders.values()), {}
        for sender in senders:
            sender.stop()
        for sender in senders:
            sender.join(timeout=5)

    # -- building requests ---------------------------------------------------------------------

    def topic_id(self, topic: str) -> uuid.UUID:
        found = self._topic_ids(topic)
        if not found.int:
            try:
                self._refresh_topic_ids()
            except Exception as exc:  # a store read; the request goes without the id
                log.debug("topic ids not read: %s", exc)
            found = self._topic_ids(topic)
        return found

    def build(self, requests: ControllerRequests, target: LiveBroker, told: BrokerRequests,
              versions: Mapping[str, int]) -> list[tuple[Any, int]]:  # fmt: skip
        """The wire requests for ``told``, in Kafka's order, each with its version."""
        out: list[tuple[Any, int]] = []
        common = {
            "controller_id": requests.controller_id,
            "controller_epoch": requests.controller_epoch,
            "broker_epoch": target.epoch,
        }
        live_brokers = [_live_broker(b) for _, b in sorted(requests.live.items())]
        if told.update_brokers:
            # The live brokers first (Kafka's onBrokerStartup): a broker becomes a follower only
            # of a leader its metadata cache knows.
            out.append((UpdateMetadataRequest(**common, topic_states=[],
                                              live_brokers=live_brokers),
                        versions["UpdateMetadata"]))  # fmt: skip
        if told.leader_and_isr:
            leaders = {s.state.leader for s in told.leader_and_isr}
            out.append((LeaderAndIsrRequest(
                **common, type=0,
                topic_states=[
                    LeaderAndIsrTopicState(topic_name=topic, topic_id=self.topic_id(topic),
                                           partition_states=[_leader_and_isr(s) for s in states])
                    for topic, states in _by_topic(told.leader_and_isr).items()
                ],
                live_leaders=[
                    LeaderAndIsrLiveLeader(broker_id=b, host_name=address[0], port=address[1])
                    for b in sorted(leaders) if (live := requests.live.get(b)) is not None
                    for address in [self.connector.address_of(live.info)]
                ],
            ), versions["LeaderAndIsr"]))  # fmt: skip
        if told.update_metadata or told.deleting:
            states = [*told.update_metadata, *told.deleting]
            out.append((UpdateMetadataRequest(
                **common,
                topic_states=[
                    UpdateMetadataTopicState(topic_name=topic, topic_id=self.topic_id(topic),
                                             partition_states=[_update_metadata(s) for s in group])
                    for topic, group in _by_topic(states).items()
                ],
                live_brokers=live_brokers,
            ), versions["UpdateMetadata"]))  # fmt: skip
        if told.stop_replica:
            topics: dict[str, list[Any]] = {}
            for stopped in told.stop_replica:
                topics.setdefault(stopped.tp[0], []).append(StopReplicaPartitionState(
                    partition_index=stopped.tp[1], leader_epoch=stopped.leader_epoch,
                    delete_partition=stopped.delete))  # fmt: skip
            out.append((StopReplicaRequest(**common, topic_states=[
                StopReplicaTopicState(topic_name=t, partition_states=p) for t, p in topics.items()
            ]), versions["StopReplica"]))  # fmt: skip
        return out


def _by_topic(states: Iterable[PartitionState]) -> dict[str, list[PartitionState]]:
    grouped: dict[str, list[PartitionState]] = {}
    for state in states:
        grouped.setdefault(state.tp[0], []).append(state)
    return grouped


def _leader_and_isr(s: PartitionState) -> Any:
    return LeaderAndIsrPartitionState(
        partition_index=s.tp[1], controller_epoch=s.state.controller_epoch, leader=s.state.leader,
        leader_epoch=s.state.leader_epoch, isr=list(s.state.isr),
        partition_epoch=s.state.zk_version, replicas=list(s.replicas), adding_replicas=[],
        removing_replicas=[], is_new=False, leader_recovery_state=0,
    )  # fmt: skip


def _update_metadata(s: PartitionState) -> Any:
    return UpdateMetadataPartitionState(
        partition_index=s.tp[1], controller_epoch=s.state.controller_epoch, leader=s.state.leader,
        leader_epoch=s.state.leader_epoch, isr=list(s.state.isr), zk_version=s.state.zk_version,
        replicas=list(s.replicas), offline_replicas=[],
    )  # fmt: skip


def _endpoints(info: Any) -> list[tuple[str, str, int]]:
    """(listener, host, port) of a registration's endpoints (its host and port if none)."""
    found = []
    for endpoint in info.endpoints:
        listener, _, address = endpoint.partition("://")
        host, _, port = address.rpartition(":")
        if port.isdigit():
            found.append((listener, host.strip("[]"), int(port)))
    return found or [("PLAINTEXT", info.host, info.port)]


def _live_broker(live: LiveBroker) -> Any:
    return UpdateMetadataBroker(
        id=live.broker_id, v0_host=live.info.host, v0_port=live.info.port, rack=live.info.rack,
        endpoints=[
            UpdateMetadataEndpoint(port=port, host=host, listener=listener,
                                   security_protocol=SECURITY_PROTOCOLS.get(listener, 0))
            for listener, host, port in _endpoints(live.info)
        ],
    )  # fmt: skip


class RequestSendThread(threading.Thread):
    """One broker's queue of requests, sent in order on one connection (Kafka's
    ``RequestSendThread``)."""

    def __init__(self, broker: int, address: tuple[str, int],
                 channel: ControllerChannelManager) -> None:  # fmt: skip
        super().__init__(name=f"coordkit-controller-to-broker-{broker}", daemon=True)
        self.broker = broker
        self.address = address
        self.channel = channel
        self._queue: queue.Queue[tuple[ControllerRequests, LiveBroker, BrokerRequests] | None] = (
            queue.Queue()
        )
        self._stopped = threading.Event()
        self._dropped_before = 0
        self._connection: BrokerConnection | None = None
        self._versions: dict[str, int] = {}

    def put(self, requests: ControllerRequests, target: LiveBroker, told: BrokerRequests) -> None:
        self._queue.put((requests, target, told))

    def drop_before(self, epoch: int) -> None:
        self._dropped_before = max(self._dropped_before, epoch)

    def stop(self) -> None:
        self._stopped.set()
        self._queue.put(None)

    def run(self) -> None:
        try:
            while not self._stopped.is_set():
                item = self._queue.get()
                if item is None:
                    break
                requests, target, told = item
                if requests.controller_epoch < self._dropped_before:
                    continue
                self._deliver(requests, target, told)
        finally:
            self._disconnect()

    def _deliver(self, requests: ControllerRequests, target: LiveBroker,
                 told: BrokerRequests) -> None:  # fmt: skip
        built: list[tuple[Any, int]] | None = None
        sent = 0
        while not self._stopped.is_set() and requests.controller_epoch >= self._dropped_before:
            try:
                if self._connection is None:
                    self._connection = BrokerConnection(self.address, CLIENT_ID,
                                                        connector=self.channel.connector)  # fmt: skip
                    self._versions = self._connection.versions(VERSIONS)
                if built is None:
                    built = self.channel.build(requests, target, told, self._versions)
                while sent < len(built):
                    request, version = built[sent]
                    self._call(request, version)
                    sent += 1
                return
            except (OSError, ProtocolError) as exc:
                log.debug("controller %s to broker %s at %s:%s: %s (again)",
                          requests.controller_id, self.broker, *self.address, exc)  # fmt: skip
                self._disconnect()
                self._stopped.wait(RETRY_BACKOFF)
            except UnservedVersionError as exc:
                log.error("controller %s cannot tell broker %s: %s", requests.controller_id,
                          self.broker, exc)  # fmt: skip
                self._disconnect()
                return

    def _call(self, request: Any, version: int) -> None:
        assert self._connection is not None
        answer = self._connection.call(request, version)
        api = type(request).KAFKA_NAME.removesuffix("Request")
        refused = _partition_errors(answer)
        if answer.error_code or refused:
            log.info("broker %s answered %s v%s with error %s%s", self.broker, api, version,
                     answer.error_code, f" (partitions: {refused[:5]})" if refused else "")  # fmt: skip

    def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


def _partition_errors(answer: Any) -> list[tuple[Any, int, int]]:
    found = [(getattr(e, "topic_name", None), e.partition_index, e.error_code)
             for e in getattr(answer, "partition_errors", None) or () if e.error_code]  # fmt: skip
    for topic in getattr(answer, "topics", None) or ():
        found += [(topic.topic_id, e.partition_index, e.error_code)
                  for e in topic.partition_errors if e.error_code]  # fmt: skip
    return found
