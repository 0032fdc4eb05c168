"""confluent-kafka (librdkafka) plays the client recording (see ``recording.py``) against one
cluster and prints what it observed as one line of JSON:
``python confluent_client.py <bootstrap> <name prefix>``.

librdkafka reports errors as ``KafkaException`` carrying a ``KafkaError``: the recording names
the error (``UNKNOWN_MEMBER_ID``), not the exception class. Its consumer does not tell its
generation, so its members record their assignments only."""

from __future__ import annotations

from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from recording import (
    COUNTS,
    PARTITIONS,
    arguments,
    emit,
    error_name,
    value,
    wait_settled,
    wait_until,
)

BOOTSTRAP, PREFIX = arguments()
TOPIC = f"{PREFIX}-a"
GROUP = f"{PREFIX}-g"
RECORDING: dict[str, Any] = {}
TIMEOUT = 30.0


def outcome(call: Any) -> Any:
    """What ``call`` returned, or the name of the error it raised."""
    try:
        return call()
    except KafkaException as exc:
        error_name(exc)  # its line on standard error
        return {"error": exc.args[0].name()}
    except Exception as exc:
        return error_name(exc)


def done(futures: dict[Any, Any]) -> str:
    for future in futures.values():
        future.result(TIMEOUT)
    return "ok"


def describe(admin: AdminClient, topic: str) -> Any:
    (future,) = admin.describe_topics(TopicCollection([topic])).values()
    found = future.result(TIMEOUT)
    partitions = [
        {"partition": p.id, "replicas": len(p.replicas), "isr": len(p.isr),
         "leader_is_replica": p.leader is not None and p.leader.id in {r.id for r in p.replicas}}
        for p in sorted(found.partitions, key=lambda p: p.id)
    ]  # fmt: skip
    return {"internal": found.is_internal, "partitions": partitions}


def topics(admin: AdminClient) -> None:
    def create(name: str, partitions: int, replicas: int) -> Any:
        return lambda: done(admin.create_topics([NewTopic(name, partitions, replicas)]))

    RECORDING["create"] = outcome(create(TOPIC, 3, 2))
    RECORDING["create_existing"] = outcome(create(TOPIC, 3, 2))
    RECORDING["create_replication_above_brokers"] = outcome(create(f"{PREFIX}-rf", 1, 4))
    grow = [NewPartitions(TOPIC, 2)], [NewPartitions(TOPIC, 4)]
    RECORDING["partitions_decreased"] = outcome(lambda: done(admin.create_partitions(grow[0])))
    RECORDING["partitions_increased"] = outcome(lambda: done(admin.create_partitions(grow[1])))
    wait_settled(lambda: len(describe(admin, TOPIC)["partitions"]) == PARTITIONS, "4 partitions")
    RECORDING["describe_missing"] = outcome(lambda: describe(admin, f"{PREFIX}-unknown"))
    missing = [f"{PREFIX}-missing"]
    RECORDING["delete_missing"] = outcome(lambda: done(admin.delete_topics(missing)))


def settled(admin: AdminClient) -> None:
    """At the end, when every broker has long known the topic: the topics listed and the topic
    described."""
    names = admin.list_topics(timeout=TIMEOUT).topics
    RECORDING["list"] = sorted(t for t in names if t.startswith(PREFIX))
    RECORDING["describe"] = outcome(lambda: describe(admin, TOPIC))


def produce() -> None:
    delivered: dict[int, Any] = {}

    def report(index: int) -> Any:
        def on_delivery(error: Any, message: Any) -> None:
            delivered[index] = (
                {"error": error.name()} if error else [message.partition(), message.offset()]
            )

        return on_delivery

    producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    number = 0
    for partition, count in enumerate(COUNTS):
        for index in range(count):
            producer.produce(TOPIC, value(partition, index).encode(), f"k{index}".encode(),
                             partition=partition, on_delivery=report(number))  # fmt: skip
            number += 1
    producer.flush(TIMEOUT)
    RECORDING["produced"] = [delivered.get(i) for i in range(number)]
    # Auto-creation off on the client's side (librdkafka's producer allows it by default): the
    # record fails once the topic's metadata has not appeared in propagation.max.ms.
    strict = Producer({"bootstrap.servers": BOOTSTRAP, "allow.auto.create.topics": False,
                       "topic.metadata.propagation.max.ms": 1000})  # fmt: skip
    strict.produce(f"{PREFIX}-auto", b"v", on_delivery=report(number))
    strict.flush(TIMEOUT)
    RECORDING["produce_unknown_topic"] = delivered.get(number)
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": f"{PREFIX}-watermarks"})
    try:
        RECORDING["watermarks"] = {
            str(p): list(consumer.get_watermark_offsets(TopicPartition(TOPIC, p), TIMEOUT))
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


class Member:
    def __init__(self, name: str) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": BOOTSTRAP, "group.id": GROUP, "client.id": f"{PREFIX}-{name}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
        })  # fmt: skip
        self.consumer.subscribe([TOPIC])
        self.read: dict[int, set[str]] = {}

    def poll(self) -> None:
        message = self.consumer.poll(0.1)
        if message is not None and message.error() is None:
            entry = f"{message.offset()}:{message.value().decode()}"
            self.read.setdefault(message.partition(), set()).add(entry)

    def owned(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())

    def state(self) -> dict[str, Any]:
        return {"assignment": self.owned()}

    def read_all(self) -> bool:
        positions = self.consumer.position(self.consumer.assignment())
        return all(tp.offset >= COUNTS[tp.partition] or (COUNTS[tp.partition] == 0)
                   for tp in positions)  # fmt: skip

    def read_owned(self) -> dict[str, list[str]]:
        return {str(p): sorted(self.read.get(p, ())) for p in self.owned()}

    def commit(self) -> None:
        owned = self.consumer.assignment()
        offsets = [TopicPartition(TOPIC, tp.partition, COUNTS[tp.partition]) for tp in owned]
        self.consumer.commit(offsets=offsets, asynchronous=False)


def poll_until(members: list[Member], condition: Any, what: str) -> None:
    wait_until(condition, what, lambda: [m.poll() for m in members])


def describe_group(admin: AdminClient, group: str) -> Any:
    (future,) = admin.describe_consumer_groups([group]).values()
    found = future.result(TIMEOUT)
    members = [
        {"client_id": m.client_id,
         "assignment": sorted(f"{tp.topic}:{tp.partition}" for tp in m.assignment.topic_partitions)}
        for m in sorted(found.members, key=lambda m: m.client_id)
    ]  # fmt: skip
    return {"state": found.state.name, "type": found.type.name, "assignor": found.partition_assignor,
            "simple": found.is_simple_consumer_group, "members": members}  # fmt: skip


def committed(admin: AdminClient, group: str) -> dict[str, int]:
    (future,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    found = future.result(TIMEOUT).topic_partitions
    return {
        f"{tp.topic}:{tp.partition}": tp.offset for tp in sorted(found, key=lambda tp: tp.partition)
    }


def commit_outside(offset: int) -> str:
    """A consumer of the group that is not a member (it assigns itself) commits."""
    outsider = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP,
                         "client.id": f"{PREFIX}-outsider", "enable.auto.commit": False})  # fmt: skip
    try:
        outsider.assign([TopicPartition(TOPIC, 0)])
        outsider.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        outsider.close()
    return "ok"


def groups(admin: AdminClient) -> None:
    first = Member("m1")
    try:
        poll_until([first], lambda: len(first.owned()) == PARTITIONS, "the first assignment")
        RECORDING["group_first_member"] = first.state()
        RECORDING["group_described_one"] = outcome(lambda: describe_group(admin, GROUP))
        second = Member("m2")
        try:
            both = [first, second]
            poll_until(both, lambda: len(first.owned()) == len(second.owned()) == 2, "two members")
            RECORDING["group_two_members"] = [first.state(), second.state()]
            poll_until(both, lambda: first.read_all() and second.read_all(), "every record read")
            RECORDING["group_read"] = [first.read_owned(), second.read_owned()]
            first.commit()
            second.commit()
            RECORDING["group_committed"] = outcome(lambda: committed(admin, GROUP))
            RECORDING["group_described_two"] = outcome(lambda: describe_group(admin, GROUP))
            RECORDING["commit_by_non_member"] = outcome(lambda: commit_outside(1))
        finally:
            second.consumer.close()
        poll_until([first], lambda: len(first.owned()) == PARTITIONS, "the rebalance after a leave")
        RECORDING["group_after_leave"] = first.state()
    finally:
        first.consumer.close()
    RECORDING["group_described_empty"] = outcome(lambda: describe_group(admin, GROUP))

    def alter() -> Any:
        request = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, 0, 2)])
        done(admin.alter_consumer_group_offsets([request]))
        return committed(admin, GROUP)

    RECORDING["group_offsets_altered"] = outcome(alter)

    def listed() -> Any:
        found = admin.list_consumer_groups().result(TIMEOUT).valid
        return sorted([g.group_id, g.type.name, g.state.name, g.is_simple_consumer_group]
                      for g in found if g.group_id.startswith(PREFIX))  # fmt: skip

    RECORDING["groups_listed"] = outcome(listed)
    RECORDING["describe_missing_group"] = outcome(
        lambda: describe_group(admin, f"{PREFIX}-nogroup")
    )
    RECORDING["committed_missing_group"] = outcome(lambda: committed(admin, f"{PREFIX}-nogroup"))


def main() -> None:
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    topics(admin)
    produce()
    groups(admin)
    settled(admin)
    emit(RECORDING)


if __name__ == "__main__":
    main()
