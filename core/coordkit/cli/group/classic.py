"""``coordkit group run`` with consumers of the classic group protocol, through the coordinators
of the cluster's brokers."""

from __future__ import annotations

from collections import Counter

from coordkit.cli.group.runs import GroupSettings, NumberedConsumers, Observation, labels
from coordkit.cli.group.view import GroupSnapshot, MemberRow, RebalanceRow
from coordkit.engine import Cluster
from coordkit.engine.errors import EngineError
from coordkit.engine.groups import Consumer, ConsumerState, GroupState, RebalanceCompleted


class ClassicGroupRun(NumberedConsumers[Consumer]):
    """Consumers of the classic group protocol, through the cluster's coordinators."""

    def __init__(self, cluster: Cluster, settings: GroupSettings):
        if cluster.group_history is None:
            raise EngineError("coordkit group needs a cluster recording its group history")
        self.cluster = cluster
        self.settings = settings
        self.history = cluster.group_history
        self.consumers: dict[int, Consumer] = {}
        self.universe = settings.partitions()

    def _start(self, number: int) -> None:
        s = self.settings
        self.consumers[number] = self.cluster.start_consumer(
            s.group_id,
            s.topics,
            assignors=s.assignors,
            group_instance_id=f"{s.group_id}-i{number}" if s.static else None,
            session_timeout=s.session_timeout,
            heartbeat_interval=s.heartbeat_interval,
            rebalance_timeout=s.rebalance_timeout,
            client_id=f"c{number}",
        )

    def _is_running(self, consumer: Consumer) -> bool:
        return consumer.running

    def kill_coordinator(self) -> int:
        coordinator = self.cluster.group_coordinator(self.settings.group_id)
        if coordinator is None:
            raise EngineError(f"group {self.settings.group_id!r} has no live coordinator to kill")
        self.cluster.kill(coordinator)
        return coordinator

    def poll(self) -> int:
        return sum(c.poll() for c in self._running().values())

    def commit(self) -> int:
        committed = 0
        for consumer in self._running().values():
            owned = consumer.assignment()
            consumer.commit()
            committed += len(owned)
        return committed

    def failures(self) -> list[str]:
        return [
            f"consumer c{n}: {c.error}"
            for n, c in self.consumers.items()
            if c.state is ConsumerState.FAILED
        ]

    def violations(self) -> list[str]:
        return self.history.violations()

    def close(self) -> None:
        for consumer in self.consumers.values():
            consumer.crash()

    # -- observing -------------------------------------------------------------------------------

    def observe(self, label: str, since: float) -> Observation:
        group_id = self.settings.group_id
        description = self.cluster.describe_group(group_id)
        assigned = description.assignment()
        number_of = {c.member_id: n for n, c in self.consumers.items() if c.member_id}
        running = self._running()
        rows = []
        for number, consumer in sorted(self.consumers.items()):
            member_id = consumer.member_id
            in_group = member_id in assigned
            if not (consumer.running or in_group):
                continue
            rows.append(
                MemberRow(
                    consumer=number,
                    member_id=member_id,
                    instance_id=consumer.group_instance_id,
                    status=consumer.state.value,
                    partitions=assigned[member_id] if in_group else consumer.assignment(),
                    lag=sum(consumer.lag().values()) if consumer.running else 0,
                )
            )
        snapshot = GroupSnapshot(
            label=label,
            group_id=group_id,
            state=description.state.value,
            generation=description.generation,
            protocol=description.protocol,
            leader=description.leader,
            coordinator=description.coordinator,
            members=rows,
            rebalances=self._rebalances(since),
        )

        def label_of(member_id: str) -> str:
            number = number_of.get(member_id)
            return member_id if number is None else f"c{number}"

        members = set(assigned)
        expected = {c.member_id for c in running.values()}
        waiting_for: str | None = None
        if description.coordinator is None:
            waiting_for = "a live coordinator for the group"
        elif not running:
            if members:
                waiting_for = f"the group to empty (members: {labels(map(label_of, members))})"
        elif description.state is not GroupState.STABLE:
            waiting_for = f"state Stable (it is {description.state.value})"
        elif members != expected:
            waiting_for = (
                f"members {labels(map(label_of, expected))} (the group has "
                f"{labels(map(label_of, members))})"
            )
        else:
            waiting_for = self._ownership_problem(
                running, description.generation, description.coordinator
            )
        return Observation(snapshot, waiting_for)

    def _ownership_problem(
        self, running: dict[int, Consumer], generation: int, coordinator: int
    ) -> str | None:
        for number, consumer in sorted(running.items()):
            if consumer.state is not ConsumerState.STABLE or consumer.generation != generation:
                return (
                    f"consumer c{number} to hold generation {generation} (it is "
                    f"{consumer.state.value} in generation {consumer.generation})"
                )
            if consumer.coordinator != coordinator:
                # It commits through the coordinator it knows: wait until it found the new one.
                return (
                    f"consumer c{number} to find coordinator {coordinator} (it knows "
                    f"{consumer.coordinator})"
                )
        owners = Counter(tp for c in running.values() for tp in c.assignment())
        unowned = self.universe - set(owners)
        doubled = sorted(tp for tp, n in owners.items() if n > 1)
        if unowned:
            return f"an owner for {len(unowned)} partition(s), e.g. {sorted(unowned)[0]}"
        if doubled:
            return f"a single owner for {len(doubled)} partition(s), e.g. {doubled[0]}"
        return None

    def _rebalances(self, since: float) -> list[RebalanceRow]:
        records = sorted(
            (r for r in self.history.rebalances(self.settings.group_id) if r.completed >= since),
            key=lambda r: r.completed,
        )
        rows = []
        window_start = since
        for record in records:
            rows.append(self._row(record, window_start))
            window_start = record.completed
        return rows

    def _row(self, record: RebalanceCompleted, window_start: float) -> RebalanceRow:
        unavailable = self.history.unavailability(
            record.group_id, start=min(window_start, record.started), end=record.completed
        )
        return RebalanceRow(
            generation=record.generation,
            reason=record.reason,
            rounds=record.rounds,
            duration=record.duration,
            unowned=unavailable.partitions,
            partition_seconds=unavailable.partition_seconds,
        )
