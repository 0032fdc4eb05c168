"""Record the request frames real clients send in their ordinary paths, for the protocol tests.

    python tests/data/frames/record.py            # writes tests/data/frames/<client>.json

Runs ``coordkit serve`` (one broker, memory store) in this process, wraps its dispatcher so every
request frame it is handed is kept as received, and drives librdkafka (confluent-kafka) and
kafka-python through what an application and an admin tool do: metadata for all topics and for
some, topics created (also ``validate_only``), partitions added, an idempotent producer, a
consumer group (plain and regex subscriptions) that reads, commits and leaves, the group listed
and described, offsets listed, topics deleted. ``tests/unit/test_recorded_frames.py`` decodes
every frame and encodes it again byte for byte. Run it again when a client version changes; the
files name the versions they came from.
"""

from __future__ import annotations

import asyncio
import json
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from coordkit.protocol import APIS_BY_KEY
from coordkit.serve import KafkaServer
from coordkit.serve.dispatch import Dispatcher

HERE = Path(__file__).parent
TOPIC = "frames"
#: Distinct frames kept per (scenario, api, version): enough for each shape a path sends (all
#: topics or some; first join or rejoin), few enough that records and member ids do not pile up.
KEEP_PER_KIND = 3


class Recorder:
    """Every request frame the server's dispatchers are handed, tagged with the scenario."""

    def __init__(self) -> None:
        self.scenario = "bootstrap"  # what a client sends before its first call
        self.frames: list[dict[str, Any]] = []
        self._seen: dict[tuple[str, str, int], set[bytes]] = {}
        self._lock = threading.Lock()

    def keep(self, frame: bytes) -> None:
        key, version = struct.unpack_from(">hh", frame, 0)
        api = APIS_BY_KEY.get(key)
        name = api.name if api is not None else f"api-{key}"
        # The correlation id (bytes 4-8) differs in every frame; alike otherwise, one is enough.
        shape = frame[:4] + frame[8:]
        with self._lock:
            seen = self._seen.setdefault((self.scenario, name, version), set())
            if shape in seen or len(seen) == KEEP_PER_KIND:
                return
            seen.add(shape)
            self.frames.append(
                {"scenario": self.scenario, "api": name, "version": version, "frame": frame.hex()}
            )


@contextmanager
def served(recorder: Recorder, store_url: str) -> Iterator[str]:
    original = Dispatcher.answer

    async def recording(self: Dispatcher, frame: bytes) -> bytes | None:
        recorder.keep(bytes(frame))
        return await original(self, frame)

    Dispatcher.answer = recording  # type: ignore[method-assign]
    server = KafkaServer(store_url, [0], port=0)
    server.start_brokers()
    ready = threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(ready.set)), daemon=True)
    thread.start()
    if not ready.wait(60):
        raise SystemExit("coordkit serve did not start")
    try:
        yield str(server.addresses[0])
    finally:
        server.stop()
        thread.join(30)
        server.close()
        Dispatcher.answer = original  # type: ignore[method-assign]


def librdkafka(bootstrap: str, recorder: Recorder) -> dict[str, str]:
    import confluent_kafka
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    common = {"bootstrap.servers": bootstrap}
    admin = AdminClient(common)

    def step(name: str, action: Callable[[], object]) -> None:
        recorder.scenario = name
        action()

    step("metadata-all-topics", lambda: admin.list_topics(timeout=10))
    step("create-topics-validate-only", lambda: _wait(admin.create_topics(
        [NewTopic(TOPIC, 2, 1)], validate_only=True)))  # fmt: skip
    step("create-topics", lambda: _wait(admin.create_topics([NewTopic(TOPIC, 2, 1)])))
    step("create-partitions", lambda: _wait(admin.create_partitions([NewPartitions(TOPIC, 3)])))
    step("metadata-one-topic", lambda: admin.list_topics(TOPIC, timeout=10))

    def produce() -> None:
        producer = Producer({**common, "enable.idempotence": True, "linger.ms": 5})
        for i in range(30):
            producer.produce(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode())
        producer.flush(15)

    step("idempotent-producer", produce)

    def consume(subscription: str, group: str) -> None:
        consumer = Consumer({**common, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})  # fmt: skip
        consumer.subscribe([subscription])
        got = 0
        deadline = time.monotonic() + 30
        while got < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        consumer.commit(asynchronous=False)
        consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)
        consumer.close()
        if got < 30:
            raise SystemExit(f"librdkafka {subscription}: read {got} of 30 records")

    step("consumer-group", lambda: consume(TOPIC, "frames-group"))
    step("consumer-group-regex", lambda: consume(f"^{TOPIC[:3]}.*", "frames-regex"))
    step("list-groups", lambda: admin.list_consumer_groups().result(10))
    step("describe-groups", lambda: _wait(admin.describe_consumer_groups(["frames-group"])))
    step("list-group-offsets", lambda: _wait(admin.list_consumer_group_offsets(
        [confluent_kafka.ConsumerGroupTopicPartitions("frames-group")])))  # fmt: skip
    step("list-offsets", lambda: _wait(admin.list_offsets(
        {TopicPartition(TOPIC, 0): confluent_kafka.admin.OffsetSpec.latest()})))  # fmt: skip
    step("delete-topics", lambda: _wait(admin.delete_topics([TOPIC])))
    return {"confluent-kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0]}  # fmt: skip


def kafka_python(bootstrap: str, recorder: Recorder) -> dict[str, str]:
    import kafka
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewPartitions, NewTopic

    def step(name: str, action: Callable[[], object]) -> None:
        recorder.scenario = name
        action()

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    step("metadata-all-topics", admin.list_topics)
    step("create-topics-validate-only", lambda: admin.create_topics(
        [NewTopic(TOPIC, 2, 1)], validate_only=True))  # fmt: skip
    step("create-topics", lambda: admin.create_topics([NewTopic(TOPIC, 2, 1)]))
    step("create-partitions", lambda: admin.create_partitions({TOPIC: NewPartitions(3)}))
    step("metadata-one-topic", lambda: admin.describe_topics([TOPIC]))

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                 enable_idempotence=True)  # fmt: skip
        for i in range(30):
            producer.send(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode())
        producer.flush(15)
        producer.close()

    step("idempotent-producer", produce)

    def consume(group: str, **subscription: Any) -> None:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 consumer_timeout_ms=10_000)  # fmt: skip
        consumer.subscribe(**subscription)
        got = 0
        for _ in consumer:
            got += 1
            if got == 30:
                break
        consumer.commit()
        consumer.close()
        if got < 30:
            raise SystemExit(f"kafka-python {subscription}: read {got} of 30 records")

    step("consumer-group", lambda: consume("frames-group", topics=[TOPIC]))
    step("consumer-group-regex", lambda: consume("frames-regex", pattern=f"^{TOPIC[:3]}.*"))
    step("list-groups", admin.list_groups)
    step("describe-groups", lambda: admin.describe_groups(["frames-group"]))
    step("list-group-offsets", lambda: admin.list_group_offsets({"frames-group": None}))
    step("list-offsets", lambda: admin.list_partition_offsets({TopicPartition(TOPIC, 0): -1}))
    step("delete-topics", lambda: admin.delete_topics([TOPIC]))
    admin.close()
    return {"kafka-python": kafka.__version__}


def _wait(futures: Any) -> None:
    for future in futures.values() if isinstance(futures, dict) else [futures]:
        future.result(15)


CLIENTS = {"librdkafka": librdkafka, "kafka-python": kafka_python}


def main(names: list[str]) -> None:
    for name in names or list(CLIENTS):
        recorder = Recorder()
        with served(recorder, f"memory://frames-{name}") as bootstrap:
            versions = CLIENTS[name](bootstrap, recorder)
        path = HERE / f"{name}.json"
        path.write_text(
            json.dumps({"client": versions, "frames": recorder.frames}, indent=1) + "\n"
        )
        print(f"{path}: {len(recorder.frames)} frames from {versions}")


if __name__ == "__main__":
    main(sys.argv[1:])
