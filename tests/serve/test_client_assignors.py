"""coordkit's ``sticky`` and ``cooperative-sticky`` assignors inside three kafka-python consumers,
each its own process, in one group on ``coordkit serve``: the group leader (one of the consumers)
runs coordkit's assignor, the members carry their owned partitions in Kafka's formats, and when
one member leaves the others keep what they had; when one joins, the others give up only what
it takes."""

from __future__ import annotations

import asyncio
import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from serve.conftest import STOP_SECONDS, ServeFactory

TOPIC = "orders"
PARTITIONS = 6
RECORDS = 60
#: Seconds the group may take to settle after a member joins or leaves.
SETTLE_SECONDS = 90

# One consumer process: it prints a JSON line for every change of its assignment (with the
# generation and what coordkit's assignor remembers) and for every record it reads, and leaves the group
# cleanly (LeaveGroup) on SIGTERM.
CONSUMER = r"""
import json, signal, sys
from kafka import KafkaConsumer
from coordkit.clients.kafka_python import assignor

bootstrap, member, name = sys.argv[1], sys.argv[2], sys.argv[3]
running = True

def stop(*_):
    global running
    running = False

signal.signal(signal.SIGTERM, stop)

def say(**event):
    print(json.dumps({"member": member, **event}), flush=True)

consumer = KafkaConsumer(
    bootstrap_servers=bootstrap,
    group_id="billing",
    client_id=member,
    partition_assignment_strategy=[assignor(name)],
    auto_offset_reset="earliest",
    enable_auto_commit=False,
    session_timeout_ms=10000,
    heartbeat_interval_ms=500,
    max_poll_interval_ms=30000,
)

consumer.subscribe([%(topic)r])
say(event="started")
reported = None
while running:
    for records in consumer.poll(timeout_ms=200).values():
        for record in records:
            say(event="record", partition=record.partition, value=record.value.decode())
    # Between polls the assignment is whole (eager and cooperative alike); report each change.
    # The generation moves at the JoinGroup answer, the assignor's memory at the assignment
    # (SyncGroup) after it: a cooperative member keeps its partitions in between, so a change of
    # either is reported.
    now = (
        sorted(tp.partition for tp in consumer.assignment()),
        consumer._coordinator._generation.generation_id,
        consumer._coordinator._assignors[name].state.generation,
    )
    if now != reported and now[1] > 0:
        reported = now
        say(event="assigned", partitions=now[0], generation=now[1], remembered=now[2])
consumer.close()
say(event="closed")
"""


class Member:
    """One consumer process and the events it printed."""

    def __init__(self, bootstrap: str, name: str, strategy: str) -> None:
        self.name = name
        self.process = subprocess.Popen(
            [sys.executable, "-c", CONSUMER % {"topic": TOPIC}, bootstrap, name, strategy],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.assignment: list[int] | None = None
        self.generation = -1
        self.remembered = -1
        self.records: list[tuple[int, str]] = []
        self.closed = False
        self._stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.put(json.loads(line))

    def _read_stderr(self) -> None:
        # Read as it comes, so a chatty client never blocks on a full pipe.
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    def drain(self) -> None:
        while True:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return
            if event["event"] == "assigned":
                self.assignment = event["partitions"]
                self.generation = event["generation"]
                self.remembered = event["remembered"]
            elif event["event"] == "record":
                self.records.append((event["partition"], event["value"]))
            elif event["event"] == "closed":
                self.closed = True

    def leave(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def stderr(self) -> str:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(STOP_SECONDS)
        return "".join(self._stderr)[-3000:]


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        if member.process.poll() is None:
            member.process.kill()
            member.process.wait(STOP_SECONDS)


def _settled(group: list[Member]) -> bool:
    """Every member has an assignment of one generation, received (its assignor remembers that
    generation); together they cover every partition once, evenly."""
    for member in group:
        member.drain()
    if any(m.assignment is None for m in group):
        return False
    if len({m.generation for m in group}) != 1:
        return False
    if any(m.remembered != m.generation for m in group):
        return False  # joined the generation, its assignment not received yet
    every = sorted(p for m in group for p in m.assignment or [])
    sizes = sorted(len(m.assignment or []) for m in group)
    return every == list(range(PARTITIONS)) and sizes[-1] - sizes[0] <= 1


def _wait_settled(group: list[Member], everyone: list[Member], what: str) -> None:
    deadline = time.monotonic() + SETTLE_SECONDS
    while not _settled(group):
        if time.monotonic() > deadline or any(m.process.poll() is not None for m in group):
            report = "\n".join(
                f"{m.name}: assignment={m.assignment} generation={m.generation} "
                f"exit={m.process.poll()}"
                for m in everyone
            )
            errors = "\n".join(f"--- {m.name} stderr:\n{m.stderr()}" for m in everyone)
            raise AssertionError(f"the group did not settle {what}:\n{report}\n{errors}")
        time.sleep(0.2)


@pytest.mark.parametrize("strategy", ["sticky", "cooperative-sticky"])
def test_three_kafka_python_consumers_share_partitions_with_coordkits_sticky(
    serve: ServeFactory, members: list[Member], strategy: str
) -> None:
    server = serve(brokers=3)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 2)])
    finally:
        admin.close()
    for name in ("a", "b"):
        members.append(Member(server.bootstrap, name, strategy))
    a, b = members
    _wait_settled(members, members, "with two members")
    pair = {m.name: set(m.assignment or []) for m in members}
    # c joins: a and b each give up one partition and keep the rest.
    c = Member(server.bootstrap, "c", strategy)
    members.append(c)
    _wait_settled(members, members, "after c joined")
    before = {m.name: set(m.assignment or []) for m in members}
    assert sorted(len(p) for p in before.values()) == [2, 2, 2]
    assert before["a"] <= pair["a"]
    assert before["b"] <= pair["b"]
    # Each member remembers the generation it was assigned in (it goes into its user data).
    assert a.remembered == a.generation > 0

    # Records produced now are each read once, by the member that owns their partition.
    producer = KafkaProducer(
        bootstrap_servers=server.bootstrap, acks=1, enable_idempotence=False, linger_ms=5
    )
    for i in range(RECORDS):
        producer.send(TOPIC, key=f"k{i}".encode(), value=f"order-{i}".encode())
    producer.flush(timeout=30)
    producer.close(timeout=30)

    deadline = time.monotonic() + SETTLE_SECONDS
    while sum(len(m.records) for m in members) < RECORDS and time.monotonic() < deadline:
        time.sleep(0.2)
        for m in members:
            m.drain()
    read = sorted(value for m in members for _, value in m.records)
    assert read == sorted(f"order-{i}" for i in range(RECORDS))
    for m in members:
        assert {partition for partition, _ in m.records} <= before[m.name]

    # b leaves; a and c keep everything they had and take over b's partitions.
    generation = a.generation
    b.leave()
    assert b.process.wait(STOP_SECONDS) == 0
    deadline = time.monotonic() + STOP_SECONDS
    while not b.closed and time.monotonic() < deadline:  # its last line may still be in the pipe
        time.sleep(0.1)
        b.drain()
    assert b.closed
    _wait_settled([a, c], members, "after b left")
    assert a.generation > generation
    after = {m.name: set(m.assignment or []) for m in (a, c)}
    assert before["a"] <= after["a"]
    assert before["c"] <= after["c"]
    assert after["a"] | after["c"] == set(range(PARTITIONS))
    assert sorted(len(p) for p in after.values()) == [3, 3]


async def _two_aiokafka_consumers(bootstrap: str) -> tuple[list[set[int]], list[Any]]:
    from aiokafka import AIOKafkaConsumer

    from coordkit.clients.aiokafka import assignor

    strategies = [assignor("sticky"), assignor("sticky")]  # one per consumer
    consumers = [
        AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=bootstrap,
            group_id="aio",
            partition_assignment_strategy=[strategy],
            enable_auto_commit=False,
            session_timeout_ms=10_000,
            heartbeat_interval_ms=500,
        )
        for strategy in strategies
    ]
    for consumer in consumers:
        await consumer.start()
    try:
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            # getmany() keeps each consumer's group membership going.
            await asyncio.gather(*(c.getmany(timeout_ms=200) for c in consumers))
            parts = [{tp.partition for tp in c.assignment()} for c in consumers]
            covered = sorted(p for ps in parts for p in ps) == list(range(PARTITIONS))
            one_generation = len({s.state.generation for s in strategies}) == 1
            if covered and one_generation and all(parts):
                return parts, strategies
            if time.monotonic() > deadline:
                raise AssertionError(f"the aiokafka group did not settle: {parts} {strategies}")
    finally:
        for consumer in consumers:
            await consumer.stop()


def test_two_aiokafka_consumers_in_one_process_keep_their_own_state(serve: ServeFactory) -> None:
    server = serve(brokers=1)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    finally:
        admin.close()
    parts, strategies = asyncio.run(_two_aiokafka_consumers(server.bootstrap))
    assert sorted(len(p) for p in parts) == [3, 3]
    for owned, strategy in zip(parts, strategies, strict=True):
        # What each consumer's own assignor remembers is its own consumer's assignment.
        assert set(strategy.state.owned[TOPIC]) == owned
        assert strategy.state.generation > 0
