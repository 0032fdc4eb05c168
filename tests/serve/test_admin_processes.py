"""Admin requests across ``coordkit serve --broker-id`` processes: an unclean election asked of
a broker that is not the controller is forwarded to the controller's process (issue #35)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from coordkit.protocol import messages
from coordkit.testing.backends import NOT_APPLICABLE, Capability, capabilities_of
from harness.backends import Backend
from serve.conftest import STOP_SECONDS, RawClient
from serve.test_multiprocess import (
    BROKERS,
    StartBroker,
    _metadata,
    _wait_for,
    _with_session_timeout,
    start_broker,
)

__all__ = ["start_broker"]  # the fixture, for pytest
NO_LEADER = -1


def _partition(address: str, topic: str) -> Any:
    return _metadata(address, topic).topics[0].partitions[0]


def test_an_unclean_election_is_forwarded_to_the_controller(
    backend: Backend, start_broker: StartBroker
) -> None:
    """A partition on brokers 1 and 2: 2 dies (the ISR shrinks to 1), then 1 (no leader), then
    2 comes back outside the ISR. A clean cluster leaves it leaderless; ElectLeaders UNCLEAN sent
    to the live broker that is not the controller elects 2."""
    if Capability.SHARED_ACROSS_PROCESSES not in capabilities_of(backend):
        pytest.skip(f"{NOT_APPLICABLE}: {backend.name} is not shared across processes")
    url = _with_session_timeout(backend.new_url())
    servers = {b: start_broker(url, b) for b in BROKERS}
    address = {b: s.addresses[b] for b, s in servers.items()}
    _wait_for("every broker registered",
              lambda: len(_metadata(address[0]).brokers) == len(BROKERS))  # fmt: skip
    admin = KafkaAdminClient(bootstrap_servers=address[0], request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic("lost", replica_assignments={0: [1, 2]})])
    finally:
        admin.close()
    _wait_for("lost led by 1", lambda: _partition(address[0], "lost").leader_id == 1)
    for dying, what in ((2, "the ISR to shrink to [1]"), (1, "lost to go offline")):
        servers[dying].process.kill()
        servers[dying].process.communicate(timeout=STOP_SECONDS)
        if dying == 2:
            _wait_for(what, lambda: list(_partition(address[0], "lost").isr_nodes) == [1])
        else:
            _wait_for(what, lambda: _partition(address[0], "lost").leader_id == NO_LEADER)
    servers[2] = start_broker(url, 2)
    address[2] = servers[2].addresses[2]
    _wait_for("broker 2 back", lambda: 2 in {b.node_id for b in _metadata(address[0]).brokers})
    assert _partition(address[0], "lost").leader_id == NO_LEADER  # clean: it waits for 1
    controller = _metadata(address[0]).controller_id
    asked = 2 if controller == 0 else 0
    client = RawClient(address[asked])
    try:
        request: Any = messages.ElectLeadersRequest
        answer = client.call(request(election_type=1, timeout_ms=30_000, topic_partitions=[
            request.TopicPartitions(topic="lost", partitions=[0])]), 2)  # fmt: skip
    finally:
        client.close()
    (result,) = answer.replica_election_results[0].partition_result
    assert (result.error_code, result.error_message) == (0, None)
    elected = _partition(address[0], "lost")
    assert (elected.leader_id, list(elected.isr_nodes)) == (2, [2])
