"""Followers of leaders in other ``coordkit serve`` processes: each broker of this process copies
the batches of the partitions it follows from a leader elsewhere over Kafka's protocol, as Kafka's
``ReplicaFetcherThread`` does.

Brokers of one process copy in memory (:mod:`coordkit.serve.dataplane.replicas`); a leader in another
process (``coordkit serve --broker-id``: one broker per process) is reached at the address its
registration names (read by :mod:`coordkit.serve.dataplane.follower`). For each leader, one connection and
one request at a time, in rounds:

* after each leader change (a new leader epoch) the follower asks OffsetForLeaderEpoch where its
  latest epoch ends in the leader's log, and truncates there (Kafka's truncation by leader
  epoch; a log that knows no epoch the leader knows is copied again from the start);
* then a Fetch from its log end, waiting up to ``replica.fetch.wait.max.ms`` at the leader for
  records (long polling), and the batches are appended as they are (CRC-32C checked).

The fetch names this broker as the replica (Kafka's follower fetch): the leader reads up to its
log end and takes the fetch offset as this replica's log end, for its high watermark and ISR
(:mod:`coordkit.serve.apis.fetch`), so acks=all waits for the copies here as for those of the
leader's own process. The copies make the followers' logs the leader's, byte for byte, so that
any replica can take over — a Kafka broker started on the log directory included.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coordkit.engine.replication import PartitionLog as PartitionState
from coordkit.engine.replication import ReplicationModel
from coordkit.engine.states import TP
from coordkit.kafka.model import NO_LEADER
from coordkit.protocol import KafkaCodec, messages, records
from coordkit.protocol.errors import ProtocolError
from coordkit.serve import errors
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.control_plane.connector import BrokerConnector

log = logging.getLogger("coordkit.serve")

FetchRequest = messages.FetchRequest
FetchTopic = nested(FetchRequest, "FetchTopic")
FetchPartition = nested(FetchRequest, "FetchPartition")
EpochRequest = messages.OffsetForLeaderEpochRequest
EpochTopic = nested(EpochRequest, "OffsetForLeaderTopic")
EpochPartition = nested(EpochRequest, "OffsetForLeaderPartition")
OffsetsRequest = messages.ListOffsetsRequest
OffsetsTopic = nested(OffsetsRequest, "ListOffsetsTopic")
OffsetsPartition = nested(OffsetsRequest, "ListOffsetsPartition")
#: ListOffsets with a replica id and the current leader epoch; EARLIEST: the log start.
LIST_OFFSETS_VERSION = 4
EARLIEST_TIMESTAMP = -2
#: Versions every ``coordkit serve`` answers (and Kafka 3.9): Fetch by topic names, the last
#: before topic ids; OffsetForLeaderEpoch with a replica id.
FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
#: Bytes a follower copies per partition and fetch (Kafka's ``replica.fetch.max.bytes``) and
#: per fetch (``replica.fetch.response.max.bytes``).
PARTITION_MAX_BYTES = 1024 * 1024
RESPONSE_MAX_BYTES = 10 * 1024 * 1024
#: An epoch answer that names no epoch (the leader knows none as old as the follower's).
UNDEFINED = -1
#: Seconds between looks at the model's partition states while a follower waits.
STATES_POLL = 0.02
#: Seconds before a leader that did not confirm its epoch yet is asked again.
EPOCH_RETRY = 0.05
#: Seconds a connection (TLS and SASL login included) may take (each call is bounded too).
CONNECT_TIMEOUT = 30.0
_SIZE = struct.Struct(">i")

Addresses = Callable[[], Mapping[int, tuple[str, int]]]


class LeaderConnection:
    """One connection to another process's broker, one request at a time."""

    def __init__(self, address: tuple[str, int], client_id: str, codec: KafkaCodec,
                 connector: BrokerConnector | None = None) -> None:  # fmt: skip
        self.address = address
        self.client_id = client_id
        self.codec = codec
        #: Opens the connection: the inter-broker listener's TLS and SASL login.
        self.connector = connector or BrokerConnector()
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._correlation = 0

    async def call(self, body: Any, version: int, timeout: float) -> Any:
        """Send ``body`` and wait for its answer.

        :raises OSError: the connection failed (it is closed, the next call reconnects).
        :raises ProtocolError: the answer is malformed.
        """
        try:
            return await asyncio.wait_for(self._call(body, version), timeout)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ProtocolError):
            self.close()
            raise

    async def _call(self, body: Any, version: int) -> Any:
        if self._streams is None:
            self._streams = await self.connector.open(self.address, CONNECT_TIMEOUT)
        reader, writer = self._streams
        self._correlation += 1
        writer.write(self.codec.encode_request(body, version=version,
                                               correlation_id=self._correlation,
                                               client_id=self.client_id))  # fmt: skip
        await writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
        frame = await reader.readexactly(size)
        correlation, answer = self.codec.decode_response(
            type(body).KAFKA_NAME.removesuffix("Request"), version, frame
        )
        if correlation != self._correlation:
            raise ProtocolError(f"answer {correlation} to request {self._correlation}")
        return answer

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


class RemoteFollower:
    """Broker ``ctx``'s replicas of partitions whose leader runs in another process (none of
    ``local``), kept up with their leaders until :meth:`close`: one fetching task per leader
    (Kafka's fetcher thread per source broker), so that a leader with nothing new does not hold
    up the others.

    :param addresses: where each registered broker listens (read from the store elsewhere).
    :param fetch_wait: Kafka's ``replica.fetch.wait.max.ms``, in seconds: how long a leader
        holds a fetch that finds nothing new, the pause after a failed round, and how often the
        leaders followed are looked at again.
    """

    def __init__(
        self,
        ctx: BrokerContext,
        model: ReplicationModel,
        local: Sequence[int],
        addresses: Addresses,
        fetch_wait: float,
    ) -> None:
        self.ctx = ctx
        self.model = model
        self.local = frozenset(local)
        self.addresses = addresses
        self.fetch_wait = fetch_wait
        self.codec = KafkaCodec()
        self._fetchers: dict[int, asyncio.Task[None]] = {}
        #: The leader epoch each partition was last truncated for.
        self._checked_epoch: dict[TP, int] = {}
        #: The high watermark each leader last told (what a Kafka follower checkpoints).
        self.high_watermarks: dict[TP, int] = {}
        #: Per leader: whether its last round left partitions whose epoch it did not confirm.
        self._unchecked: dict[int, bool] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(),
                                         name=f"coordkit-serve-remote-{self.ctx.broker_id}")  # fmt: skip

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        """A fetching task for each leader followed, started and stopped as leaderships move."""
        try:
            while self.ctx.broker.alive:
                followed = set(self._followed())
                for leader in set(self._fetchers) - followed:
                    self._fetchers.pop(leader).cancel()
                for leader in followed - set(self._fetchers):
                    self._fetchers[leader] = asyncio.create_task(
                        self._follow(leader),
                        name=f"coordkit-serve-remote-{self.ctx.broker_id}-from-{leader}",
                    )
                await self._pause(self.fetch_wait)
        finally:
            for task in self._fetchers.values():
                task.cancel()
            await asyncio.gather(*self._fetchers.values(), return_exceptions=True)
            self._fetchers.clear()

    def _followed(self) -> dict[int, list[tuple[TP, PartitionState]]]:
        """The partitions this broker follows, by leader (in another process)."""
        by_leader: dict[int, list[tuple[TP, PartitionState]]] = {}
        me = self.ctx.broker_id
        for tp, state in self.model.partitions():
            leader = state.leader
            if leader in (NO_LEADER, me) or leader in self.local or me not in state.replicas:
                continue
            by_leader.setdefault(leader, []).append((tp, state))
        return by_leader

    async def _follow(self, leader: int) -> None:
        """Rounds against ``leader``: a fetch waits there, so the next round may follow at
        once; a round that could not fetch waits ``fetch_wait``."""
        connection: LeaderConnection | None = None
        try:
            while True:
                partitions = self._followed().get(leader, [])
                address = self.addresses().get(leader)
                fetched = False
                if partitions and address is not None:
                    if connection is None or connection.address != address:
                        if connection is not None:
                            connection.close()
                        connection = LeaderConnection(
                            address,
                            f"coordkit-replica-{self.ctx.broker_id}",
                            self.codec,
                            self.ctx.connector,
                        )
                    try:
                        fetched = await self._round(connection, leader, partitions)
                    except Exception:
                        log.exception("broker %s: fetching from broker %s failed",
                                      self.ctx.broker_id, leader)  # fmt: skip
                if not fetched:
                    # A leader that has not heard of its epoch yet is asked again soon.
                    await self._pause(min(self.fetch_wait, EPOCH_RETRY)
                                      if self._unchecked.get(leader) else self.fetch_wait)  # fmt: skip
        finally:
            if connection is not None:
                connection.close()

    async def _round(
        self,
        connection: LeaderConnection,
        leader: int,
        partitions: list[tuple[TP, PartitionState]],
    ) -> bool:
        """Truncate where a leader epoch is new, then fetch; whether a fetch was served."""
        try:
            unchecked = [(tp, s) for tp, s in partitions
                         if self._checked_epoch.get(tp) != s.leader_epoch]  # fmt: skip
            if unchecked:
                await self._truncate(connection, unchecked)
            checked = [(tp, s) for tp, s in partitions
                       if self._checked_epoch.get(tp) == s.leader_epoch]  # fmt: skip
            self._unchecked[leader] = len(checked) < len(partitions)
            if not checked:
                return False  # the leader has not heard of its epoch yet: again after a pause
            served = await self._fetch(connection, checked)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ProtocolError) as exc:
            log.debug("broker %s: leader %s at %s:%s not reached: %s", self.ctx.broker_id,
                      leader, *connection.address, exc)  # fmt: skip
            return False
        return served

    async def _truncate(
        self, connection: LeaderConnection, partitions: list[tuple[TP, PartitionState]]
    ) -> None:
        """Cut each log where it stops agreeing with the leader's (by leader epoch)."""
        asked = {tp: state for tp, state in partitions}
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), state in partitions:
            own = self.ctx.logs.get((topic, partition))
            by_topic.setdefault(topic, []).append(EpochPartition(
                partition=partition, current_leader_epoch=state.leader_epoch,
                leader_epoch=own.latest_epoch))  # fmt: skip
        request = EpochRequest(replica_id=self.ctx.broker_id, topics=[
            EpochTopic(topic=topic, partitions=parts) for topic, parts in by_topic.items()
        ])  # fmt: skip
        answer = await connection.call(request, OFFSET_FOR_LEADER_EPOCH_VERSION, self._timeout)
        for topic in answer.topics:
            for result in topic.partitions:
                tp = (topic.topic, result.partition)
                asked_for = asked.get(tp)
                if asked_for is None or result.error_code != errors.NONE:
                    continue  # not the leader's yet, or fenced: again next round
                own = self.ctx.logs.get(tp)
                if own.latest_epoch == UNDEFINED:
                    offset = own.log_end  # nothing of an epoch to disagree about
                elif result.leader_epoch == UNDEFINED:
                    offset = 0  # the leader knows none of our epochs: copy it all again
                else:
                    _, own_end = own.end_offset_for(result.leader_epoch)
                    offset = min(own.log_end, result.end_offset, own_end)
                cut = own.truncate_to(offset)
                if cut:
                    log.info("broker %s: %s-%s truncated by %s records to offset %s (leader %s, "
                             "epoch %s)", self.ctx.broker_id, *tp, cut, own.log_end,
                             asked_for.leader, asked_for.leader_epoch)  # fmt: skip
                self._checked_epoch[tp] = asked_for.leader_epoch

    async def _fetch(
        self, connection: LeaderConnection, partitions: list[tuple[TP, PartitionState]]
    ) -> bool:
        """Copy what the leader has past each log's end; whether any partition was served
        (a fetch that only met errors is not repeated at once)."""
        by_topic: dict[str, list[Any]] = {}
        #: Where each partition's fetch starts: an answer for a log that moved meanwhile (another
        #: round truncated or copied into it) is dropped, as Kafka's fetcher drops a response
        #: whose fetch state changed while it was in flight (``processFetchRequest``).
        asked: dict[TP, int] = {}
        for (topic, partition), state in partitions:
            own = self.ctx.logs.get((topic, partition))
            asked[(topic, partition)] = own.log_end
            by_topic.setdefault(topic, []).append(FetchPartition(
                partition=partition, current_leader_epoch=state.leader_epoch,
                fetch_offset=own.log_end, last_fetched_epoch=own.latest_epoch,
                log_start_offset=own.log_start, partition_max_bytes=PARTITION_MAX_BYTES))  # fmt: skip
        request = FetchRequest(
            replica_id=self.ctx.broker_id,
            max_wait_ms=int(self.fetch_wait * 1000),
            min_bytes=1,
            max_bytes=RESPONSE_MAX_BYTES,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchTopic(topic=topic, partitions=parts) for topic, parts in by_topic.items()],
            forgotten_topics_data=[],
            rack_id="",
        )
        answer = await connection.call(request, FETCH_VERSION, self._timeout)
        ends: dict[TP, int] = {}
        out_of_range: list[TP] = []
        for topic in answer.responses:
            for result in topic.partitions:
                tp = (topic.topic, result.partition_index)
                if result.error_code == errors.OFFSET_OUT_OF_RANGE:
                    out_of_range.append(tp)
                if result.error_code in (errors.OFFSET_OUT_OF_RANGE, errors.FENCED_LEADER_EPOCH):
                    self._checked_epoch.pop(tp, None)  # compare epochs again first
                    continue
                if result.error_code != errors.NONE:
                    continue
                own = self.ctx.logs.get(tp)
                if asked.get(tp) != own.log_end:
                    log.debug("broker %s: %s-%s moved from offset %s to %s while fetching; the "
                              "answer is dropped", self.ctx.broker_id, *tp, asked.get(tp),
                              own.log_end)  # fmt: skip
                    continue
                data = _whole_batches(result.records or b"")
                if data:
                    try:
                        own.append_copied(data)
                    except ProtocolError as exc:
                        log.info("broker %s: %s-%s diverged from leader (%s)",
                                 self.ctx.broker_id, *tp, exc)  # fmt: skip
                        self._checked_epoch.pop(tp, None)
                        continue
                ends[tp] = own.log_end
                self.high_watermarks[tp] = result.high_watermark
                # The leader's log start, followed (Kafka's maybeIncrementLogStartOffset).
                own.maybe_increment_log_start(result.log_start_offset)
        if out_of_range:
            await self._start_at_leaders_log_start(connection, out_of_range)
        if ends:
            self.model.report_log_ends(self.ctx.broker_id, ends, fetched=True)
        return bool(ends)

    async def _start_at_leaders_log_start(
        self, connection: LeaderConnection, partitions: list[TP]
    ) -> None:
        """Fetches below the leader's log start: where the leader's log now starts past this
        one's end (its retention), start again there, as Kafka's follower does on
        OFFSET_OUT_OF_RANGE (``fetchEarliestOffsetFromLeader``, ``truncateFullyAndStartAt``);
        otherwise the epochs are compared again."""
        by_topic: dict[str, list[Any]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(OffsetsPartition(
                partition_index=partition, current_leader_epoch=-1,
                timestamp=EARLIEST_TIMESTAMP))  # fmt: skip
        request = OffsetsRequest(replica_id=self.ctx.broker_id, isolation_level=0, topics=[
            OffsetsTopic(name=topic, partitions=parts) for topic, parts in by_topic.items()
        ])  # fmt: skip
        answer = await connection.call(request, LIST_OFFSETS_VERSION, self._timeout)
        for topic in answer.topics:
            for result in topic.partitions:
                own = self.ctx.logs.get((topic.name, result.partition_index))
                if result.error_code == errors.NONE and result.offset > own.log_end:
                    log.info("broker %s: %s-%s starts again at the leader's log start %s",
                             self.ctx.broker_id, topic.name, result.partition_index,
                             result.offset)  # fmt: skip
                    own.truncate_fully_and_start_at(result.offset)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less: until the model takes in new partition states (a
        LeaderAndIsr), so that a new leader is followed at once, as Kafka's broker adds its
        fetchers while it applies the request."""
        seen = self.model.states_seen
        deadline = asyncio.get_running_loop().time() + seconds
        while self.model.states_seen == seen:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            await asyncio.sleep(min(left, STATES_POLL))

    @property
    def _timeout(self) -> float:
        """How long an answer may take: the leader's wait and then some."""
        return self.fetch_wait + 30.0


def _whole_batches(data: bytes) -> bytes:
    """The whole, CRC-checked batches at the start of ``data`` (a leader may end a fetch
    answer with part of a batch).

    :raises ProtocolError: a batch's checksum does not match.
    """
    size = sum(len(raw) for _, raw in records.iter_batches(data, allow_partial_tail=True))
    return data[:size]
