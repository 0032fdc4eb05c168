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

Unclean: there is no ZooKeeper node for it (Kafka 3.9's brokers handed it to their controller
in-process), so the request goes to the engine's controller itself: in this process when one of
its brokers holds it, else forwarded to the controller broker as an ElectLeaders request (as a
KRaft broker forwards it), which answers from its own process. The controller elects each
partition without a live leader: the first live in-sync replica, else the first live replica,
whatever the topic's ``unclean.leader.election.enable`` says (Kafka's ``Election.UNCLEAN``).

Under an authorizer it needs Alter on the cluster: else CLUSTER_AUTHORIZATION_FAILED, top-level
and for each partition named, and nothing elected (Kafka's ``KafkaApis.handleElectLeaders``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from coordkit.engine.controllership import read_controller
from coordkit.engine.errors import InvalidReplicaAssignmentError
from coordkit.engine.snapshot import ClusterView, PartitionView, read_view
from coordkit.engine.states import TP
from coordkit.errors import CoordkitError, LayoutError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.acls import AclOperation
from coordkit.kafka.layout import PREFERRED_REPLICA_ELECTION
from coordkit.kafka.model import NO_LEADER
from coordkit.protocol import KafkaCodec, ProtocolError, Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import CLUSTER_AUTHORIZATION_FAILED, cluster_allowed
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

log = logging.getLogger("coordkit.serve")

Response = messages.ElectLeadersResponse
TopicResult = nested(Response, "ReplicaElectionResult")
PartitionResult = nested(Response, "PartitionResult")

VERSIONS = (0, 2)
PREFERRED = 0
UNCLEAN = 1
#: The version and client id of an unclean election forwarded to the controller broker.
FORWARD_VERSION = 2
FORWARD_CLIENT = "coordkit-forwarded"
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
        return await _elect_unclean(ctx, tps, deadline)
    if not await _until(ctx, lambda: _request_election(ctx, tps), deadline):
        return False
    return await _until(ctx, lambda: not _pending(ctx), deadline)


def _controller_of(ctx: BrokerContext) -> tuple[int, Any, tuple[str, int] | None] | None:
    """The controller's id, its engine controller when a broker of this process holds it, and
    else its address (store work)."""
    found = read_controller(ctx.broker.store)
    if found is None:
        return None
    controller_id = found[0].broker_id
    network = ctx.broker.network
    holder = network.get(controller_id) if network is not None else None
    if holder is not None and holder.controller is not None and holder.controller.active:
        return controller_id, holder.controller, None
    path = layout.broker_path(controller_id)
    info = layout.BROKER.decode(ctx.broker.store.get(path)[0], path)
    return controller_id, None, ctx.connector.address_of(info)


async def _elect_unclean(ctx: BrokerContext, tps: list[TP], deadline: float) -> bool:
    try:
        found = await ctx.blocking(lambda: _controller_of(ctx))
    except (CoordkitError, LayoutError) as exc:
        log.warning("broker %s: no controller for an unclean election: %s", ctx.broker_id, exc)
        return False
    if found is None:
        return False
    remaining = max(0.0, deadline - time.monotonic())
    _, controller, address = found
    if controller is not None:
        future = asyncio.wrap_future(controller.elect_unclean_leaders(tps))
        try:
            # Shielded: a wait that times out must not cancel the controller's work.
            await asyncio.wait_for(asyncio.shield(future), remaining)
        except TimeoutError:
            return False
        except CoordkitError as exc:
            log.warning("broker %s: unclean election failed: %s", ctx.broker_id, exc)
            return False
        return True
    assert address is not None
    try:
        await asyncio.wait_for(_forward(ctx, address, tps, remaining), remaining)
    except (TimeoutError, OSError, ProtocolError) as exc:
        log.warning("broker %s: unclean election not forwarded to %s: %s", ctx.broker_id,
                    address, exc)  # fmt: skip
        return False
    return True


async def _forward(ctx: BrokerContext, address: tuple[str, int], tps: list[TP],
                   seconds: float) -> None:  # fmt: skip
    """The unclean election, asked of the controller broker at ``address`` (its inter-broker
    listener, through the process's connector)."""
    request: Any = messages.ElectLeadersRequest
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    body = request(election_type=UNCLEAN, timeout_ms=int(seconds * 1000), topic_partitions=[
        request.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()])  # fmt: skip
    codec = KafkaCodec()
    reader, writer = await ctx.connector.open(address, seconds)
    try:
        writer.write(codec.encode_request(body, version=FORWARD_VERSION, correlation_id=1,
                                          client_id=FORWARD_CLIENT))  # fmt: skip
        await writer.drain()
        size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
        codec.decode_response("ElectLeaders", FORWARD_VERSION, await reader.readexactly(size))
    finally:
        writer.close()


def _refused(request: Request) -> Any:
    """CLUSTER_AUTHORIZATION_FAILED for the request and each partition it names."""
    by_topic: dict[str, list[Any]] = {}
    for t in request.body.topic_partitions or []:
        for p in dict.fromkeys(t.partitions):
            by_topic.setdefault(t.topic, []).append(PartitionResult(
                partition_id=p, error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=None))  # fmt: skip
    return Response(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                    replica_election_results=[TopicResult(topic=t, partition_result=ps)
                                              for t, ps in by_topic.items()])  # fmt: skip


async def handle_elect_leaders(ctx: BrokerContext, request: Request) -> Any:
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return _refused(request)
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
