"""Failover, on three broker processes a side (see :mod:`vs_kafka.clusters`):

* ``leader killed`` — a topic of 6 partitions (replication factor 3) takes records from a
  librdkafka producer (acks=all) on the partitions one broker leads, every 10 ms each; that broker
  (never the controller, so that this case is only a leader's failover) is SIGKILLed. Seconds from
  the kill until the first record produced after it is acknowledged (``first ack s``) and until one
  is on every partition it led (``all acked s``); and, the client left out, until a live broker's
  Metadata names another leader for every one of them (``leaders moved s``: the cluster's own
  failover; the rest is the client's, librdkafka looking again once a second for a leader it
  lost). The same records go from a kafka-python producer at the same time (``kafka-python
  first ack s``): it asks again as soon as a connection fails. The broker is started again
  afterwards. librdkafka looks again on a timer of its own
  (once a second from the producer's start), so one kill measures where in that second the
  cluster finished as much as the cluster: :func:`leader_killed_runs` kills ``--failover-runs``
  times, each after a random pause (seeded by ``--seed``) of up to a second, a new topic each
  time, and reports the median and the worst of each figure, and the share of runs whose first
  acknowledgement came within ``TARGET_S`` (issue #34's target).
* ``controller killed`` — the controller's broker (coordkit: the one its Metadata names, elected
  through the store; Kafka: the leader of the KRaft metadata quorum, the active controller, whose
  node is also a broker) is SIGKILLed while an admin client asks the live brokers to create a new
  topic (1 partition, replication factor 2: the live brokers) every 0.2 s, each attempt from an
  admin client of its own. Seconds from the kill
  until the first creation is acknowledged (``created s``) and until that topic has a leader
  (``online s``).

Both include noticing the death: the store session on coordkit, on Kafka the broker session and the
quorum's fetch timeout, all set to ``--failure-timeout`` (printed with the figures).
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from vs_kafka.clusters import BrokerProcesses, bootstrap_of, create_topic, leaders

FAILOVER_PARTITIONS = 6
#: The Metadata version the leaders are asked with (leader epochs, no topic ids needed).
METADATA_VERSION = 9
#: Seconds a failover may take before its figure is reported as nan.
FAILOVER_TIMEOUT = 120.0
PRODUCE_EVERY = 0.01
CREATE_EVERY = 0.2
#: Seconds one creation attempt may take (attempts overlap: one starts every CREATE_EVERY).
CREATE_TIMEOUT = 3.0
#: Issue #34's target for the first acknowledgement after a leader's process is killed.
TARGET_S = 2.0
#: The longest random pause before a kill: librdkafka's topic scan runs once a second.
PHASE_S = 1.0
Figures = dict[str, float]
#: librdkafka logs nothing below critical: a killed broker refusing connections is expected.
QUIET = {"log_level": 2}


class PartitionProducer:
    """Records to ``partitions`` of ``topic`` every PRODUCE_EVERY each, in a thread of its own,
    from librdkafka (confluent-kafka); for each partition, when the first record produced at or
    after a moment was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int]) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.acked: list[tuple[int, float, float]] = []  # (partition, produced, acknowledged)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0,
                             "message.timeout.ms": int(FAILOVER_TIMEOUT * 1000), **QUIET})  # fmt: skip

        def delivered(error: Any, message: Any, produced: float) -> None:
            if error is None:
                self.acked.append((message.partition(), produced, time.perf_counter()))

        while not self.stop.is_set():
            for partition in self.partitions:
                produced = time.perf_counter()
                producer.produce(self.topic, value=b"x" * 100, partition=partition,
                                 on_delivery=lambda e, m, p=produced: delivered(e, m, p))  # type: ignore[misc]  # fmt: skip
            producer.poll(PRODUCE_EVERY)
        producer.flush(5)

    def first_acks(self, since: float) -> dict[int, float]:
        """Partition → when its first record produced at or after ``since`` was acknowledged."""
        first: dict[int, float] = {}
        for partition, produced, acknowledged in list(self.acked):
            if produced >= since:
                first[partition] = min(first.get(partition, acknowledged), acknowledged)
        return first

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)


class KafkaPythonPartitionProducer(PartitionProducer):
    """The same records from kafka-python's producer, which asks for metadata again as soon as
    a leader's connection fails (``retry_backoff_ms`` apart) where librdkafka waits for its
    once-a-second topic scan: with both on one kill, what the cluster did shows apart from
    when a client looks."""

    def _run(self) -> None:
        import logging

        from kafka import KafkaProducer

        logging.getLogger("kafka").setLevel(logging.CRITICAL)  # a dead broker is expected
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=0,
                                 retry_backoff_ms=50,
                                 delivery_timeout_ms=int(FAILOVER_TIMEOUT * 1000),
                                 request_timeout_ms=int(FAILOVER_TIMEOUT * 1000) - 1)  # fmt: skip

        def delivered(partition: int, produced: float) -> Callable[[Any], None]:
            return lambda _: self.acked.append((partition, produced, time.perf_counter()))

        while not self.stop.is_set():
            for partition in self.partitions:
                produced = time.perf_counter()
                future = producer.send(self.topic, value=b"x" * 100, partition=partition)
                future.add_callback(delivered(partition, produced))
            self.stop.wait(PRODUCE_EVERY)
        producer.close(5)


def _until(check: Callable[[], bool], started: float) -> float:
    """Seconds from ``started`` until ``check()`` holds (nan after FAILOVER_TIMEOUT)."""
    while time.perf_counter() - started < FAILOVER_TIMEOUT:
        if check():
            return time.perf_counter() - started
        time.sleep(0.01)
    return float("nan")


def leader_killed_runs(cluster: BrokerProcesses, runs: int, seed: int) -> Figures:
    """:func:`leader_killed` ``runs`` times, each on a topic of its own after a pause of up to
    PHASE_S drawn from ``seed``: the median and the worst of each figure, and the share of runs
    whose first acknowledgement came within TARGET_S."""
    pauses = random.Random(seed)
    each = [
        leader_killed(cluster, topic=f"failover-{run}", pause=pauses.uniform(0, PHASE_S))
        for run in range(runs)
    ]
    figures: Figures = {"runs": float(runs)}
    for name in ("leaders moved s", "first ack s", "all acked s", "kafka-python first ack s"):
        values = [f[name] for f in each]
        figures[name] = statistics.median(values)
        figures[f"{name} max"] = max(values)
    for name in ("first ack s", "kafka-python first ack s"):
        share = sum(f[name] <= TARGET_S for f in each) / runs
        figures[f"{name.removesuffix(' s')} <={TARGET_S:g}s"] = share
    return figures


def leader_killed(cluster: BrokerProcesses, topic: str = "failover", pause: float = 0.0) -> Figures:
    bootstrap = bootstrap_of(cluster)
    create_topic(bootstrap, topic, FAILOVER_PARTITIONS)
    controller = cluster.controller()
    led = leaders(bootstrap, topic)
    candidates = [b for b in cluster.live() if b != controller and b in led.values()]
    if not candidates:
        raise SystemExit(f"no broker but the controller {controller} leads a partition: {led}")
    victim = max(candidates, key=lambda b: sum(leader == b for leader in led.values()))
    its = sorted(p for p, leader in led.items() if leader == victim)
    producer = PartitionProducer(bootstrap, topic, its)
    other = KafkaPythonPartitionProducer(bootstrap, topic, its)
    try:
        warm = time.perf_counter()  # every partition takes records before the kill
        _until(lambda: all(len(p.first_acks(warm)) == len(its) for p in (producer, other)), warm)
        time.sleep(pause)
        survivor = cluster.address(next(b for b in cluster.live() if b != victim))
        killed = time.perf_counter()
        cluster.kill(victim)
        moved = _until(lambda: _led_elsewhere(survivor, topic, its, victim), killed)
        first, every = _acknowledged(producer, killed, len(its))
        other_first, _ = _acknowledged(other, killed, len(its))
    finally:
        producer.close()
        other.close()
    cluster.start(victim)
    return {"leaders moved s": moved, "first ack s": first, "all acked s": every,
            "kafka-python first ack s": other_first, "partitions": float(len(its))}  # fmt: skip


def _acknowledged(
    producer: PartitionProducer, killed: float, partitions: int
) -> tuple[float, float]:
    """Seconds from ``killed`` until ``producer``'s first record produced after it was
    acknowledged on any partition, and on every one of ``partitions``."""
    first = _until(lambda: bool(producer.first_acks(killed)), killed)
    every = _until(lambda: len(producer.first_acks(killed)) == partitions, killed)
    acks = producer.first_acks(killed)
    if acks:
        first = min(acks.values()) - killed
    if len(acks) == partitions:
        every = max(acks.values()) - killed
    return first, every


def _led_elsewhere(address: str, topic: str, partitions: list[int], victim: int) -> bool:
    """Whether broker ``address``'s Metadata answer names a leader other than ``victim`` for
    every one of ``partitions`` (asked afresh each time: no client's cache in between)."""
    import socket

    from coordkit.protocol import KafkaCodec, ProtocolError, messages

    codec = KafkaCodec()
    topic_request = messages.MetadataRequest.MetadataRequestTopic(name=topic)
    request = messages.MetadataRequest(topics=[topic_request], allow_auto_topic_creation=False)
    frame = codec.encode_request(request, version=METADATA_VERSION, correlation_id=1,
                                 client_id="vs-kafka-failover")  # fmt: skip
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2) as sock:
            sock.sendall(frame)
            answer = sock.makefile("rb")
            size = codec.frame_size(answer.read(4))
            _, body = codec.decode_response("Metadata", METADATA_VERSION, answer.read(size))
    except (OSError, EOFError, ProtocolError):
        return False
    found = {p.partition_index: p.leader_id for t in body.topics for p in t.partitions}
    return all(found.get(p, victim) not in (victim, -1) for p in partitions)


def controller_killed(cluster: BrokerProcesses) -> Figures:
    from confluent_kafka.admin import AdminClient, NewTopic

    controller = cluster.controller()
    killed = time.perf_counter()
    cluster.kill(controller)
    bootstrap = bootstrap_of(cluster)
    created: list[tuple[float, str]] = []
    clients: list[Any] = []

    def done(name: str) -> Callable[[Any], None]:
        def record(future: Any) -> None:
            if future.exception() is None:
                created.append((time.perf_counter(), name))

        return record

    attempt = 0
    while not created and time.perf_counter() - killed < FAILOVER_TIMEOUT:
        # A client of its own each time: librdkafka's admin client waits for the controller it
        # knows to come back up, never asking the brokers again who controls the cluster now.
        admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        clients.append(admin)
        name = f"after-controller-{attempt}"
        futures = admin.create_topics([NewTopic(name, 1, 2)], request_timeout=CREATE_TIMEOUT)
        futures[name].add_done_callback(done(name))
        attempt += 1
        time.sleep(CREATE_EVERY)
        del clients[: -int(CREATE_TIMEOUT / CREATE_EVERY) - 1]  # those whose attempt is over
    if not created:
        return {"created s": float("nan"), "online s": float("nan")}
    at, name = min(created)

    def online() -> bool:
        try:
            return all(leader >= 0 for leader in leaders(bootstrap, name).values())
        except Exception:  # not in the metadata yet
            return False

    return {"created s": at - killed, "online s": _until(online, killed)}


CASES = ("failover",)


def run(cluster: BrokerProcesses, case: Callable[[str, Callable[[], Figures]], None]) -> None:
    case("leader killed", lambda: leader_killed(cluster))
    case("controller killed", lambda: controller_killed(cluster))
