"""A finished reassignment's removed replicas are told to stop and delete their logs (Kafka's
StopReplica with ``deletePartition``, the reassignment's step B6), each by the path that reaches
it: brokers of other processes by the controller's requests, those of the controller's own
process in-process."""

from __future__ import annotations

from collections.abc import Iterable

from coordkit.engine.controller.broker_requests import (
    ControllerRequests,
    RequestBatch,
    StoppedReplica,
)
from coordkit.kafka.model import BrokerInfo

TP = ("moved", 0)
IN_PROCESS = 1


class Channel:
    """Sends to every live broker but the controller's own process's."""

    def __init__(self) -> None:
        self.sent: list[ControllerRequests] = []

    def targets(self, live: Iterable[int]) -> set[int]:
        return {b for b in live if b != IN_PROCESS}

    def send(self, requests: ControllerRequests) -> None:
        self.sent.append(requests)

    def term_ended(self, controller_epoch: int) -> None:
        pass


def _live(*brokers: int) -> dict[int, tuple[BrokerInfo, int]]:
    return {b: (BrokerInfo("localhost", 9090 + b, "1700000000000"), 100 + b) for b in brokers}


def test_removed_replicas_of_other_processes_are_told_to_delete() -> None:
    channel = Channel()
    batch = RequestBatch(channel, controller_id=IN_PROCESS, epoch=4)
    batch.begin(_live(1, 2, 3))
    batch.replicas_removed(TP, (IN_PROCESS, 2), 7)
    batch.flush()
    (sent,) = channel.sent
    assert set(sent.to) == {2}  # broker 1 hears in-process; broker 3 keeps its replica
    assert sent.to[2].stop_replica == [StoppedReplica(TP, 7, delete=True)]


def test_nothing_is_sent_when_no_removed_replica_is_elsewhere() -> None:
    channel = Channel()
    batch = RequestBatch(channel, controller_id=IN_PROCESS, epoch=4)
    batch.begin(_live(1, 2, 3))
    batch.replicas_removed(TP, (IN_PROCESS,), 7)
    batch.flush()
    assert channel.sent == []
