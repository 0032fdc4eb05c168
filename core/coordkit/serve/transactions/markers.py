"""Sending a completing transaction's markers to the leaders of its partitions (Kafka's
``TransactionMarkerChannelManager``).

Every marker goes over the wire as WriteTxnMarkers v1 (the version Kafka 3.9's brokers and
Kafka 4's speak for a transaction of the classic protocol), to the partition's leader as the
coordinator's broker reads it: a broker of this process, of another ``coordkit serve`` process,
or a Kafka 3.9 broker sharing the cluster, alike. One connection per leader, opened by the
process's :class:`~coordkit.serve.control_plane.connector.BrokerConnector` (the inter-broker
listener's TLS and SASL). A partition is retried (with a growing pause, at most a second) until
its leader appends the marker, as Kafka's manager retries NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT and a lost connection; a
partition whose topic no longer exists is dropped; INVALID_PRODUCER_EPOCH or
TRANSACTION_COORDINATOR_FENCED means a newer coordinator or producer took over, and this
coordinator stops.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable

import attrs

from coordkit.engine.states import TP
from coordkit.errors import StoreError
from coordkit.protocol import messages
from coordkit.protocol.errors import ProtocolError
from coordkit.serve import errors
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.control_plane.connection import BrokerConnections, UnservedVersionError

log = logging.getLogger("coordkit.serve.transactions")

Request = messages.WriteTxnMarkersRequest
Marker = nested(Request, "WritableTxnMarker")
MarkerTopic = nested(Request, "WritableTxnMarkerTopic")
#: What a leader answers that ends this coordinator's attempt: another coordinator or producer
#: epoch took over.
FENCED = frozenset({errors.INVALID_PRODUCER_EPOCH, errors.TRANSACTION_COORDINATOR_FENCED})
_LONGEST_PAUSE = 1.0
#: A code no broker answers: the leader could not be reached.
UNREACHABLE = -2


@attrs.frozen
class TxnMarker:
    """The marker a transaction's partitions get."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


class TransactionMarkerChannelManager:
    """Broker ``ctx``'s connections to the partition leaders its coordinator writes markers to."""

    def __init__(self, ctx: BrokerContext, client_id: str = "coordkit-txn-markers") -> None:
        self.ctx = ctx
        self.connections = BrokerConnections(f"{client_id}-{ctx.broker_id}", ctx.connector,
                                             ctx.broker.store)  # fmt: skip

    async def write(
        self, marker: TxnMarker, partitions: Iterable[TP], still_coordinator: Callable[[], bool]
    ) -> bool:
        """Write ``marker`` to every partition: ``True`` once each has it (or its topic is
        gone), ``False`` when the coordinator was fenced or stopped coordinating."""
        left = set(partitions)
        pause = 0.05
        while left:
            if not still_coordinator():
                return False
            by_leader: dict[int, list[TP]] = {}
            for tp in sorted(left):
                found = self.ctx.leadership(tp)
                if found is None:
                    log.info("broker %s: no marker for %s-%s: its topic is gone",
                             self.ctx.broker_id, *tp)  # fmt: skip
                    left.discard(tp)
                elif found[0] >= 0:
                    by_leader.setdefault(found[0], []).append(tp)
            answers = await asyncio.gather(*(
                self.ctx.blocking(functools.partial(self._send, leader, tps, marker))
                for leader, tps in by_leader.items()
            ))  # fmt: skip
            for answer in answers:
                for tp, code in answer.items():
                    if code == errors.NONE:
                        left.discard(tp)
                    elif code in FENCED:
                        log.info("broker %s: markers of producer %s stopped: %s-%s answered %s",
                                 self.ctx.broker_id, marker.producer_id, *tp, code)  # fmt: skip
                        return False
            if left:
                await asyncio.sleep(pause)
                pause = min(pause * 2, _LONGEST_PAUSE)
        return True

    def _send(self, leader: int, partitions: list[TP], marker: TxnMarker) -> dict[TP, int]:
        """One WriteTxnMarkers to ``leader`` (blocking): each partition's code."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        request = Request(markers=[Marker(
            producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
            transaction_result=marker.commit, coordinator_epoch=marker.coordinator_epoch,
            topics=[MarkerTopic(name=t, partition_indexes=p)
                    for t, p in by_topic.items()])])  # fmt: skip
        try:
            answer = self.connections.call(leader, request, (1, 1))
        except (OSError, ProtocolError, StoreError, UnservedVersionError) as exc:
            log.info("broker %s: markers to broker %s not sent: %s", self.ctx.broker_id,
                     leader, exc)  # fmt: skip
            return dict.fromkeys(partitions, UNREACHABLE)
        codes: dict[TP, int] = {}
        for result in answer.markers:
            for topic in result.topics:
                for partition in topic.partitions:
                    codes[(topic.name, partition.partition_index)] = partition.error_code
        return {tp: codes.get(tp, UNREACHABLE) for tp in partitions}

    def close(self) -> None:
        self.connections.close()
