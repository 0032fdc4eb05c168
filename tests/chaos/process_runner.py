"""Runs a process-chaos schedule (:mod:`chaos.process_schedule`) on three fresh ``coordkit serve
--broker-id`` processes, heals, and checks what the workload saw.

The run: a fresh namespace on the backend's long-lived store server, three processes each with a
log directory and a TCP proxy of its own in front of the store, a topic of :data:`PARTITIONS`
partitions on all three (``min.insync.replicas=2``), then the producer, the consumer group and the
watcher (:mod:`chaos.workload`) running while the schedule's faults come and go. Then every fault
is undone, killed processes start again, and within :data:`HEAL_BOUND` seconds:

1. every process serves every partition with a leader and the full ISR;
2. the consumer group has read every partition up to its end.

Then the checks: (a) a fresh consumer (assign, from the beginning) reads every acknowledged record
exactly once, at the offset its acknowledgement gave, and no value twice (the producer is
idempotent); what the group read at an offset is what is there; (b) the high watermark never
went back; (c) no two different batches at overlapping offsets in one leader epoch, in any
replica's log at any sample.
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from chaos import process_schedule as ps
from chaos.processes import BROKERS, ProcessCluster
from chaos.runner import TOTALS, Outcome
from chaos.schedule import Schedule, Step
from chaos.workload import PARTITIONS, TOPIC, GroupConsumer, Producer, Watcher, _call
from coordkit.protocol import messages
from harness.faults import StoreFaults

#: Seconds, from the heal, within which killed processes are back, every partition has a leader
#: and its full ISR on every process, and the consumer group has read to the end (a killed
#: process waits for its old session to expire before it may register again).
HEAL_BOUND = float(os.environ.get("COORDKIT_CHAOS_PROCESS_BOUND", "60"))
#: Store session timeout of the processes (a SIGSTOP past it loses the session).
PROCESS_SESSION_TIMEOUT = 4.0
#: Seconds the workload runs before the first fault and after the heal.
WARM_UP = 1.0


@attrs.define
class ProcessOutcome(Outcome):
    def report(self) -> str:
        seed, backend = self.schedule.seed, self.schedule.backend
        replay = (
            f"COORDKIT_CHAOS_SEED={seed} pytest tests/chaos/test_process_chaos.py "
            f"-k {backend}-seed{seed}"
        )
        return "\n".join(
            [
                f"process chaos schedule seed={seed} on {backend} failed (replay: {replay})",
                *(f"PROBLEM: {p}" for p in self.problems),
                self.schedule.describe(),
                "what happened:",
                *(f"  {line}" for line in self.log),
            ]
        )


class ProcessChaosRun:
    def __init__(self, faults: StoreFaults, schedule: Schedule) -> None:
        self.faults = faults
        self.schedule = schedule
        self.outcome = ProcessOutcome(schedule)
        self.started = time.monotonic()
        self.cluster: ProcessCluster | None = None
        self.producer: Producer | None = None
        self.consumer: GroupConsumer | None = None
        self.watcher: Watcher | None = None

    def note(self, text: str) -> None:
        self.outcome.log.append(f"+{time.monotonic() - self.started:7.3f}s {text}")

    def fail(self, problem: str) -> None:
        self.note(f"PROBLEM: {problem}")
        self.outcome.problems.append(problem)

    def run(self) -> ProcessOutcome:
        url = self.faults.new_url()
        with tempfile.TemporaryDirectory(prefix="process-chaos-") as root:
            try:
                self._run(url, Path(root))
            except Exception as exc:  # reported with the schedule, not as a bare traceback
                self.fail(f"unexpected {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            finally:
                self._stop_workload()
                if self.cluster is not None:
                    if self.outcome.problems:
                        self.outcome.log.extend(self.cluster.output())
                    self.cluster.close()
                self.faults.heal()
                self.faults.release(url)
        return self.outcome

    def _run(self, url: str, root: Path) -> None:
        cluster = self.cluster = ProcessCluster(url, root).start()
        self.note(f"processes started: {cluster.addresses()} on {url}")
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
        try:
            admin.create_topics(
                [NewTopic(TOPIC, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})]
            )
        finally:
            admin.close()
        wrong = self._wait_converged(time.monotonic() + HEAL_BOUND)
        if wrong:
            self.fail(f"the new topic never had leaders and full ISRs: {wrong}")
            return
        self.watcher = Watcher(cluster.addresses, cluster.log_dirs())
        self.watcher.start()
        self.producer = Producer(cluster.bootstrap)
        self.producer.start()
        self.consumer = GroupConsumer(cluster.bootstrap)
        self.consumer.start()
        time.sleep(WARM_UP)
        self.note(f"workload running ({len(self.producer.acked)} records acknowledged)")
        for index, step in enumerate(self.schedule.steps):
            self._step(index, step)
        self._heal()
        self._check()

    def _step(self, index: int, step: Step) -> None:
        assert self.cluster is not None
        assert step.broker is not None
        began = time.monotonic()
        broker = self.cluster.brokers[step.broker]
        detail = ""
        if step.action == ps.KILL_PROCESS:
            broker.kill()
        elif step.action == ps.RESTART_PROCESS:
            detail = self.cluster.restart(step.broker, time.monotonic() + HEAL_BOUND)
        elif step.action == ps.PAUSE_PROCESS:
            broker.pause()
        elif step.action == ps.RESUME_PROCESS:
            broker.resume()
        elif step.action == ps.CUT_STORE:
            broker.cut_store()
        elif step.action == ps.RESTORE_STORE:
            broker.restore_store()
        elif step.action == ps.CUT_PEERS:
            assert step.peer is not None
            detail = self.cluster.cut_peers(step.broker, step.peer)
        elif step.action == ps.RESTORE_PEERS:
            assert step.peer is not None
            self.cluster.restore_peers(step.broker, step.peer)
        if step.action in ps.FAULT_ACTIONS:
            self.outcome.faults += 1
        acked = len(self.producer.acked) if self.producer else 0
        self.note(f"{index:2d}. {step} -> {detail or 'ok'} ({time.monotonic() - began:.2f}s; "
                  f"{acked} records acknowledged so far)")  # fmt: skip
        time.sleep(step.hold + step.pause_after)

    # -- heal
    def _heal(self) -> None:
        assert self.cluster is not None
        self.cluster.heal()
        self.faults.heal()
        healed = time.monotonic()
        deadline = healed + HEAL_BOUND
        for broker_id, broker in self.cluster.brokers.items():
            if not broker.running:
                self.note(f"heal: {self.cluster.restart(broker_id, deadline)}")
        wrong = self._wait_converged(deadline)
        if wrong:
            self.fail(f"not converged within {HEAL_BOUND:.0f}s of the heal: {wrong}")
            return
        self.note(f"heal: every partition led, ISRs full after {time.monotonic() - healed:.2f}s")
        time.sleep(WARM_UP)  # records acknowledged by the healed cluster too
        assert self.producer is not None
        assert self.consumer is not None
        unanswered = self.producer.stop(deadline - time.monotonic())
        self.note(
            f"producer stopped: {self.producer.sent} sent, {len(self.producer.acked)} "
            f"acknowledged, {len(self.producer.failed)} failed, {unanswered} unanswered; "
            f"last acknowledged offsets {self.producer.last_acked()}"
        )
        if unanswered:
            self.fail(
                f"{unanswered} records sent (acks=all) unanswered {HEAL_BOUND:.0f}s after the "
                f"heal, every partition led with its full ISR meanwhile; high watermarks "
                f"(offset, epoch, leader): {self.watcher.high_watermarks if self.watcher else '?'}"
            )
        ends = _end_offsets(self.cluster.bootstrap)
        while True:
            read = self.consumer.read
            behind = {p: end for p, end in ends.items() if end and (p, end - 1) not in read}
            if not behind:
                break
            if time.monotonic() > deadline:
                self.fail(f"the consumer group did not read to the end of {behind} within "
                          f"{HEAL_BOUND:.0f}s of the heal (errors: {self.consumer.errors[-3:]})")  # fmt: skip
                break
            time.sleep(0.2)
        self.outcome.heal_seconds = time.monotonic() - healed
        self.note(f"heal: done after {self.outcome.heal_seconds:.2f}s")

    def _wait_converged(self, deadline: float) -> str:
        """'' once every process serves every partition with a leader and the full ISR; what is
        still wrong at ``deadline`` otherwise."""
        assert self.cluster is not None
        while True:
            wrong = []
            for broker_id, address in self.cluster.addresses().items():
                try:
                    (topic,) = _metadata(address).topics
                except (OSError, ConnectionError, ValueError) as exc:
                    wrong.append(f"broker {broker_id} unreachable: {exc!r}")
                    continue
                states = {p.partition_index: (p.leader_id, sorted(p.isr_nodes))
                          for p in topic.partitions}  # fmt: skip
                bad = {p: s for p, s in states.items() if s[0] < 0 or s[1] != list(BROKERS)}
                if topic.error_code or len(states) != PARTITIONS or bad:
                    wrong.append(f"broker {broker_id} serves {states} (error {topic.error_code})")
            if not wrong or time.monotonic() > deadline:
                return "; ".join(wrong)
            time.sleep(0.2)

    # -- checks
    def _check(self) -> None:
        assert self.cluster is not None
        assert self.producer is not None
        assert self.consumer is not None
        assert self.watcher is not None
        self.consumer.stop()
        self.watcher.stop()
        self.note(f"watcher: {self.watcher.samples} samples, high watermarks "
                  f"{self.watcher.high_watermarks}")  # fmt: skip
        epochs = {p: sorted(by_epoch) for p, by_epoch in sorted(self.watcher.batches.items())}
        self.note(f"watcher: leader epochs of the batches in the replicas' logs: {epochs}")
        for problem in self.watcher.problems:
            self.fail(problem)
        ends = _end_offsets(self.cluster.bootstrap)
        log = _read_everything(self.cluster.bootstrap, ends)
        self.note(f"fresh consumer read {len(log)} records (end offsets {ends})")
        short = {p: end for p, end in ends.items() if end and (p, end - 1) not in log}
        if short:
            self.fail(f"a fresh consumer could not read to the end offsets of {short}")
        acked = self.producer.acked
        if not acked:
            self.fail("no record was acknowledged: the run proves nothing")
        wrong = [(v, at, log.get(at)) for v, at in sorted(acked.items()) if log.get(at) != v]
        if wrong:
            self.fail(f"{len(wrong)} acknowledged records not at their offset (value, "
                      f"(partition, offset), found there): {wrong[:10]}")  # fmt: skip
        twice = [v for v, n in Counter(log.values()).items() if n > 1]
        if twice:
            self.fail(f"{len(twice)} values written more than once: {sorted(twice)[:10]}")
        unlike = [(at, v, log.get(at)) for at, v in self.consumer.read.items() if log.get(at) != v]
        if unlike:
            self.fail(f"{len(unlike)} records the group read are not in the log at their offset "
                      f"((partition, offset), read, there now): {sorted(unlike)[:10]}")  # fmt: skip

    def _stop_workload(self) -> None:
        for part in (self.producer, self.consumer, self.watcher):
            if part is not None and part.is_alive():
                try:
                    part.stop()
                except Exception as exc:  # the report matters more than a clean stop
                    self.note(f"stopping {part.name}: {exc!r}")


def _metadata(address: str) -> Any:
    request = messages.MetadataRequest(
        topics=[messages.MetadataRequest.MetadataRequestTopic(name=TOPIC)],
        allow_auto_topic_creation=False,
    )
    return _call(address, request, 12)


def _end_offsets(bootstrap: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        return {tp.partition: end for tp, end in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


def _read_everything(bootstrap: str, ends: dict[int, int]) -> dict[tuple[int, int], bytes]:
    """Every record of the topic, by ``(partition, offset)``, read from the beginning to
    ``ends`` (or until nothing comes for 10 s)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=10_000)  # fmt: skip
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        log: dict[tuple[int, int], bytes] = {}
        for record in consumer:
            log[(record.partition, record.offset)] = record.value
            if all(consumer.position(tp) >= ends[tp.partition] for tp in tps):
                break
        return log
    finally:
        consumer.close()


def run_process_schedule(faults: StoreFaults, schedule: Schedule) -> ProcessOutcome:
    outcome = ProcessChaosRun(faults, schedule).run()
    # The summary's slowest heals, apart from the in-process schedules' on the same store.
    named = attrs.evolve(schedule, backend=f"{schedule.backend} processes")
    TOTALS.add(attrs.evolve(outcome, schedule=named))
    return outcome
