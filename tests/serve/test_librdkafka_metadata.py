"""librdkafka's first call: Metadata for all topics. librdkafka 2.16 pads that request (see
``tests/unit/test_recorded_frames.py``); Kafka reads past the padding, and ``coordkit serve`` must
too, or ``list_topics()``, admin tools and regex subscriptions see no cluster at all."""

from __future__ import annotations

import time

from coordkit.kafka import layout
from serve.conftest import ServeFactory
from serve.inprocess import InProcessFactory, in_process_fixture  # noqa: F401

WAIT_SECONDS = 30


def test_librdkafka_lists_brokers_and_topics(serve: ServeFactory) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    server = serve(brokers=3)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for future in admin.create_topics([NewTopic("listed", 2, 2)]).values():
        future.result(WAIT_SECONDS)

    metadata = admin.list_topics(timeout=WAIT_SECONDS)
    assert sorted(metadata.brokers) == sorted(server.addresses)
    assert sorted(metadata.topics["listed"].partitions) == [0, 1]
    assert metadata.cluster_id  # Kafka always names its cluster
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "lister"})
    try:
        assert "listed" in consumer.list_topics(timeout=WAIT_SECONDS).topics
    finally:
        consumer.close()


def test_a_regex_subscription_reads_every_matching_record(serve: ServeFactory) -> None:
    from confluent_kafka import Consumer, Producer

    server = serve("--config", "auto.create.topics.enable=true", brokers=1)
    producer = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(10):
        producer.produce("rx-orders", value=f"r{i}".encode())
    assert producer.flush(WAIT_SECONDS) == 0
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "rx",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe(["^rx-.*"])
    read = []
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while len(read) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append(message.value().decode())
    finally:
        consumer.close()
    assert sorted(read) == sorted(f"r{i}" for i in range(10))


def test_metadata_returns_the_ids_the_topic_nodes_hold(in_process: InProcessFactory) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient, NewTopic

    server = in_process(brokers=1)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for future in admin.create_topics([NewTopic("identified", 1, 1)]).values():
        future.result(WAIT_SECONDS)
    store = server.server.cluster.admin_store
    node = layout.TOPIC.decode(store.get(layout.topic_path("identified"))[0])
    described = admin.describe_topics(TopicCollection(["identified"]))["identified"]
    assert node.topic_id is not None
    # librdkafka prints an id in standard base64; Kafka's text form is URL-safe base64.
    shown = str(described.result(WAIT_SECONDS).topic_id)
    assert shown.replace("+", "-").replace("/", "_") == node.topic_id
    cluster_id = layout.CLUSTER_ID_VALUE.decode(store.get(layout.CLUSTER_ID)[0]).id
    assert admin.list_topics(timeout=WAIT_SECONDS).cluster_id == cluster_id
