"""End to end (issue #17): real clients nobody here wrote — kafka-python, aiokafka and librdkafka
through confluent-kafka (its default eager assignors, and its own client-side cooperative-sticky)
— each in a process of its own, against three brokers of ``coordkit serve`` on the store under
test, through one scenario:

1. a topic of 6 partitions, replication factor 3;
2. a producer (acks=all, keyed records) running throughout;
3. a group of three consumers splits the partitions, reads and commits (``coordkit group
   describe`` shows the group as stored);
4. one consumer is killed with SIGKILL: the two survivors own every partition and read on;
5. a broker that is not the group coordinator crashes: every partition gets another leader and
   the clients carry on;
6. the coordinator's broker crashes: the group is served by the last broker and the clients
   carry on;
7. the producer stops; once everything acknowledged was read and committed the consumers leave;
8. everything restarts on the same store and record logs: a new producer's records are read by
   a new group of three, which resumes from the committed offsets (nothing read before is read
   again).

Across all of it no acknowledged record is lost, each offset holds one value, a member reads only
partitions it owns, and a record is read twice only when the first read was never committed
(the member was killed, or its partition moved before its commit).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import io
import itertools
import json
import logging
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

from coordkit.cli import cli
from coordkit.engine import EngineConfig
from coordkit.serve.apis.fetch import high_watermark
from coordkit.serve.apis.groups.membership import read_assignment
from harness.backends import Backend
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401
from serve.test_groups import DescribeGroups, FindCoordinator, OffsetFetch
from serve.test_replication import _state
from serve.workers import (
    PARTITIONS,
    TOPIC,
    Member,
    Producer,
    Workers,
    read_all,
    split,
    workers_fixture,  # noqa: F401
)

pytestmark = pytest.mark.timeout(180)

#: Test id → (client, librdkafka's partition.assignment.strategy).
CLIENTS = {
    "kafka-python": ("kafka-python", ""),
    "aiokafka": ("aiokafka", ""),
    "confluent": ("confluent", ""),
    "confluent-cooperative": ("confluent", "cooperative-sticky"),
}
GROUP = "e2e"
BROKERS = (0, 1, 2)
#: Seconds between two records of the running producer (~100 records/s).
PACE = 0.01
#: Records acknowledged after each event that the group must read.
AFTER = 40
#: Records the producer of the restarted cluster writes.
RESTART_RECORDS = 90
#: Members start within a second of each other: one rebalance for the three.
CONFIG = EngineConfig(group_initial_rebalance_delay=1.0)


@pytest.mark.parametrize("variant", list(CLIENTS))
def test_no_acknowledged_record_is_lost_through_kills_crashes_and_a_restart(
    variant: str,
    backend: Backend,
    in_process: InProcessFactory,
    workers: Workers,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    client, assignors = CLIENTS[variant]
    url, logs = backend.new_url(), tmp_path / "logs"
    server = in_process(brokers=3, config=CONFIG, store_url=url, data_dir=logs)
    server.server.cluster.create_topic(TOPIC, PARTITIONS, 3)
    workers.wait_for(lambda: _led(server, BROKERS, isr=3), "every partition led, ISR of 3")

    # 2-3. A producer throughout; a group of three splits the partitions.
    producer = workers.producer(client, server.bootstrap, "producer", prefix="a", pace=PACE)
    group = [
        workers.member(client, server.bootstrap, GROUP, f"{variant}-{i}", assignors)
        for i in range(3)
    ]
    everyone = list(group)
    workers.wait_for(lambda: split(group), "three members to split the partitions")
    _reads_on(workers, server, producer, group, "the group formed")
    workers.wait_for(lambda: _described(url, group), "coordkit group describe to show the group")

    # 4. kill -9 a member: the survivors take its partitions once its session times out.
    group.pop().kill()
    workers.wait_for(lambda: split(group), "the two survivors to own every partition")
    _reads_on(workers, server, producer, group, "the kill")

    # 5. A broker that is not the coordinator crashes: its partitions get other leaders.
    coordinator = _find_coordinator(workers, server)
    crashed = min(b for b in BROKERS if b != coordinator)
    _crash(server, crashed)
    alive = tuple(b for b in BROKERS if b != crashed)
    workers.wait_for(lambda: _led(server, alive), f"leaders other than broker {crashed}")
    _reads_on(workers, server, producer, group, f"broker {crashed} crashed")

    # 6. The coordinator's broker crashes: the last broker serves the group.
    _crash(server, coordinator)
    [last] = [b for b in alive if b != coordinator]
    workers.wait_for(lambda: _led(server, (last,)), f"broker {last} to lead every partition")
    workers.wait_for(lambda: _coordinator(server, last) == last, f"broker {last} to coordinate")
    workers.wait_for(lambda: _served(server, last, group), f"the group stable on broker {last}")
    workers.wait_for(lambda: split(group), "the survivors to own every partition again")
    _reads_on(workers, server, producer, group, f"the coordinator (broker {coordinator}) crashed")

    # 7. The producer stops; everything acknowledged is read and committed; the members leave.
    producer.stop()
    acked = producer.acked()
    workers.wait_for(lambda: read_all(everyone, set(acked)), "every acknowledged record read")
    ends = _ends(acked)
    workers.wait_for(
        lambda: _committed_past(server, last, ends), "offsets committed past every record"
    )
    _stop(group)
    assert _state_of_group(server, last) == ("Empty", 0), "the members did not leave"
    committed = _committed(server, last)
    assert committed is not None

    # 8. Restart on the same store and logs: a new group resumes from the committed offsets.
    server.close()
    server = in_process(brokers=3, config=CONFIG, store_url=url, data_dir=logs)
    workers.wait_for(lambda: _led(server, BROKERS, isr=3), "every partition led after the restart")
    at = _find_coordinator(workers, server)
    workers.wait_for(
        lambda: _committed(server, at) == committed,
        f"the committed offsets {committed} back after the restart",
        explain=lambda: f"broker {at} answers {_committed(server, at)}",
    )
    late = workers.producer(
        client, server.bootstrap, "restart-producer", prefix="b", count=RESTART_RECORDS, pace=0
    )
    workers.wait_for(lambda: late.process.poll() is not None, "the restart producer to finish")
    late.stop()
    new = late.acked()
    # Every partition gets new records: a member that resumed anywhere before its committed
    # offset has read the old records by the time it reads the new ones.
    assert {p for p, _ in new.values()} == set(range(PARTITIONS)), new
    fresh = [
        workers.member(client, server.bootstrap, GROUP, f"{variant}-late-{i}", assignors)
        for i in range(3)
    ]
    workers.wait_for(lambda: split(fresh), "a new group of three to split the partitions")
    workers.wait_for(lambda: read_all(fresh, set(new)), "the new records read by the new group")
    _stop(fresh)

    report = _check(everyone, fresh, [producer, late])
    failures = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not failures, "\n".join(caplog.text.splitlines()[-40:])
    print(f"{variant} on {backend.name}: {report}")


# -- the brokers and the group, as the server sees them ----------------------------------------


def _crash(server: InProcessServer, broker: int) -> None:
    """Crash ``broker``; if its connections do not end, fail showing where they wait."""
    try:
        server.server.stop_broker(broker)
    except TimeoutError:
        raise AssertionError(
            f"broker {broker}'s listener did not close; its server's tasks:\n"
            + server.on_loop(_task_stacks)
        ) from None


def _task_stacks() -> str:
    out = io.StringIO()
    for task in asyncio.all_tasks():
        task.print_stack(limit=8, file=out)
    return out.getvalue()


def _led(server: InProcessServer, brokers: tuple[int, ...], isr: int = 1) -> bool:
    """Every partition is led by one of ``brokers``, with at least ``isr`` replicas in sync."""
    states = [_state(server, (TOPIC, p)) for p in range(PARTITIONS)]
    return all(s is not None and s.leader in brokers and len(s.isr) >= isr for s in states)


def _ask(server: InProcessServer, broker: int, request: Any, version: int) -> Any:
    client = RawClient(server.address(broker))
    try:
        return client.call(request, version)
    finally:
        client.close()


def _coordinator(server: InProcessServer, asked: int) -> int | None:
    """The group's coordinator, as broker ``asked`` answers FindCoordinator (None: no answer)."""
    answer = _ask(server, asked, FindCoordinator(key=GROUP, key_type=0), 3)
    return answer.node_id if answer.error_code == 0 else None


def _find_coordinator(workers: Workers, server: InProcessServer) -> int:
    """The group's coordinator, once broker 0 knows it."""

    def found() -> list[int] | None:  # a list: broker 0 is a coordinator too
        coordinator = _coordinator(server, 0)
        return None if coordinator is None else [coordinator]

    [coordinator] = workers.wait_for(found, "broker 0 to name the group's coordinator")
    return int(coordinator)


def _served(server: InProcessServer, broker: int, group: list[Member]) -> bool:
    """``broker`` describes the group Stable, with ``group`` as members owning every partition."""
    [described] = _ask(server, broker, DescribeGroups(groups=[GROUP]), 5).groups
    owned = [read_assignment(m.member_assignment) for m in described.members]
    return (
        (described.error_code, described.group_state) == (0, "Stable")
        and sorted(m.client_id for m in described.members) == sorted(m.name for m in group)
        and sorted(tp.partition for tps in owned for tp in tps) == list(range(PARTITIONS))
    )


def _state_of_group(server: InProcessServer, broker: int) -> tuple[str, int]:
    """The group's state and number of members, as ``broker`` describes it."""
    [described] = _ask(server, broker, DescribeGroups(groups=[GROUP]), 5).groups
    assert described.error_code == 0, described
    return described.group_state, len(described.members)


def _committed(server: InProcessServer, coordinator: int) -> dict[int, int] | None:
    """partition → the group's committed offset (OffsetFetch at its coordinator); None while it
    answers an error (a coordinator still loading the group)."""
    fetch: Any = OffsetFetch  # its nested classes are set at import time
    request = fetch(
        group_id=GROUP,
        topics=[
            fetch.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(range(PARTITIONS)))
        ],
    )
    answer = _ask(server, coordinator, request, 7)
    partitions = [p for t in answer.topics for p in t.partitions]
    if answer.error_code or any(p.error_code for p in partitions):
        return None
    return {p.partition_index: p.committed_offset for p in partitions}


def _committed_past(server: InProcessServer, coordinator: int, ends: dict[int, int]) -> bool:
    committed = _committed(server, coordinator)
    return committed is not None and all(committed.get(p, -1) >= e for p, e in ends.items())


def _described(url: str, group: list[Member]) -> bool:
    """``coordkit group describe`` shows the group as the coordinator persisted it: the members'
    client ids, subscribed topics and assignments (read from the clients' consumer-protocol
    bytes), and committed offsets."""
    result = CliRunner().invoke(
        cli, ["group", "describe", "--store", url, "--format", "json", "--group", GROUP]
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    members = shown["metadata"]["members"] if shown["metadata"] else []
    assigned = sorted(tp for m in members for tp in m["assignment"])
    return (
        shown["metadata"] is not None
        and shown["metadata"]["protocol_type"] == "consumer"
        and sorted(m["client_id"] for m in members) == sorted(m.name for m in group)
        and all(m["topics"] == [TOPIC] for m in members)
        and assigned == sorted(f"{TOPIC}-{p}" for p in range(PARTITIONS))
        and bool(shown["offsets"])
    )


# -- the clients --------------------------------------------------------------------------------


def _reads_on(
    workers: Workers, server: InProcessServer, producer: Producer, group: list[Member], event: str
) -> None:
    """The producer gets :data:`AFTER` more records acknowledged, and ``group`` reads them."""
    before = len(producer.acked())
    workers.wait_for(
        lambda: len(producer.acked()) >= before + AFTER,
        f"{AFTER} records acknowledged after {event}",
        explain=lambda: _partitions(server),
    )
    after = dict(list(producer.acked().items())[before:])

    def unread() -> str:
        seen = {(p, o) for m in group for p, o, _ in m.records()}
        missing = sorted((p, o, v) for v, (p, o) in after.items() if (p, o) not in seen)
        owners = {m.name: sorted(m.owned()) for m in group}
        skips = _skips([r for m in group for r in _readings(m)])
        return f"unread: {missing[:20]}; owners {owners}; skips {skips}\n{_partitions(server)}"

    workers.wait_for(
        lambda: read_all(group, set(after)),
        f"the records acknowledged after {event} read",
        explain=unread,
    )


def _partitions(server: InProcessServer) -> str:
    """Each partition's leader, epoch and ISR, and each broker's log end (crashed ones too) /
    high watermark (its leader's)."""

    def ends(tp: Any) -> str:
        shown = []
        for listener in server.server.listeners:
            log = listener.ctx.logs.find(tp)
            if log is not None:
                ctx = listener.ctx
                hw = high_watermark(ctx, tp, log) if ctx.leads(tp) else "-"
                shown.append(f"b{ctx.broker_id}:{log.log_end}/{hw}")
        return " ".join(shown)

    lines = []
    for p in range(PARTITIONS):
        tp = (TOPIC, p)
        state = server.server.cluster.replication.log(tp)
        where = server.on_loop(functools.partial(ends, tp))
        lines.append(
            f"{TOPIC}-{p}: "
            + ("no state" if state is None else f"leader {state.leader} epoch "
               f"{state.leader_epoch} isr {sorted(state.isr)}")
            + f"; log end/hw {where}"
        )  # fmt: skip
    return "\n".join(lines)


def _stop(group: list[Member]) -> None:
    """SIGTERM every member at once; each commits, leaves and exits."""
    for member in group:
        member.ask_to_stop()
    for member in group:
        member.stop()


def _ends(acked: dict[str, tuple[int, int]]) -> dict[int, int]:
    """partition → the offset after its last acknowledged record."""
    ends: dict[int, int] = {}
    for partition, offset in acked.values():
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


# -- what was read ------------------------------------------------------------------------------


@attrs.frozen
class Reading:
    """One record read by ``member``: ``span`` which of its ownerships of the partition it was
    read in (-1: it did not own the partition), ``covered`` whether it committed past the record
    while it still owned the partition."""

    member: str
    partition: int
    offset: int
    value: str
    span: int
    covered: bool


def _readings(member: Member) -> list[Reading]:
    """Its records in the order read, each with whether a commit of its own covered it.

    A member owns a partition from an ``assigned`` line naming it to the next one that does not
    (a span); a commit covers the records of the span it was made in (or, arriving just after a
    revocation, of the span that ended: the coordinator took it in the old generation)."""
    read: list[tuple[int, int, str, int]] = []
    covered: set[int] = set()
    owned: set[int] = set()
    spans: dict[int, list[int]] = {}  # partition → indexes of read records in its current span
    ended: dict[int, list[int]] = {}  # partition → those of its last ended span
    span_ids: dict[int, int] = {}  # partition → its current span's number
    numbers = itertools.count()
    for words in member.lines():
        if words[0] == "assigned":
            now = {int(w.rsplit(":", 1)[1]) for w in words[1:]}
            for partition in owned - now:
                ended[partition] = spans.pop(partition)
            for partition in now - owned:
                spans[partition] = []
                span_ids[partition] = next(numbers)
            owned = now
        elif words[0] == "record":
            partition, offset = int(words[1]), int(words[2])
            if partition in owned:
                spans[partition].append(len(read))
            span = span_ids[partition] if partition in owned else -1
            read.append((partition, offset, words[3], span))
        elif words[0] == "committed":
            for entry in words[1:]:
                partition, next_offset = (int(n) for n in entry.split(":"))
                indexes = spans[partition] if partition in owned else ended.get(partition, [])
                covered.update(i for i in indexes if read[i][1] < next_offset)
    return [Reading(member.name, *r, covered=i in covered) for i, r in enumerate(read)]


def _skips(readings: list[Reading]) -> list[str]:
    """Where a member, owning a partition all along, read an offset after one more than 1 below
    it: records it never read (offsets are dense here: no compaction, no transactions) and then
    committed past. librdkafka 2.16 does that after a leader epoch bump with the leader
    unchanged (the confluent worker seeks back when it sees it: its ``refetch`` lines)."""
    last: dict[tuple[str, int], Reading] = {}
    skips = []
    for r in readings:
        if r.span < 0:
            continue
        before = last.get((r.member, r.span))
        if before is not None and r.offset > before.offset + 1:
            skips.append(
                f"{r.member} read {TOPIC}-{r.partition} offset {before.offset} then {r.offset}"
            )
        last[(r.member, r.span)] = r
    return skips


def _check(before: list[Member], after: list[Member], producers: list[Producer]) -> str:
    """Check every reading against what was acknowledged; a one-line summary."""
    readings = [r for m in before + after for r in _readings(m)]
    acked = {v: where for p in producers for v, where in p.acked().items()}
    failed = [v for p in producers for v in p.failed()]
    assert not set(failed) & set(acked), "a record reported both acknowledged and failed"

    at = {(r.partition, r.offset, r.value) for r in readings}
    lost = sorted(v for v, (p, o) in acked.items() if (p, o, v) not in at)
    assert not lost, f"{len(lost)} acknowledged records never read where acknowledged: {lost[:20]}"
    values = collections.defaultdict(set)
    for r in readings:
        values[(r.partition, r.offset)].add(r.value)
    diverged = {tp: v for tp, v in values.items() if len(v) > 1}
    assert not diverged, f"offsets read with different values: {diverged}"
    outside = [r for r in readings if r.span < 0]
    assert not outside, f"records read by a member that did not own them: {outside[:10]}"
    skipped = _skips(readings)
    assert not skipped, f"a member's reading jumped over offsets: {skipped[:10]}"

    old = {(r.partition, r.offset) for m in before for r in _readings(m)}
    again = [r for m in after for r in _readings(m) if (r.partition, r.offset) in old]
    assert not again, f"the restarted group read committed records again: {again[:10]}"
    # A record read more than once was read before that by members that never committed past
    # it: at most one reading of each record is covered by its reader's commit.
    by_offset = collections.defaultdict(list)
    for r in readings:
        by_offset[(r.partition, r.offset)].append(r)
    twice = {tp: rs for tp, rs in by_offset.items() if sum(r.covered for r in rs) > 1}
    assert not twice, f"records read again after a commit past them: {list(twice.values())[:5]}"
    duplicates = len(readings) - len(by_offset)
    failures = sum(len(m.lines("commit-failed")) for m in before + after)
    refetches = sum(len(m.lines("refetch")) for m in before + after)
    return (
        f"{len(acked)} acknowledged, {len(failed)} failed deliveries, {len(readings)} read, "
        f"{duplicates} read again (uncommitted), {failures} commits failed, "
        f"{refetches} client skips read again"
    )
