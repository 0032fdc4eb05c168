"""Real clients with Kafka 4's consumer group protocol (KIP-848, ``group.protocol=consumer``) end
to end (issue #33 item 6): librdkafka through confluent-kafka and Kafka's own Java consumer (the
fetched 4.4 jars), each member a process of its own, against three in-process brokers of
``coordkit serve`` on the store under test, with a producer (acks=all) running throughout and
the broker configs ``group.consumer.session.timeout.ms`` (short, so that a killed member is fenced
in seconds) and ``group.consumer.heartbeat.interval.ms`` (500 ms). Each scenario starts with three
members sharing a topic of 6 partitions (replication factor 3), then:

1. ``join``: nothing more;
2. ``kill``: one member is killed (SIGKILL, no leave): the session timeout fences it and the
   two others take its partitions;
3. ``leave``: one member closes (it commits and leaves the group);
4. ``static``: three static members (``group.instance.id``); one closes (a static member's
   leave is temporary: epoch -2) and a new process with its instance id takes its partitions back
   while the others keep theirs (no assignment or revocation callback of theirs meanwhile) and
   the group epoch stays (the new member replaced the old one under its instance id);
5. ``coordinator``: the group coordinator's broker (FindCoordinator) crashes: the members find
   the new coordinator, which resumes the group from the store;
6. ``broker``: a broker that is not the coordinator crashes: its partitions get other leaders.

Every scenario then reads on (records acknowledged after the event are read), stops the producer,
waits until everything acknowledged is read and committed, and asserts:

* the group is Stable, described by ``ConsumerGroupDescribe`` at the coordinator: the live
  members, each at the group's assignment epoch, each's assignment its target, together every
  partition once, each member's assignment what the member itself says it owns; ``coordkit group
  describe`` shows the same from the store;
* no acknowledged record is lost (each is read at the partition and offset it was acknowledged
  at), and each offset holds one value;
* every record is read by a member that owned its partition then (by the member's own rebalance
  callbacks), and no partition is owned by two members at once (by the wall clock of their
  callbacks; a killed member owns until its kill);
* a record is read more than once only if every earlier reading was by a member that was
  killed before it committed past the record (Kafka's at-least-once); the workers commit a
  partition's offsets in their revocation callback, so a partition that moves is not read again;
* the committed offsets end where the reading ended, past every acknowledged record.

The whole matrix (6 scenarios × 2 clients, under 3 minutes on 2 cores) runs on the memory store;
on ZooKeeper and Redis a representative subset: librdkafka's ``kill`` (a fenced member removed
from the stored group) and the Java consumer's ``coordinator`` (the group resumed from the store
by a new coordinator, commits with member epochs there): ``pytest
tests/serve/test_consumer_protocol_clients.py --backend zookeeper --backend redis -k "kill and
confluent or coordinator and java"`` (about a minute per backend). Every test passes on every
backend (``-k`` left out: about 4 minutes per backend).
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
from typing import Any

import pytest
from click.testing import CliRunner

from coordkit.cli import cli
from coordkit.engine import EngineConfig
from coordkit.protocol import messages
from harness.backends import Backend
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401
from serve.test_end_to_end import _crash, _ends, _led, _partitions
from serve.test_groups import FindCoordinator, OffsetFetch
from serve.workers import PARTITIONS, TOPIC, Producer, Workers, workers_fixture  # noqa: F401
from serve.workers.modern import CLIENTS, ModernMember, require, start_member

pytestmark = pytest.mark.timeout(240)

SCENARIOS = ("join", "kill", "leave", "static", "coordinator", "broker")
GROUP = "kip848"
BROKERS = (0, 1, 2)
#: group.consumer.session.timeout.ms: short, so that a killed member is fenced in seconds; the
#: static scenario's restart (a JVM starting) must fit in it, or the coordinator would give the
#: member's partitions to the others meanwhile.
SESSION_SECONDS = {"static": 12.0}
DEFAULT_SESSION_SECONDS = 4.0
HEARTBEAT_SECONDS = 0.5
PACE = 0.02
#: Records acknowledged after each event that the group must read.
AFTER = 30
DescribeResponse = messages.ConsumerGroupDescribeResponse


def _config(scenario: str) -> EngineConfig:
    return EngineConfig(
        group_initial_rebalance_delay=0.0,
        consumer_group_session_timeout=SESSION_SECONDS.get(scenario, DEFAULT_SESSION_SECONDS),
        consumer_group_heartbeat_interval=HEARTBEAT_SECONDS,
        offsets_topic_num_partitions=6,
    )


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_consumer_protocol_group(
    scenario: str,
    client: str,
    backend: Backend,
    in_process: InProcessFactory,
    workers: Workers,
    caplog: pytest.LogCaptureFixture,
) -> None:
    require(client)
    caplog.set_level(logging.WARNING)
    caplog.set_level(logging.INFO, logger="coordkit.engine.groups")  # shown when a wait fails
    url = backend.new_url()
    server = in_process(brokers=3, config=_config(scenario), store_url=url)
    server.server.cluster.create_topic(TOPIC, PARTITIONS, 3)
    workers.wait_for(lambda: _led(server, BROKERS, isr=3), "every partition led, ISR of 3")
    producer = workers.producer("confluent", server.bootstrap, "producer", prefix="a", pace=PACE)
    static = scenario == "static"

    def member(i: int, run: int = 0) -> ModernMember:
        instance = f"{client}-static-{i}" if static else ""
        return start_member(workers, client, server.bootstrap, GROUP, f"{client}-{i}-{run}",
                            instance=instance)  # fmt: skip

    group = [member(i) for i in range(3)]
    everyone = list(group)
    coordinator = _find_coordinator(workers, server, 0)
    _settled(workers, server, coordinator, group, "three members to share the partitions")
    _reads_on(workers, server, producer, group, "the group formed")
    alive = BROKERS

    if scenario == "kill":
        group.pop().kill()
        _settled(workers, server, coordinator, group, "the killed member fenced")
    elif scenario == "leave":
        group.pop().stop()
        _settled(workers, server, coordinator, group, "the closed member gone")
    elif scenario == "static":
        others = {m.name: len(m.lines("assigned")) for m in group[1:]}
        before, epoch = group[0].owned(), _describe(server, coordinator).group_epoch
        group[0].stop()
        group[0] = member(0, run=1)
        everyone.append(group[0])
        back = _settled(workers, server, coordinator, group, "the static member back")
        assert group[0].owned() == before, "the restarted static member got other partitions"
        # The new process replaced the member under its instance id: no new group epoch.
        assert back.group_epoch == epoch, f"group epoch {epoch} -> {back.group_epoch}"
        moved = {m.name: m.lines("assigned")[n - 1 :] for m in group[1:] if (n := others[m.name])}
        assert all(len(lines) == 1 for lines in moved.values()), (
            f"the other members' assignments changed during the static restart: {moved}"
        )
    elif scenario in ("coordinator", "broker"):
        crashed = coordinator if scenario == "coordinator" else min(set(BROKERS) - {coordinator})
        _crash(server, crashed)
        alive = tuple(b for b in BROKERS if b != crashed)
        workers.wait_for(lambda: _led(server, alive), f"leaders other than broker {crashed}")
        coordinator = _find_coordinator(workers, server, alive[0])
        assert coordinator in alive
        _settled(workers, server, coordinator, group, f"the group served after broker {crashed}")
    if scenario != "join":
        _reads_on(workers, server, producer, group, scenario)

    producer.stop()
    acked = producer.acked()
    ends = _ends(acked)

    def read_ends() -> dict[int, int]:  # a record whose ack was lost may be read: past ``ends``
        return _ends({f"{p}:{o}": (p, o) for m in everyone for p, o, _ in m.records()})

    def caught_up() -> bool:
        committed = _committed(server, coordinator) or {}
        done = all(committed.get(p, 0) >= end for p, end in ends.items())
        return done and committed == read_ends()

    workers.wait_for(
        caught_up,
        "every acknowledged record read and everything read committed",
        explain=lambda: (
            f"committed {_committed(server, coordinator)}, acknowledged up to {ends}"
            f", read up to {read_ends()}"
        ),
    )
    described = _settled(workers, server, coordinator, group, "the group at the end")
    _check_cli(url, described)
    for m in group:
        m.ask_to_stop()
    for m in group:
        m.stop()
    report = _check(everyone, producer)
    failures = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not failures, "\n".join(caplog.text.splitlines()[-40:])
    print(f"{scenario} with {client} on {backend.name}: {report}")


# -- the group, as the coordinator and the store describe it -----------------------------------


def _ask(server: InProcessServer, broker: int, request: Any, version: int) -> Any:
    client = RawClient(server.address(broker))
    try:
        return client.call(request, version)
    finally:
        client.close()


def _find_coordinator(workers: Workers, server: InProcessServer, asked: int) -> int:
    def found() -> list[int] | None:  # a list: broker 0 may be the coordinator
        answer = _ask(server, asked, FindCoordinator(key=GROUP, key_type=0), 3)
        return [answer.node_id] if answer.error_code == 0 else None

    [coordinator] = workers.wait_for(found, f"broker {asked} to name the group's coordinator")
    return int(coordinator)


def _describe(server: InProcessServer, broker: int) -> Any:
    request = messages.ConsumerGroupDescribeRequest(group_ids=[GROUP])
    [described] = _ask(server, broker, request, 1).groups
    return described


def _assigned(assignment: Any) -> set[int]:
    return {p for t in assignment.topic_partitions for p in t.partitions}


def _stable_problem(described: Any, group: list[ModernMember]) -> str | None:
    """Why ``described`` is not the group of ``group`` Stable (None: it is)."""
    if described.error_code or described.group_state != "Stable":
        return f"error {described.error_code}, state {described.group_state}"
    members = {m.client_id: m for m in described.members}
    if sorted(members) != sorted(m.name for m in group):
        return f"members {sorted(members)}"
    owned: list[int] = []
    for m in group:
        shown = members[m.name]
        if shown.member_epoch != described.assignment_epoch:
            return f"{m.name} at epoch {shown.member_epoch} of {described.assignment_epoch}"
        if _assigned(shown.assignment) != _assigned(shown.target_assignment):
            return f"{m.name} not at its target"
        if _assigned(shown.assignment) != m.owned():
            return f"{m.name} owns {m.owned()}, its assignment {_assigned(shown.assignment)}"
        owned += _assigned(shown.assignment)
    if sorted(owned) != list(range(PARTITIONS)):
        return f"partitions assigned {sorted(owned)}"
    if described.group_epoch != described.assignment_epoch:
        return f"group epoch {described.group_epoch}, assignment {described.assignment_epoch}"
    return None


def _settled(
    workers: Workers, server: InProcessServer, broker: int, group: list[ModernMember], what: str
) -> Any:
    """Wait until ``broker`` describes the group Stable with ``group`` as its members."""

    def stable() -> Any:
        described = _describe(server, broker)
        return described if _stable_problem(described, group) is None else None

    return workers.wait_for(
        stable, what, explain=lambda: f"{_stable_problem(_describe(server, broker), group)}"
    )


def _committed(server: InProcessServer, coordinator: int) -> dict[int, int] | None:
    """partition → the committed offset (of the partitions with one); None on an error."""
    topics = [OffsetFetch.OffsetFetchRequestTopic(name=TOPIC,
                                                  partition_indexes=list(range(PARTITIONS)))]  # fmt: skip
    answer = _ask(server, coordinator, OffsetFetch(group_id=GROUP, topics=topics), 7)
    partitions = [p for t in answer.topics for p in t.partitions]
    if answer.error_code or any(p.error_code for p in partitions):
        return None
    return {p.partition_index: p.committed_offset for p in partitions if p.committed_offset >= 0}


def _check_cli(url: str, described: Any) -> None:
    """``coordkit group describe`` shows the group's epochs and members as the coordinator."""
    result = CliRunner().invoke(
        cli, ["group", "describe", "--store", url, "--format", "json", "--group", GROUP]
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)["consumer"]
    assert (shown["group_epoch"], shown["assignment_epoch"], shown["assignor"]) == (
        described.group_epoch,
        described.assignment_epoch,
        described.assignor_name,
    )
    expected = {
        m.client_id: (m.member_epoch, sorted(f"{TOPIC}-{p}" for p in _assigned(m.assignment)))
        for m in described.members
    }
    stored = {m["client_id"]: (m["member_epoch"], m["assigned"]) for m in shown["members"]}
    assert stored == expected


# -- the clients --------------------------------------------------------------------------------


def _reads_on(
    workers: Workers,
    server: InProcessServer,
    producer: Producer,
    group: list[ModernMember],
    event: str,
) -> None:
    """The producer gets :data:`AFTER` more records acknowledged, and ``group`` reads them."""
    before = len(producer.acked())
    workers.wait_for(
        lambda: len(producer.acked()) >= before + AFTER,
        f"{AFTER} records acknowledged after {event}",
        explain=lambda: _partitions(server),
    )
    after = {(p, o) for p, o in list(producer.acked().values())[before:]}

    def unread() -> set[tuple[int, int]]:
        return after - {(p, o) for m in group for p, o, _ in m.records()}

    workers.wait_for(
        lambda: not unread(),
        f"the records acknowledged after {event} read",
        explain=lambda: (
            f"unread {sorted(unread())[:20]}; owners "
            f"{ {m.name: sorted(m.owned()) for m in group} }\n{_partitions(server)}"
        ),
    )


Reading = collections.namedtuple("Reading", "member partition offset value owned covered killed")


def _readings(member: ModernMember) -> list[Reading]:
    """Its records in the order read: whether it owned the partition then (by its own lines) and
    whether a commit of its own, while it still owned the partition, covered the record."""
    read: list[list[Any]] = []
    owned: set[int] = set()
    since: dict[int, int] = {}  # partition → index of the first record read since assigned
    for words in member.lines():
        if words[0] == "assigned":
            now = {int(w.rsplit(":", 1)[1]) for w in words[2:]}
            since.update({p: len(read) for p in now - owned})
            owned = now
        elif words[0] == "record":
            partition, offset = int(words[1]), int(words[2])
            read.append([partition, offset, words[3], partition in owned, False])
        elif words[0] == "committed":
            for entry in words[1:]:
                partition, next_offset = (int(n) for n in entry.split(":"))
                for r in read[since.get(partition, len(read)) :]:
                    if r[0] == partition and r[1] < next_offset:
                        r[4] = True
    killed = member.killed_at is not None
    return [Reading(member.name, *r, killed) for r in read]


def _overlaps(members: list[ModernMember]) -> list[str]:
    """Partitions owned by two members at once (by the wall clock of their callbacks)."""
    spans: dict[int, list[tuple[float, float, str]]] = collections.defaultdict(list)
    for m in members:
        changes = m.ownerships()
        end_of_life = m.killed_at if m.killed_at is not None else float("inf")
        for i, (start, partitions) in enumerate(changes):
            for p in partitions:
                later = [t for t, ps in changes[i + 1 :] if p not in ps]
                spans[p].append((start, min([*later, end_of_life]), m.name))
    found = []
    for p, owned in spans.items():
        for (start_a, end_a, a), (start_b, end_b, b) in itertools.combinations(owned, 2):
            if a != b and max(start_a, start_b) < min(end_a, end_b):
                found.append(f"{TOPIC}-{p}: {a} {start_a:.3f}-{end_a:.3f}, "
                             f"{b} {start_b:.3f}-{end_b:.3f}")  # fmt: skip
    return found


def _check(members: list[ModernMember], producer: Producer) -> str:
    """Check every reading against what was acknowledged; a one-line summary."""
    readings = [r for m in members for r in _readings(m)]
    acked = producer.acked()
    at = {(r.partition, r.offset, r.value) for r in readings}
    lost = sorted(v for v, (p, o) in acked.items() if (p, o, v) not in at)
    assert not lost, f"{len(lost)} acknowledged records never read where acknowledged: {lost[:20]}"
    values = collections.defaultdict(set)
    for r in readings:
        values[(r.partition, r.offset)].add(r.value)
    diverged = {tp: v for tp, v in values.items() if len(v) > 1}
    assert not diverged, f"offsets read with different values: {diverged}"
    outside = [r for r in readings if not r.owned]
    assert not outside, f"records read by a member that did not own them: {outside[:10]}"
    overlaps = _overlaps(members)
    assert not overlaps, f"partitions owned by two members at once: {overlaps[:10]}"
    by_offset = collections.defaultdict(list)
    for r in readings:
        by_offset[(r.partition, r.offset)].append(r)
    # Only a killed member's uncommitted readings may be read again (by the member after it).
    again = [rs for rs in by_offset.values() if sum(not r.killed or r.covered for r in rs) > 1]
    assert not again, f"records read again after a commit or a handover: {again[:5]}"
    duplicates = len(readings) - len(by_offset)
    failures = collections.Counter(w[1] for m in members for w in m.lines("commit-failed"))
    return (
        f"{len(acked)} acknowledged, {len(readings)} read, {duplicates} read again (a killed "
        f"member's uncommitted), commits failed: {dict(failures) or 'none'}"
    )
