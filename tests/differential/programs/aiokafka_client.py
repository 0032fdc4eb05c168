"""aiokafka plays the client recording (see ``recording.py``) against one cluster and prints what
it observed as one line of JSON: ``python aiokafka_client.py <bootstrap> <name prefix>``.

aiokafka's admin client hands back the brokers' responses: an error code in one is raised as
aiokafka's exception of that code, as its other calls raise them."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import CommitFailedError, KafkaError, RebalanceInProgressError, for_code
from aiokafka.structs import OffsetAndMetadata
from recording import COUNTS, PARTITIONS, SETTLED, WAIT_SECONDS, arguments, emit, error_name, value

BOOTSTRAP, PREFIX = arguments()
TOPIC = f"{PREFIX}-a"
GROUP = f"{PREFIX}-g"
RECORDING: dict[str, Any] = {}


async def outcome(call: Any) -> Any:
    """What ``call`` returned, or the name of the exception it raised."""
    try:
        return await call
    except Exception as exc:
        return error_name(exc)


def first_error(found: Any) -> int:
    """The first non-zero ``error_code`` anywhere in a response's fields."""
    if isinstance(found, dict):
        if found.get("error_code"):
            return int(found["error_code"])
        found = list(found.values())
    if isinstance(found, list | tuple):
        for item in found:
            code = first_error(item)
            if code:
                return code
    return 0


async def ok(call: Any) -> str:
    response = await call
    code = first_error(response.to_object()) if hasattr(response, "to_object") else 0
    if code:
        raise for_code(code)()
    return "ok"


async def describe(admin: AIOKafkaAdminClient, topic: str) -> Any:
    (found,) = await admin.describe_topics([topic])
    if found["error_code"]:
        raise for_code(found["error_code"])()
    partitions = [
        {"partition": p["partition"], "replicas": len(p["replicas"]), "isr": len(p["isr"]),
         "leader_is_replica": p["leader"] in p["replicas"]}
        for p in sorted(found["partitions"], key=lambda p: p["partition"])
    ]  # fmt: skip
    return {"internal": found["is_internal"], "partitions": partitions}


async def wait_until(condition: Any, what: str) -> None:
    async def loop() -> None:
        while not await condition():
            await asyncio.sleep(0.05)

    try:
        await asyncio.wait_for(loop(), WAIT_SECONDS)
    except TimeoutError:
        raise TimeoutError(f"gave up waiting for {what}") from None


async def topics(admin: AIOKafkaAdminClient) -> None:
    new = [NewTopic(TOPIC, 3, 2)]
    RECORDING["create"] = await outcome(ok(admin.create_topics(new)))
    RECORDING["create_existing"] = await outcome(ok(admin.create_topics(new)))
    too_many = [NewTopic(f"{PREFIX}-rf", 1, 4)]
    RECORDING["create_replication_above_brokers"] = await outcome(ok(admin.create_topics(too_many)))
    RECORDING["partitions_decreased"] = await outcome(
        ok(admin.create_partitions({TOPIC: NewPartitions(2)}))
    )
    RECORDING["partitions_increased"] = await outcome(
        ok(admin.create_partitions({TOPIC: NewPartitions(4)}))
    )

    streak = [0]

    async def settled() -> bool:  # as recording.wait_settled, a client's error as "not yet"
        try:
            grown = len((await describe(admin, TOPIC))["partitions"]) == PARTITIONS
        except KafkaError:
            grown = False
        streak[0] = streak[0] + 1 if grown else 0
        return streak[0] >= SETTLED

    await wait_until(settled, "4 partitions")
    RECORDING["describe_missing"] = await outcome(describe(admin, f"{PREFIX}-unknown"))
    RECORDING["delete_missing"] = await outcome(ok(admin.delete_topics([f"{PREFIX}-missing"])))


async def settled(admin: AIOKafkaAdminClient) -> None:
    """At the end, when every broker has long known the topic: the topics listed and the topic
    described."""
    RECORDING["list"] = sorted(t for t in await admin.list_topics() if t.startswith(PREFIX))
    RECORDING["describe"] = await outcome(describe(admin, TOPIC))


async def produce() -> None:
    producer = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all")
    await producer.start()
    try:
        produced = []
        for partition, count in enumerate(COUNTS):
            for index in range(count):
                sent = producer.send_and_wait(TOPIC, value(partition, index).encode(),
                                              key=f"k{index}".encode(), partition=partition)  # fmt: skip
                produced.append(await outcome(as_position(sent)))
        RECORDING["produced"] = produced
        # aiokafka's metadata requests let the brokers create a topic (auto-creation is on).
        sent = producer.send_and_wait(f"{PREFIX}-auto", b"v")
        RECORDING["produce_unknown_topic"] = await outcome(as_position(sent))
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=BOOTSTRAP)
    await consumer.start()
    try:
        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        low = await consumer.beginning_offsets(partitions)
        high = await consumer.end_offsets(partitions)
        RECORDING["watermarks"] = {str(tp.partition): [low[tp], high[tp]] for tp in partitions}
    finally:
        await consumer.stop()


async def as_position(sent: Any) -> list[int]:
    metadata = await sent
    return [metadata.partition, metadata.offset]


class Member:
    def __init__(self, name: str) -> None:
        self.consumer = AIOKafkaConsumer(
            TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP, client_id=f"{PREFIX}-{name}",
            auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=10000,
            heartbeat_interval_ms=500,
        )  # fmt: skip
        self.read: dict[int, set[str]] = {}

    async def poll(self) -> None:
        for records in (await self.consumer.getmany(timeout_ms=100)).values():
            for r in records:
                self.read.setdefault(r.partition, set()).add(f"{r.offset}:{r.value.decode()}")

    def owned(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())

    def generation(self) -> int:
        return int(self.consumer._coordinator.generation)  # aiokafka has no public accessor

    def state(self) -> dict[str, Any]:
        return {"generation": self.generation(), "assignment": self.owned()}

    async def read_all(self) -> bool:
        for tp in self.consumer.assignment():
            if await self.consumer.position(tp) < COUNTS[tp.partition]:
                return False
        return True

    def read_owned(self) -> dict[str, list[str]]:
        return {str(p): sorted(self.read.get(p, ())) for p in self.owned()}


async def poll_until(members: list[Member], condition: Any, what: str) -> None:
    async def polled() -> bool:
        await asyncio.gather(*(m.poll() for m in members))
        return bool(await condition())

    await wait_until(polled, what)


async def describe_group(admin: AIOKafkaAdminClient, group: str) -> Any:
    (response,) = await admin.describe_consumer_groups([group])
    (found,) = response.to_object()["groups"]
    if found["error_code"]:
        raise for_code(found["error_code"])()
    members = []
    for member in sorted(found["members"], key=lambda m: m["client_id"]):
        raw = member["member_assignment"]
        assignment = ConsumerProtocolMemberAssignment.decode(raw).partitions() if raw else []
        members.append({"client_id": member["client_id"],
                        "assignment": sorted(f"{tp.topic}:{tp.partition}" for tp in assignment)})  # fmt: skip
    return {"state": found["state"], "protocol_type": found["protocol_type"],
            "assignor": found["protocol"], "members": members}  # fmt: skip


async def committed(admin: AIOKafkaAdminClient, group: str) -> dict[str, int]:
    offsets = await admin.list_consumer_group_offsets(group)
    return {f"{tp.topic}:{tp.partition}": o.offset for tp, o in sorted(offsets.items())}


async def commit_all(members: list[Member]) -> None:
    """Each member commits what it read; a rebalance meanwhile is completed by polling, and the
    commit made again."""
    pending = list(members)

    async def commit() -> bool:
        for member in list(pending):
            try:
                await member.consumer.commit()
                pending.remove(member)
            except (RebalanceInProgressError, CommitFailedError):
                pass
        return not pending

    await poll_until(members, commit, "the members' commits")


async def commit_outside(offset: int) -> str:
    """A consumer of the group that is not a member (it assigns itself) commits."""
    outsider = AIOKafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=GROUP,
                                client_id=f"{PREFIX}-outsider", enable_auto_commit=False)  # fmt: skip
    await outsider.start()
    try:
        tp = TopicPartition(TOPIC, 0)
        outsider.assign([tp])
        await outsider.commit({tp: OffsetAndMetadata(offset, "")})
    finally:
        await outsider.stop()
    return "ok"


async def groups(admin: AIOKafkaAdminClient) -> None:
    first = Member("m1")
    await first.consumer.start()
    try:
        await poll_until(
            [first], _true(lambda: len(first.owned()) == PARTITIONS), "the first assignment"
        )
        RECORDING["group_first_member"] = first.state()
        RECORDING["group_described_one"] = await outcome(describe_group(admin, GROUP))
        second = Member("m2")
        await second.consumer.start()
        try:
            both = [first, second]
            two = _true(lambda: len(first.owned()) == len(second.owned()) == 2
                        and first.generation() == second.generation())  # fmt: skip
            await poll_until(both, two, "two members")
            RECORDING["group_two_members"] = [first.state(), second.state()]

            async def read_all() -> bool:
                return await first.read_all() and await second.read_all()

            await poll_until(both, read_all, "every record read")
            RECORDING["group_read"] = [first.read_owned(), second.read_owned()]
            await commit_all(both)
            RECORDING["group_committed"] = await outcome(committed(admin, GROUP))
            RECORDING["group_described_two"] = await outcome(describe_group(admin, GROUP))
            RECORDING["commit_by_non_member"] = await outcome(commit_outside(1))
        finally:
            await second.consumer.stop()
        await poll_until(
            [first], _true(lambda: len(first.owned()) == PARTITIONS), "the rebalance after a leave"
        )
        RECORDING["group_after_leave"] = first.state()
    finally:
        await first.consumer.stop()
    RECORDING["group_described_empty"] = await outcome(describe_group(admin, GROUP))

    async def alter() -> Any:
        # aiokafka's admin client cannot alter offsets: a commit of no member does.
        await commit_outside(2)
        return await committed(admin, GROUP)

    RECORDING["group_offsets_altered"] = await outcome(alter())
    listed = await admin.list_consumer_groups()
    RECORDING["groups_listed"] = sorted(list(g) for g in listed if g[0].startswith(PREFIX))
    RECORDING["describe_missing_group"] = await outcome(describe_group(admin, f"{PREFIX}-nogroup"))
    RECORDING["committed_missing_group"] = await outcome(committed(admin, f"{PREFIX}-nogroup"))


def _true(condition: Any) -> Any:
    async def check() -> bool:
        return bool(condition())

    return check


async def main() -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    await admin.start()
    try:
        await topics(admin)
        await produce()
        await groups(admin)
        await settled(admin)
    finally:
        await admin.close()
    emit(RECORDING)


if __name__ == "__main__":
    asyncio.run(main())
