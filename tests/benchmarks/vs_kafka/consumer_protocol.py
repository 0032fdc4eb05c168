"""Kafka 4's consumer protocol (KIP-848): how long a group of consumer-protocol members takes to
reach Stable on each side, with the brokers' server-side assignors (issue #33's target).

The members are driven here, over the wire, as clients drive them (one asyncio task a member,
spread over a few connections to the group's coordinator): a member joins with epoch 0, heartbeats
every ``heartbeat_interval_ms`` the broker answers, and acknowledges a new assignment at once with
a heartbeat listing what it now owns (as librdkafka's and Java's consumers do once their rebalance
callbacks have run). Records are not read: the figure is the coordinator's.

Per assignor and size (:data:`MEMBER_COUNTS` members on a topic of twice as many partitions):

* ``cold s`` — all members join a new group at once; seconds until ConsumerGroupDescribe says
  Stable with every member at the group epoch and, as the members see it, every partition owned
  by exactly one member;
* ``leave s`` — then, :data:`SETTLED_PAUSE` later, one member leaves (epoch -1); seconds until
  Stable again without it.

Both sides run with ``group.consumer.heartbeat.interval.ms`` = :data:`HEARTBEAT_MS` (set in
:data:`vs_kafka.clusters.SHARED_CONFIG`; Kafka also gets the matching minimum, which coordkit has no
setting for).
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Callable
from typing import Any

from coordkit.protocol import KafkaCodec, messages
from vs_kafka.clusters import create_topic

MEMBER_COUNTS = (10, 100, 1000)
ASSIGNORS = ("uniform", "range")
HEARTBEAT_MS = 500
#: Broker configs both sides get, and the ones only Kafka has.
CONNECTIONS = 20
#: Seconds a Stable group is left alone before a member leaves.
SETTLED_PAUSE = 2.0
SETTLE_TIMEOUT = 180.0
CASES = ("consumer-protocol",)
Figures = dict[str, float]

CODEC = KafkaCodec()
HeartbeatRequest = messages.ConsumerGroupHeartbeatRequest
OwnedTopic = HeartbeatRequest.TopicPartitions  # type: ignore[attr-defined]


class Connection:
    """One connection: requests in order, answers matched by correlation id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.waiting: dict[int, tuple[str, int, asyncio.Future[Any]]] = {}
        self.ids = itertools.count(1)
        self.task = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, address: str) -> Connection:
        host, port = address.rsplit(":", 1)
        return cls(*await asyncio.open_connection(host, int(port)))

    async def call(self, body: Any, version: int) -> Any:
        correlation = next(self.ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[correlation] = (type(body).__name__.removesuffix("Request"), version, future)
        self.writer.write(CODEC.encode_request(body, version=version, correlation_id=correlation))
        return await future

    async def _read(self) -> None:
        while True:
            size = int.from_bytes(await self.reader.readexactly(4), "big")
            frame = await self.reader.readexactly(size)
            correlation = int.from_bytes(frame[:4], "big")
            api, version, future = self.waiting.pop(correlation)
            future.set_result(CODEC.decode_response(api, version, frame)[1])

    def close(self) -> None:
        self.task.cancel()
        self.writer.close()


class Member:
    def __init__(self, group: str, topic: str, assignor: str, connection: Connection) -> None:
        self.group, self.topic, self.assignor = group, topic, assignor
        self.connection = connection
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: set[tuple[uuid.UUID, int]] = set()
        self.leaving = False
        self.gone = False
        self.wake = asyncio.Event()
        self.left_at = 0.0

    def leave(self) -> None:
        self.leaving = True
        self.wake.set()

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.wake.wait(), seconds)
        except TimeoutError:
            pass

    def _owned(self) -> list[Any]:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for topic_id, partition in sorted(self.owned):
            by_topic.setdefault(topic_id, []).append(partition)
        return [OwnedTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()]

    async def run(self) -> None:
        full = True
        while not self.gone:
            request = HeartbeatRequest(group_id=self.group, member_id=self.member_id,
                                       member_epoch=-1 if self.leaving else self.epoch)  # fmt: skip
            if full and not self.leaving:
                request.rebalance_timeout_ms = 60_000
                request.subscribed_topic_names = [self.topic]
                request.server_assignor = self.assignor
                request.topic_partitions = self._owned()
            elif not self.leaving:
                request.topic_partitions = self._owned()
            if self.leaving:
                self.left_at = time.monotonic()
            answer = await self.connection.call(request, 1)
            if self.leaving:
                self.gone, self.owned = True, set()
                return
            if answer.error_code:
                full = True
                if answer.error_code == 110:  # FENCED_MEMBER_EPOCH: give all up, join again
                    self.epoch, self.owned = 0, set()
                await self._sleep(HEARTBEAT_MS / 1000)
                continue
            full = False
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                self.owned = {
                    (t.topic_id, p)
                    for t in answer.assignment.topic_partitions
                    for p in t.partitions
                }
                continue  # acknowledge at once, as clients do after their callbacks
            await self._sleep(answer.heartbeat_interval_ms / 1000)


async def _coordinator(bootstrap: str, group: str) -> str:
    connection = await Connection.open(bootstrap.split(",", maxsplit=1)[0])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            answer = await connection.call(
                messages.FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4
            )
            (found,) = answer.coordinators
            if found.error_code == 0:
                return f"{found.host}:{found.port}"
            await asyncio.sleep(0.2)
        raise SystemExit(f"no coordinator for {group}")
    finally:
        connection.close()


async def _stable(admin: Connection, group: str, members: list[Member], partitions: int) -> bool:
    live = [m for m in members if not m.gone]
    owned = [tp for m in live for tp in m.owned]
    if len(owned) != partitions or len(set(owned)) != partitions:
        return False
    answer = await admin.call(messages.ConsumerGroupDescribeRequest(group_ids=[group]), 0)
    (described,) = answer.groups
    return (
        described.group_state == "Stable"
        and len(described.members) == len(live)
        and all(m.member_epoch == described.group_epoch for m in described.members)
    )


async def _until_stable(admin: Connection, group: str, members: list[Member], partitions: int,
                        since: float) -> float:  # fmt: skip
    while time.monotonic() - since < SETTLE_TIMEOUT:
        if await _stable(admin, group, members, partitions):
            return time.monotonic() - since
        await asyncio.sleep(0.02)
    return float("nan")


async def _one_group(bootstrap: str, assignor: str, count: int) -> Figures:
    topic = f"cp-{assignor}-{count}-{time.monotonic_ns()}"
    partitions = 2 * count
    create_topic(bootstrap, topic, partitions)
    group = f"g-{topic}"
    address = await _coordinator(bootstrap, group)
    connections = [await Connection.open(address) for _ in range(min(CONNECTIONS, count))]
    admin = await Connection.open(address)
    members = [
        Member(group, topic, assignor, connections[i % len(connections)]) for i in range(count)
    ]
    started = time.monotonic()
    tasks = [asyncio.ensure_future(m.run()) for m in members]
    try:
        cold = await _until_stable(admin, group, members, partitions, started)
        # From a settled group: past both sides' assignment interval (1 s by default), so the
        # leave's new target is not held back by the cold start's last one.
        await asyncio.sleep(SETTLED_PAUSE)
        members[0].leave()
        while not members[0].gone:  # its leave answered: the group no longer counts it
            await asyncio.sleep(0.001)
        leave = await _until_stable(admin, group, members, partitions, members[0].left_at)
        return {"cold s": cold, "leave s": leave}
    finally:
        for m in members:
            m.gone = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for connection in (*connections, admin):
            connection.close()


def run(bootstrap: str, case: Callable[[str, Callable[[], Figures]], None]) -> None:
    for assignor in ASSIGNORS:
        for count in MEMBER_COUNTS:
            case(
                f"consumer protocol {assignor} {count}",
                lambda a=assignor, c=count: asyncio.run(_one_group(bootstrap, a, c)),  # type: ignore[misc]
            )
