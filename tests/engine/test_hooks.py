"""The engine reports to observer plugins through the plugin manager's hooks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordkit import hookimpl
from coordkit.plugins import get_plugin_manager


class _Recorder:
    def __init__(self) -> None:
        self.brokers: list[tuple[int, str, int]] = []
        self.controllers: list[tuple[int | None, int]] = []
        self.leaders: list[tuple[str, int, int, int, list[int], str]] = []

    @hookimpl
    def coordkit_broker_registered(self, broker_id: int, host: str, port: int) -> None:
        self.brokers.append((broker_id, host, port))

    @hookimpl
    def coordkit_controller_changed(self, broker_id: int | None, epoch: int) -> None:
        self.controllers.append((broker_id, epoch))

    @hookimpl
    def coordkit_leader_elected(
        self,
        topic: str,
        partition: int,
        leader: int,
        leader_epoch: int,
        isr: list[int],
        reason: str,
    ) -> None:
        self.leaders.append((topic, partition, leader, leader_epoch, isr, reason))


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    manager = get_plugin_manager()
    plugin = _Recorder()
    manager.register(plugin, name="engine-test-recorder")
    yield plugin
    manager.unregister("engine-test-recorder")


def test_hooks_report_brokers_controllers_and_leaders(
    recorder: _Recorder, make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    cluster = make_cluster(3)
    cluster.create_topic("h", 3, 2)
    first = until(cluster, lambda v: len(v.partitions) == 3, "h to get leaders")
    assert sorted(b for b, _, _ in recorder.brokers) == [0, 1, 2]
    assert ("localhost", 9092) in {(h, p) for _, h, p in recorder.brokers}
    assert (first.controller, first.epoch) in recorder.controllers
    elected = {
        (t, p): (leader, epoch, reason) for t, p, leader, epoch, _, reason in recorder.leaders
    }
    for p in first.partitions:
        assert elected[p.tp] == (p.leader, 0, "new")
    cluster.kill(first.controller)
    second = until(cluster, lambda v: v.epoch == first.epoch + 1 and not v.offline(), "failover")
    assert (None, first.epoch) in recorder.controllers
    assert (second.controller, second.epoch) in recorder.controllers
    moved = [p for p in first.partitions if p.leader == first.controller]
    for p in moved:
        now = second.partition(*p.tp)
        assert (p.topic, p.partition, now.leader, now.leader_epoch, list(now.isr), "offline") in (
            recorder.leaders
        )
