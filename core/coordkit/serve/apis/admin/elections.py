"""ElectLeaders (KIP-460): preferred and unclean leader elections, asked of the controller.

The controller's logic is the engine's: a preferred election is requested the way Kafka's
ZooKeeper-mode tools request it, by writing ``/admin/preferred_replica_election``
(:meth:`TopicAdmin.elect_preferred_leaders`); the engine's controller, wherever it runs, elects
and deletes the node. Any broker takes the request (a KRaft broker forwards it to its
controller), waits for the node to go (at most the request's ``timeout_ms``, then
REQUEST_TIMED_OUT), and answers from the partition states the controller wrote.

Each partition is judged first as Kafka 4's ``ReplicationControlManager.electLeader`` judges it:
unknown (UNKNOWN_TOPIC_OR_PARTITION, "No such topic as T" / "No such partition as T-P"); already
led by its preferred replica, or (unclean) by a live broker: ELECTION_NOT_NEEDED; a preferred
replica that is not live or not in the ISR: PREFERRED_LEADER_NOT_AVAILABLE. Topics null: every
partition, and only the ones that needed an election are answered.

Unclean: a partition without a live leader is elected by the controller's own rules (an ISR
member when one is live; outside the ISR only where the topic's
``unclean.leader.election.enable`` allows it), so one whose every live replica is outside the ISR
stays leaderless: ELIGIBLE_LEADERS_NOT_AVAILABLE (Kafka elects such a replica on request).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from coordkit.engine.errors import InvalidReplicaAssignmentError
from coordkit.engine.snapshot import ClusterView, PartitionView, read_view
from coordkit.engine.states import TP
from coordkit.errors import NoNodeError, StoreError
from coordkit.kafka.layout import PREFERRED_REPLICA_ELECTION
from coordkit.kafka.model import NO_LEADER
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

log = logging.getLogger("coordkit.serve")

Response = messages.ElectLeadersResponse
TopicResult = nested(Response, "ReplicaElectionResult")
PartitionResult = nested(Response, "PartitionResult")

VERSIONS = (0, 2)
PREFERRED = 0
UNCLEAN = 1
#: How often a waiting request looks at the store again (seconds).
POLL_SECONDS = 0.05
#: Kafka's messages (``Errors.*.message()``) where its controller gives none of its own.
MESSAGES = {
    errors.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    errors.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    errors.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
    errors.REQUEST_TIMED_OUT: "The request timed out.",
}

Outcome = tuple[int, str | None]


def _judge(view: ClusterView, tp: TP, kind: int, topics: set[str]) -> Outcome | None:
    """The answer for ``tp`` without an election, or ``None`` when it needs one."""
    topic, partition = tp
    if topic not in topics:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    try:
        found: PartitionView = view.partition(topic, partition)
    except KeyError:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
    live = set(view.brokers)
    if kind == UNCLEAN:
        if found.leader != NO_LEADER and found.leader in live:
            return _coded(errors.ELECTION_NOT_NEEDED)
        if not any(r in live for r in found.replicas):
            return _coded(errors.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        return None
    preferred = found.replicas[0] if found.replicas else NO_LEADER
    if found.leader == preferred:
        return _coded(errors.ELECTION_NOT_NEEDED)
    if preferred not in live or preferred not in found.isr:
        return _coded(errors.PREFERRED_LEADER_NOT_AVAILABLE)
    return None


def _coded(code: int) -> Outcome:
    return code, MESSAGES.get(code)


def _outcome(view: ClusterView, tp: TP, kind: int) -> Outcome:
    """The answer for ``tp`` once the controller acted."""
    try:
        found = view.partition(*tp)
    except KeyError:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {tp[0]}-{tp[1]}"
    live = set(view.brokers)
    if kind == UNCLEAN:
        elected = found.leader != NO_LEADER and found.leader in live
        return (errors.NONE, None) if elected else _coded(errors.ELIGIBLE_LEADERS_NOT_AVAILABLE)
    if found.replicas and found.leader == found.replicas[0]:
        return errors.NONE, None
    return _coded(errors.PREFERRED_LEADER_NOT_AVAILABLE)


def _asked(request: Request, view: ClusterView) -> tuple[list[TP], bool]:
    """The partitions asked for, and whether the request named them (not null: every one)."""
    named = request.body.topic_partitions
    if named is None:
        every = sorted(p.tp for p in view.partitions) + sorted(view.uninitialised)
        return every, False
    return [(t.topic, p) for t in named for p in t.partitions], True


def _request_election(ctx: BrokerContext, tps: Sequence[TP]) -> bool:
    """Write the preferred election request; ``False`` while another one is pending."""
    try:
        ctx.admin.elect_preferred_leaders(tps)
    except InvalidReplicaAssignmentError:
        return False
    return True


def _pending(ctx: BrokerContext) -> bool:
    try:
        ctx.broker.store.get(PREFERRED_REPLICA_ELECTION)
    except NoNodeError:
        return False
    return True


async def _until(ctx: BrokerContext, done: Any, deadline: float) -> bool:
    """Poll ``done`` (store work) until it is true or ``deadline`` passes."""
    while True:
        if await ctx.blocking(done):
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(POLL_SECONDS)


async def _elect(ctx: BrokerContext, tps: list[TP], kind: int, deadline: float) -> bool:
    """Have the controller elect ``tps``; whether it acted before ``deadline``."""
    if kind == UNCLEAN:
        # The controller elects a leaderless partition on its own when it can: give it until
        # the partitions have a leader or the deadline.
        def led() -> bool:
            view = read_view(ctx.broker.store, sorted({t for t, _ in tps}))
            return all(_outcome(view, tp, UNCLEAN)[0] == errors.NONE for tp in tps)

        await _until(ctx, led, min(deadline, time.monotonic() + 1.0))
        return True
    if not await _until(ctx, lambda: _request_election(ctx, tps), deadline):
        return False
    return await _until(ctx, lambda: not _pending(ctx), deadline)


async def handle_elect_leaders(ctx: BrokerContext, request: Request) -> Any:
    kind = request.body.election_type if request.version >= 1 else PREFERRED
    if kind not in (PREFERRED, UNCLEAN):
        return Response(throttle_time_ms=0, error_code=errors.INVALID_REQUEST,
                        replica_election_results=[])  # fmt: skip
    deadline = time.monotonic() + max(request.body.timeout_ms, 0) / 1000
    try:
        view = await ctx.blocking(lambda: read_view(ctx.broker.store))
    except StoreError as exc:
        log.warning("broker %s: ElectLeaders without the store: %s", ctx.broker_id, exc)
        return Response(throttle_time_ms=0, error_code=errors.NONE, replica_election_results=[])
    tps, named = _asked(request, view)
    topics = {p.topic for p in view.partitions} | {t for t, _ in view.uninitialised}
    results: dict[TP, Outcome] = {}
    needed = []
    for tp in tps:
        judged = _judge(view, tp, kind, topics)
        if judged is None:
            needed.append(tp)
        else:
            results[tp] = judged
    if needed:
        acted = await _elect(ctx, needed, kind, deadline)
        after = await ctx.blocking(
            lambda: read_view(ctx.broker.store, sorted({t for t, _ in needed}))
        )
        for tp in needed:
            results[tp] = _outcome(after, tp, kind) if acted else _coded(errors.REQUEST_TIMED_OUT)
    by_topic: dict[str, list[Any]] = {}
    for tp in tps:
        code, message = results[tp]
        if not named and code == errors.ELECTION_NOT_NEEDED:
            by_topic.setdefault(tp[0], [])
            continue  # asked for every partition: only those that needed an election
        by_topic.setdefault(tp[0], []).append(
            PartitionResult(partition_id=tp[1], error_code=code, error_message=message)
        )
    return Response(
        throttle_time_ms=0,
        error_code=errors.NONE,
        replica_election_results=[
            TopicResult(topic=topic, partition_result=parts) for topic, parts in by_topic.items()
        ],
    )
