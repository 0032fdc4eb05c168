"""A share partition's leader crashes (``coordkit serve`` in this process, three brokers, the
``--backend`` store): the new leader resumes from the stored share-partition state — no
acknowledgement lost (what was accepted or rejected is never delivered again), what was acquired
and not acknowledged delivered again, as if never delivered (an acquisition is not written, as in
Kafka), and what was released delivered again with its delivery count."""

from __future__ import annotations

from typing import Any

from coordkit.protocol import messages
from coordkit.serve.broker_config import parse_broker_configs
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, in_process_fixture  # noqa: F401
from serve.test_replication import _state, _topic
from share.test_share_partitions_wire import (
    ACCEPT,
    GROUP,
    REJECT,
    RELEASE,
    TOPIC,
    Member,
    acquired,
    produce,
    topic_id,
)


def test_a_new_leader_resumes_the_share_partition(in_process: InProcessFactory) -> None:
    settings = parse_broker_configs(["group.share.record.lock.duration.ms=60000"]).serve_settings()
    server = in_process(brokers=3, settings=settings)
    _topic(server, TOPIC, 1, 3)
    tid = topic_id(server)
    leader = _state(server, (TOPIC, 0)).leader
    first = Member(server, tid, "m-first", broker=leader)
    first.fetch(wait_ms=0)
    produce(server, 12, batch=6)
    assert acquired(first.fetch(max_records=12)) == [(0, 11, 1)]
    # 0-3 accepted, 4 rejected, 5 released; 6-11 still acquired when the leader crashes.
    first.acknowledge([(0, 5, [ACCEPT] * 4 + [REJECT, RELEASE])])
    server.server.stop_broker(leader)
    wait_for(lambda: (s := _state(server, (TOPIC, 0))) is not None and s.leader != leader, 30,
             "a new leader")  # fmt: skip
    new_leader = _state(server, (TOPIC, 0)).leader
    second = Member(server, tid, "m-second", broker=new_leader)
    # 5 delivered a second time; 6-11 as if never delivered (their lock, a minute, not waited
    # for); nothing accepted or rejected comes back.
    assert acquired(second.fetch(max_records=12)) == [(5, 5, 2), (6, 11, 1)]
    second.acknowledge([(5, 11, [ACCEPT])])
    assert acquired(second.fetch(wait_ms=300)) == []


def test_a_closed_connection_ends_its_share_session(in_process: InProcessFactory) -> None:
    """Kafka 4.4 ends a share session with its connection: the member's records go to others
    at once, not when their lock (a minute here) runs out."""
    settings = parse_broker_configs(["group.share.record.lock.duration.ms=60000"]).serve_settings()
    server = in_process(brokers=1, settings=settings)
    _topic(server, TOPIC, 1, 1)
    tid = topic_id(server)
    gone, staying = Member(server, tid, "m-gone"), Member(server, tid, "m-staying")
    gone.fetch(wait_ms=0)
    staying.fetch(wait_ms=0)
    produce(server, 4, batch=4)
    assert acquired(gone.fetch()) == [(0, 3, 1)]
    gone.client.close()
    assert acquired(staying.fetch(wait_ms=10_000)) == [(0, 3, 2)]


def test_a_member_leaving_its_group_releases_its_records(in_process: InProcessFactory) -> None:
    """The share-group coordinator (on whichever broker of the process) tells the partition's
    leader that a member left (ShareGroupHeartbeat epoch -1): its records go to others at once,
    its fetch connection still open."""
    settings = parse_broker_configs(["group.share.record.lock.duration.ms=60000"]).serve_settings()
    server = in_process(brokers=3, settings=settings)
    _topic(server, TOPIC, 1, 3)
    tid = topic_id(server)
    leader = _state(server, (TOPIC, 0)).leader
    member_id = "AAAAAAAAAAAAAAAAAAAAAQ"
    find = messages.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP])
    asking = RawClient(server.address(leader))
    found = wait_for(lambda: (c := asking.call(find, 4).coordinators[0]).error_code == 0 and c,
                     30, "the group's coordinator")  # fmt: skip
    coordinator = RawClient(server.address(found.node_id))

    def heartbeat(epoch: int) -> Any:
        request = messages.ShareGroupHeartbeatRequest(
            group_id=GROUP, member_id=member_id, member_epoch=epoch, rack_id=None,
            subscribed_topic_names=[TOPIC] if epoch == 0 else None)  # fmt: skip
        return coordinator.call(request, 1)

    assert heartbeat(0).error_code == 0
    leaving, staying = Member(server, tid, member_id, broker=leader), Member(
        server, tid, "m-staying", broker=leader)  # fmt: skip
    leaving.fetch(wait_ms=0)
    staying.fetch(wait_ms=0)
    produce(server, 4, batch=4)
    assert acquired(leaving.fetch()) == [(0, 3, 1)]
    assert heartbeat(-1).error_code == 0
    assert acquired(staying.fetch(wait_ms=10_000)) == [(0, 3, 2)]
