"""kafka-python plays the client recording (see ``recording.py``) against one cluster and prints
what it observed as one line of JSON: ``python kafka_python.py <bootstrap> <name prefix>``."""

from __future__ import annotations

import queue
import re
import threading
from concurrent.futures import Future
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition, errors
from kafka.structs import OffsetAndMetadata
from recording import (
    COUNTS,
    PARTITIONS,
    WAIT_SECONDS,
    arguments,
    emit,
    outcome,
    value,
    wait_settled,
    wait_until,
)

BOOTSTRAP, PREFIX = arguments()
TOPIC = f"{PREFIX}-a"
GROUP = f"{PREFIX}-g"
RECORDING: dict[str, Any] = {}


def ok(call: Any) -> Any:
    return lambda: (call(), "ok")[1]


def describe(admin: KafkaAdminClient, topic: str) -> Any:
    (found,) = admin.describe_topics([topic])
    if found["error_code"]:
        return {"error": errors.for_code(found["error_code"]).__name__}
    partitions = [
        {
            "partition": p["partition_index"],
            "replicas": len(p["replica_nodes"]),
            "isr": len(p["isr_nodes"]),
            "leader_is_replica": p["leader_id"] in p["replica_nodes"],
        }
        for p in sorted(found["partitions"], key=lambda p: p["partition_index"])
    ]
    operations = sorted(found["authorized_operations"] or ())
    return {
        "internal": found["is_internal"],
        "partitions": partitions,
        "authorized_operations": operations,
    }


def topics(admin: KafkaAdminClient) -> None:
    new = {TOPIC: {"num_partitions": 3, "replication_factor": 2}}
    RECORDING["create"] = outcome(ok(lambda: admin.create_topics(new)))
    RECORDING["create_existing"] = outcome(ok(lambda: admin.create_topics(new)))
    too_many = {f"{PREFIX}-rf": {"num_partitions": 1, "replication_factor": 4}}
    RECORDING["create_replication_above_brokers"] = outcome(
        ok(lambda: admin.create_topics(too_many))
    )
    RECORDING["partitions_decreased"] = outcome(ok(lambda: admin.create_partitions({TOPIC: 2})))
    RECORDING["partitions_increased"] = outcome(ok(lambda: admin.create_partitions({TOPIC: 4})))
    wait_settled(lambda: len(describe(admin, TOPIC)["partitions"]) == PARTITIONS, "4 partitions")
    RECORDING["describe_missing"] = outcome(lambda: describe(admin, f"{PREFIX}-unknown"))
    RECORDING["delete_missing"] = outcome(ok(lambda: admin.delete_topics([f"{PREFIX}-missing"])))


def settled(admin: KafkaAdminClient) -> None:
    """At the end, when every broker has long known the topic: the topics listed and the topic
    described."""
    RECORDING["list"] = sorted(t for t in admin.list_topics() if t.startswith(PREFIX))
    RECORDING["describe"] = outcome(lambda: describe(admin, TOPIC))


def produce() -> None:
    producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all")
    produced = []
    for partition, count in enumerate(COUNTS):
        for index in range(count):
            future = producer.send(TOPIC, key=f"k{index}".encode(),
                                   value=value(partition, index).encode(), partition=partition)  # fmt: skip
            produced.append(outcome(lambda f=future: [f.get(30).partition, f.get(30).offset]))
    RECORDING["produced"] = produced
    producer.close()
    # With auto-creation off on the client's side, the brokers are not asked to create it.
    strict = KafkaProducer(bootstrap_servers=BOOTSTRAP, allow_auto_create_topics=False,
                           max_block_ms=3000)  # fmt: skip
    RECORDING["produce_unknown_topic"] = outcome(
        lambda: [strict.send(f"{PREFIX}-auto", b"v").get(30).partition, 0]
    )
    strict.close()
    consumer = KafkaConsumer(bootstrap_servers=BOOTSTRAP)
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    low, high = consumer.beginning_offsets(partitions), consumer.end_offsets(partitions)
    RECORDING["watermarks"] = {str(tp.partition): [low[tp], high[tp]] for tp in partitions}
    consumer.close()


class Member:
    """A group member whose consumer polls in a thread of its own, as a program with two
    consumers does (kafka-python's consumers polled in turn by one thread, 100 ms each, were seen
    rebalancing without end on a loaded machine); everything else runs in that thread too, between
    two polls (:meth:`call`)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.read: dict[int, set[str]] = {}
        self._calls: queue.Queue[tuple[Any, Future[Any]]] = queue.Queue()
        self._closed = threading.Event()
        started: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self._thread.start()
        started.result()

    def _run(self, started: Future[None]) -> None:
        try:
            self.consumer = KafkaConsumer(
                bootstrap_servers=BOOTSTRAP, group_id=GROUP, client_id=f"{PREFIX}-{self.name}",
                auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=30000,
                heartbeat_interval_ms=500,
            )  # fmt: skip
            # The topic's metadata first: a member that joins before it knows the topic's
            # partitions rejoins once it learns them.
            wait_until(lambda: self.consumer.partitions_for_topic(TOPIC) == set(range(PARTITIONS)),
                       f"{self.name}'s metadata of {TOPIC}")  # fmt: skip
            self.consumer.subscribe([TOPIC])
        except Exception as exc:
            started.set_exception(exc)
            return
        started.set_result(None)
        while not self._closed.is_set():
            while not self._calls.empty():
                call, result = self._calls.get()
                try:
                    result.set_result(call())
                except Exception as exc:
                    result.set_exception(exc)
            if not self._closed.is_set():
                for records in self.consumer.poll(timeout_ms=200).values():
                    for r in records:
                        self.read.setdefault(r.partition, set()).add(
                            f"{r.offset}:{r.value.decode()}"
                        )

    def call(self, function: Any) -> Any:
        """``function()`` run by the member's thread, between two polls."""
        result: Future[Any] = Future()
        self._calls.put((function, result))
        return result.result(WAIT_SECONDS)

    def close(self) -> None:
        self.call(lambda: (self.consumer.close(), self._closed.set()))
        self._thread.join(WAIT_SECONDS)

    def __repr__(self) -> str:
        return f"{self.name}: {self.call(self.consumer.group_metadata)} owning {self.owned()}"

    def owned(self) -> list[int]:
        return sorted(self.call(lambda: [tp.partition for tp in self.consumer.assignment()]))

    def generation(self) -> int:
        return int(self.call(self.consumer.group_metadata).generation_id)

    def state(self) -> dict[str, Any]:
        return {"generation": self.generation(), "assignment": self.owned()}

    def read_all(self) -> bool:
        return bool(self.call(lambda: all(self.consumer.position(tp) >= COUNTS[tp.partition]
                                          for tp in self.consumer.assignment())))  # fmt: skip

    def read_owned(self) -> dict[str, list[str]]:
        owned = self.owned()
        return self.call(lambda: {str(p): sorted(self.read.get(p, ())) for p in owned})

    def commit(self) -> bool:
        """Commit what it read; ``False`` when a rebalance came in between (then again)."""

        def commit() -> bool:
            try:
                self.consumer.commit()
            except (errors.RebalanceInProgressError, errors.CommitFailedError):
                return False
            return True

        return bool(self.call(commit))


def commit_all(members: list[Member]) -> None:
    """Each member commits what it read; a rebalance the client started meanwhile is completed
    by its polls, and the commit made again."""
    pending = list(members)

    def committed() -> bool:
        pending[:] = [member for member in pending if not member.commit()]
        return not pending

    poll_until(members, committed, "the members' commits")


def poll_until(members: list[Member], condition: Any, what: str) -> None:
    """Wait, while the members poll, until ``condition`` holds."""
    try:
        wait_until(condition, what)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; the members: {members}") from None


def describe_group(admin: KafkaAdminClient, group: str) -> Any:
    found = admin.describe_groups([group])[group]
    if found["error"]:
        return {"error": re.search(r"\] (\w+)", found["error"]).group(1)}
    members = []
    for member in sorted(found["members"], key=lambda m: m["client_id"]):
        assignment = member["member_assignment"]
        owned = [f"{t['topic']}:{p}" for t in (assignment or {}).get("assigned_partitions", ())
                 for p in t["partitions"]]  # fmt: skip
        members.append({"client_id": member["client_id"], "assignment": sorted(owned)})
    return {"state": found["group_state"], "protocol_type": found["protocol_type"],
            "assignor": found["protocol_data"], "members": members,
            # kafka-python asks for them (DescribeGroups v3+): Kafka without an authorizer
            # allows every operation a group has.
            "authorized_operations": sorted(found["authorized_operations"] or ())}  # fmt: skip


def committed(admin: KafkaAdminClient, group: str) -> dict[str, int]:
    offsets = admin.list_group_offsets(group)[group]
    return {f"{tp.topic}:{tp.partition}": o.offset for tp, o in sorted(offsets.items())}


def groups(admin: KafkaAdminClient) -> None:
    first = Member("m1")
    try:
        poll_until([first], lambda: len(first.owned()) == PARTITIONS, "the first assignment")
        RECORDING["group_first_member"] = first.state()
        RECORDING["group_described_one"] = outcome(lambda: describe_group(admin, GROUP))
        second = Member("m2")
        try:
            both = [first, second]
            poll_until(both, lambda: len(first.owned()) == len(second.owned()) == 2
                       and first.generation() == second.generation(), "two members")  # fmt: skip
            RECORDING["group_two_members"] = [first.state(), second.state()]
            poll_until(both, lambda: first.read_all() and second.read_all(), "every record read")
            RECORDING["group_read"] = [first.read_owned(), second.read_owned()]
            commit_all(both)
            RECORDING["group_committed"] = outcome(lambda: committed(admin, GROUP))
            RECORDING["group_described_two"] = outcome(lambda: describe_group(admin, GROUP))
            RECORDING["commit_by_non_member"] = outcome(ok(commit_by_non_member))
        finally:
            second.close()
        poll_until([first], lambda: len(first.owned()) == PARTITIONS, "the rebalance after a leave")
        RECORDING["group_after_leave"] = first.state()
    finally:
        first.close()
    RECORDING["group_described_empty"] = outcome(lambda: describe_group(admin, GROUP))

    def alter() -> Any:
        failed = admin.alter_group_offsets(
            GROUP, {TopicPartition(TOPIC, 0): OffsetAndMetadata(2, "", -1)}
        )
        assert all(e is errors.NoError for e in failed.values()), failed
        return committed(admin, GROUP)

    RECORDING["group_offsets_altered"] = outcome(alter)
    RECORDING["groups_listed"] = outcome(lambda: sorted(
        [g["group_id"], g["protocol_type"], g.get("group_type"), g.get("group_state")]
        for g in admin.list_groups() if g["group_id"].startswith(PREFIX)
    ))  # fmt: skip
    RECORDING["describe_missing_group"] = outcome(
        lambda: describe_group(admin, f"{PREFIX}-nogroup")
    )
    RECORDING["committed_missing_group"] = outcome(lambda: committed(admin, f"{PREFIX}-nogroup"))


def commit_by_non_member() -> None:
    outsider = KafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=GROUP, client_id=f"{PREFIX}-outsider",
                             enable_auto_commit=False)  # fmt: skip
    try:
        tp = TopicPartition(TOPIC, 0)
        outsider.assign([tp])
        outsider.commit({tp: OffsetAndMetadata(1, "", -1)})
    finally:
        outsider.close()


def main() -> None:
    admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    try:
        topics(admin)
        produce()
        groups(admin)
        settled(admin)
    finally:
        admin.close()
    emit(RECORDING)


if __name__ == "__main__":
    main()
