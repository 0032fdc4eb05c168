"""What runs throughout a process-chaos schedule, and what it observes:

* :class:`Producer` — kafka-python, ``acks=all``, idempotent; every record a unique value, sent to
  partition ``seq % PARTITIONS``; the acknowledged ``(partition, offset)`` of each value kept;
* :class:`GroupConsumer` — a consumer group member (kafka-python), committing after every poll;
  what it read at each offset kept;
* :class:`Watcher` — every ~0.3 s: each partition's high watermark as its current leader serves it
  (Metadata from every process, the highest leader epoch's leader asked by ListOffsets LATEST with
  that epoch as ``current_leader_epoch``, so a deposed leader answers FENCED/UNKNOWN_LEADER_EPOCH
  rather than a stale value, as Kafka's clients ask); and every replica's log segments on disk,
  each batch's ``(partition leader epoch, offsets, CRC)``.

Both :class:`Watcher` observations feed the checks: the high watermark never goes back, and no
two different batches ever sat at overlapping offsets in one leader epoch (two brokers accepting
writes for one partition in one epoch would put them there; the batch's CRC covers its records,
not its offsets or epoch, so the same batch copied by a follower matches).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

from coordkit.protocol import messages
from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.records import iter_batches
from serve.conftest import RawClient

TOPIC = "chaos"
PARTITIONS = 3
GROUP = "chaos-group"
#: Records the producer may have in flight (unacknowledged) at once.
IN_FLIGHT = 50
#: Seconds between two sends.
SEND_EVERY = 0.01
#: Seconds a sampling call waits for a broker (a paused one never answers).
CALL_TIMEOUT = 2.0


def _value(seq: int) -> bytes:
    return b"r%d" % seq


class Producer(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="chaos-producer", daemon=True)
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=5_000,
            retry_backoff_ms=200,
            delivery_timeout_ms=120_000,
            max_in_flight_requests_per_connection=5,
        )
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: dict[bytes, str] = {}
        self.sent = 0
        self._slots = threading.Semaphore(IN_FLIGHT)
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        seq = 0
        while not self._halt.is_set():
            if not self._slots.acquire(timeout=0.2):
                continue
            value = _value(seq)
            try:
                future = self.producer.send(TOPIC, value=value, partition=seq % PARTITIONS)
            except KafkaError as exc:
                self._slots.release()
                self.failed[value] = f"send: {exc!r}"
            else:
                future.add_callback(self._acked, value)
                future.add_errback(self._failed, value)
            seq += 1
            self.sent = seq
            time.sleep(SEND_EVERY)

    def _acked(self, value: bytes, metadata: Any) -> None:
        with self._lock:
            self.acked[value] = (metadata.partition, metadata.offset)
        self._slots.release()

    def _failed(self, value: bytes, exc: BaseException) -> None:
        with self._lock:
            self.failed[value] = repr(exc)
        self._slots.release()

    def stop(self, timeout: float = 30.0) -> int:
        """Stop sending and wait up to ``timeout`` s for the answers of what is in flight; how
        many records are still unanswered then."""
        self._halt.set()
        self.join(30)
        with contextlib.suppress(KafkaError):
            self.producer.flush(timeout=max(timeout, 0.1))
        with self._lock:
            unanswered = self.sent - len(self.acked) - len(self.failed)
        with contextlib.suppress(KafkaError):
            self.producer.close(timeout=0 if unanswered else 5)
        return unanswered

    def last_acked(self) -> dict[int, int]:
        """The highest acknowledged offset of each partition."""
        with self._lock:
            found: dict[int, int] = {}
            for p, offset in self.acked.values():
                found[p] = max(found.get(p, -1), offset)
            return found


class GroupConsumer(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="chaos-consumer", daemon=True)
        self.consumer = KafkaConsumer(
            TOPIC,
            bootstrap_servers=bootstrap,
            group_id=GROUP,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=1_000,
            request_timeout_ms=15_000,
        )
        self.read: dict[tuple[int, int], bytes] = {}
        self.errors: list[str] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                batches = self.consumer.poll(timeout_ms=300)
                for tp, records in batches.items():
                    for record in records:
                        self.read[(tp.partition, record.offset)] = record.value
                if batches:
                    self.consumer.commit()
            except KafkaError as exc:  # commits fail while the group moves; the next one counts
                self.errors.append(repr(exc))
                time.sleep(0.2)

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        self.consumer.close(autocommit=False)


class Watcher(threading.Thread):
    """Samples high watermarks and the replicas' logs until stopped; see the module's doc."""

    def __init__(self, addresses: Callable[[], dict[int, str]], log_dirs: dict[int, Path]) -> None:
        super().__init__(name="chaos-watcher", daemon=True)
        self.addresses = addresses
        self.log_dirs = log_dirs
        #: partition -> (high watermark, leader epoch, leader) of the last sample.
        self.high_watermarks: dict[int, tuple[int, int, int]] = {}
        #: partition -> leader epoch -> base offset -> (last offset, crc, broker).
        self.batches: dict[int, dict[int, dict[int, tuple[int, int, int]]]] = {}
        self.problems: list[str] = []
        self.samples = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.3):
            self.sample()

    def sample(self) -> None:
        self._sample_high_watermarks()
        for broker, log_dir in self.log_dirs.items():
            for p in range(PARTITIONS):
                self._sample_log(broker, p, log_dir / f"{TOPIC}-{p}")
        self.samples += 1

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        self.sample()  # the last word: the healed cluster's

    # -- high watermarks
    def _sample_high_watermarks(self) -> None:
        leaders: dict[int, tuple[int, int]] = {}  # partition -> (epoch, leader)
        addresses = self.addresses()
        for address in addresses.values():
            with contextlib.suppress(OSError, ConnectionError, ProtocolError, IndexError):
                for p, epoch, leader in _leaders(address):
                    if leader >= 0 and epoch > leaders.get(p, (-1, -1))[0]:
                        leaders[p] = (epoch, leader)
        for p, (epoch, leader) in leaders.items():
            if leader not in addresses:
                continue
            with contextlib.suppress(OSError, ConnectionError, ProtocolError, IndexError):
                found = _latest(addresses[leader], p, epoch)
                if found is not None:
                    self._saw_high_watermark(p, found, epoch, leader)

    def _saw_high_watermark(self, p: int, high_watermark: int, epoch: int, leader: int) -> None:
        last = self.high_watermarks.get(p)
        if last is not None and high_watermark < last[0]:
            self.problems.append(
                f"{TOPIC}-{p}: the high watermark went back from {last[0]} (leader {last[2]}, "
                f"epoch {last[1]}) to {high_watermark} (leader {leader}, epoch {epoch})"
            )
        self.high_watermarks[p] = (high_watermark, epoch, leader)

    # -- logs on disk
    def _sample_log(self, broker: int, p: int, directory: Path) -> None:
        try:
            segments = sorted(directory.glob("*.log"))
        except OSError:
            return
        for segment in segments:
            try:
                data = segment.read_bytes()
            except OSError:  # deleted or renamed meanwhile (truncation, a stop)
                continue
            with contextlib.suppress(ProtocolError):  # a batch being written: the next sample
                for header, _raw in iter_batches(data, verify_crc=True, allow_partial_tail=True):
                    self._saw_batch(broker, p, header.partition_leader_epoch, header.base_offset,
                                    header.last_offset, header.crc)  # fmt: skip

    def _saw_batch(self, broker: int, p: int, epoch: int, base: int, last: int, crc: int) -> None:
        in_epoch = self.batches.setdefault(p, {}).setdefault(epoch, {})
        known = in_epoch.get(base)
        if known is not None and known[:2] == (last, crc):
            return
        for other_base, (other_last, other_crc, other_broker) in in_epoch.items():
            if other_base <= last and base <= other_last:
                self.problems.append(
                    f"{TOPIC}-{p} leader epoch {epoch}: two different batches at overlapping "
                    f"offsets: {base}-{last} (crc {crc:#010x}) in broker {broker}'s log, "
                    f"{other_base}-{other_last} (crc {other_crc:#010x}) in broker "
                    f"{other_broker}'s: two writers in one leader epoch"
                )
                return
        in_epoch[base] = (last, crc, broker)


def _call(address: str, request: Any, version: int) -> Any:
    client = RawClient(address)
    try:
        client.sock.settimeout(CALL_TIMEOUT)
        return client.call(request, version)
    finally:
        client.close()


def _leaders(address: str) -> list[tuple[int, int, int]]:
    """``(partition, leader epoch, leader)`` of each partition of the topic, as ``address``
    serves it."""
    request = messages.MetadataRequest(
        topics=[messages.MetadataRequest.MetadataRequestTopic(name=TOPIC)],
        allow_auto_topic_creation=False,
    )
    (topic,) = _call(address, request, 12).topics
    if topic.error_code:
        return []
    return [(p.partition_index, p.leader_epoch, p.leader_id) for p in topic.partitions]


def _latest(address: str, p: int, epoch: int) -> int | None:
    """ListOffsets LATEST (the high watermark) of partition ``p`` at its leader in ``epoch``;
    ``None`` when the leader refuses (not the leader of that epoch, or not ready)."""
    ListOffsets = messages.ListOffsetsRequest
    request = ListOffsets(replica_id=-1, isolation_level=0, topics=[ListOffsets.ListOffsetsTopic(
        name=TOPIC, partitions=[ListOffsets.ListOffsetsPartition(
            partition_index=p, current_leader_epoch=epoch, timestamp=-1)])])  # fmt: skip
    found = _call(address, request, 7).topics[0].partitions[0]
    return None if found.error_code else int(found.offset)
