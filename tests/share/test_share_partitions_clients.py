"""Real share consumers against ``coordkit serve`` (three brokers in a process of their own, on the
``--backend`` store): confluent-kafka's ``ShareConsumer`` (librdkafka) and Kafka 4.4's Java
``KafkaShareConsumer``, each member a process of its own, explicit acknowledgements.

* Three members share a topic: every record is accepted exactly once (a member whose lock ran
  out before it acknowledged — a slow JVM — is refused, INVALID_RECORD_STATE, and the record
  goes to another).
* A member killed (kill -9) while holding records: after their lock (2 s here) the others get
  them, delivered a second time; none lost.
* A record rejected is archived and never delivered again; a record released every time is
  delivered ``group.share.delivery.count.limit`` (3 here) times, then archived.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from serve.conftest import ServeFactory, ServeProcess
from share.share_partition_members.members import CLIENTS, Members

TOPIC = "jobs"
PARTITIONS = 3
LOCK_MS = 2_000
DELIVERY_LIMIT = 3
#: A killed member's partitions are given to the others once its session times out.
SESSION_MS = 6_000
#: Under Kafka 4.4's lower bounds (15 s locks, 45 s sessions, 5 s heartbeats), moved down as a
#: Kafka broker would need them moved (coordkit serve checks the same bounds at its start).
CONFIGS = ("--config", f"group.share.record.lock.duration.ms={LOCK_MS}",
           "--config", f"group.share.min.record.lock.duration.ms={LOCK_MS}",
           "--config", f"group.share.delivery.count.limit={DELIVERY_LIMIT}",
           "--config", f"group.share.session.timeout.ms={SESSION_MS}",
           "--config", f"group.share.min.session.timeout.ms={SESSION_MS}",
           "--config", "group.share.heartbeat.interval.ms=1000",
           "--config", "group.share.min.heartbeat.interval.ms=1000")  # fmt: skip
WAIT_SECONDS = 90


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    started = Members(tmp_path / "logs")
    yield started
    started.close()


def cluster(serve: ServeFactory, group: str) -> ServeProcess:
    """Three brokers; the topic on all three; the group starting from the earliest record."""
    server = serve(*CONFIGS, brokers=3)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    earliest = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    for future in admin.incremental_alter_configs([earliest]).values():
        future.result(30)
    return server


def produce(server: ServeProcess, values: list[str], partition: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all", "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value.encode(),
                         partition=i % PARTITIONS if partition is None else partition)  # fmt: skip
        producer.poll(0)
    assert producer.flush(30) == 0


def accepted(members: Members) -> list[tuple[int, int]]:
    """The records the members accepted and the broker took (a member whose lock ran out
    before it acknowledged is refused: its record went to another)."""
    return [
        (r["partition"], r["offset"])
        for m in members.started
        for r in m.records()
        if r["ack"] == "accept" and r["committed"]
    ]


@pytest.mark.parametrize("client", CLIENTS)
def test_three_members_share_a_topic_and_each_record_is_acknowledged_once(
    serve: ServeFactory, members: Members, client: str
) -> None:
    group = f"share-three-{client}"
    server = cluster(serve, group)
    values = [f"v{i}" for i in range(300)]
    produce(server, values)
    for _ in range(3):
        members.start(client, server.bootstrap, group, TOPIC, "accept")
    members.wait(lambda: len(set(accepted(members))) == len(values), WAIT_SECONDS,
                 "every record accepted")  # fmt: skip
    time.sleep(1)  # anything delivered twice would show now
    got = accepted(members)
    assert len(got) == len(values), [po for po, n in Counter(got).items() if n > 1][:5]
    assert {r["value"] for m in members.started for r in m.records()} == set(values)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_killed_member_s_records_go_to_the_others_after_their_lock(
    serve: ServeFactory, members: Members, client: str
) -> None:
    group = f"share-killed-{client}"
    server = cluster(serve, group)
    values = [f"v{i}" for i in range(60)]
    produce(server, values)
    holder = members.start(client, server.bootstrap, group, TOPIC, "hold")
    members.wait(lambda: holder.saw("holding"), WAIT_SECONDS, "the holder to get records")
    held = {(r["partition"], r["offset"]) for r in holder.records()}
    holder.kill()
    for _ in range(2):
        members.start(client, server.bootstrap, group, TOPIC, "accept")
    members.wait(lambda: len(set(accepted(members))) == len(values), WAIT_SECONDS,
                 "every record accepted")  # fmt: skip
    again = {
        (r["partition"], r["offset"]): r["delivery"]
        for m in members.started[1:]
        for r in m.records()
        if (r["partition"], r["offset"]) in held
    }
    assert set(again) == held
    assert all(delivery >= 2 for delivery in again.values())
    assert len(accepted(members)) == len(values)
    assert not holder.saw("closed")


@pytest.mark.parametrize("client", CLIENTS)
def test_rejected_records_are_archived_and_released_ones_up_to_the_delivery_limit(
    serve: ServeFactory, members: Members, client: str
) -> None:
    group = f"share-triage-{client}"
    server = cluster(serve, group)
    values = [f"{kind}-{i}" for i in range(5) for kind in ("ok", "rej", "rel")]
    produce(server, values, partition=0)
    member = members.start(client, server.bootstrap, group, TOPIC, "triage")

    def deliveries() -> Counter[str]:
        return Counter(r["value"] for r in member.records())

    members.wait(
        lambda: all(deliveries()[v] == DELIVERY_LIMIT for v in values if v.startswith("rel")),
        WAIT_SECONDS, "the released records delivered up to the limit",
    )  # fmt: skip
    time.sleep(LOCK_MS / 1000 + 1)  # nothing more comes
    seen = deliveries()
    assert {v: seen[v] for v in values} == {
        v: DELIVERY_LIMIT if v.startswith("rel") else 1 for v in values
    }
    released = sorted(r["delivery"] for r in member.records() if r["value"] == "rel-0")
    assert released == [1, 2, 3]
