"""The lab's ``coordinator-placement`` workload and its metrics: where group-coordinator
strategies put the coordinators of groups and transactional ids, and how many move.

A case is a population of ids and a cluster. Group ids (on ``__consumer_offsets``) and
transactional ids (on ``__transaction_state``) are named by a scheme (``naming``):

* ``sequential`` — ``app-0``, ``app-1``, ... and ``producer-0``, ... (generated names);
* ``uuid`` — random UUIDs (drawn from the seed), as frameworks name throw-away groups;
* ``prefixed`` — a few service prefixes with numbered suffixes, ``svc3-orders-17`` and
  ``svc3-orders-txn-17`` (Streams' and Flink's ``<application>-<task>`` style);
* ``mixed`` — each id draws one of the three.

Every id carries a traffic weight: Zipf over a seeded ranking of the ids (``zipf`` the exponent;
0 gives every id the same weight), the requests its coordinator serves. Both internal topics
are placed by a registered replica placement (``placement``; by default ``kafka``, Kafka's own:
round-robin preferred leaders from a seeded start broker, followers at a growing shift, as
``AdminUtils.assignReplicasToBrokers`` without racks, which is also what the engine's default
``kafka-rack-aware`` does on brokers without racks), and each partition is led by its preferred
replica. Every strategy meets the same ids, weights and layouts.

Three steps per strategy:

0. ``initial``: ``partitions`` partitions per internal topic on ``brokers`` brokers;
1. ``resize``: both topics recreated with ``resized_partitions`` (``offsets.topic.num.partitions``
   and ``transaction.state.log.num.partitions`` changed for a new cluster, or a migration: Kafka
   never resizes them in place), the first partitions keeping their replicas and the new ones
   placed after them as Kafka adds partitions;
2. ``broker-failure``: a seeded broker fails; each partition it led goes to its first live
   replica (Kafka's offline election with every replica in sync).

Metrics (kind ``coordinators``), per step:

* ``coordinator-id-balance``: most ids one live broker coordinates over the mean (1 is even);
* ``coordinator-traffic-balance``: the same over the ids' traffic weights;
* ``coordinator-partition-balance``: most ids on one partition of an internal topic over that
  topic's mean (the worse topic; the hash alone, whatever the leaders);
* ``coordinators-moved``: the fraction of ids whose coordinator moved in the step (its partition
  changed, so its state must move, or its partition's leader did; an id whose partition lost
  every replica, with a replication factor of 1, has none and counts as moved);
* ``coordinator-traffic-moved``: the same, weighted by traffic.
"""

from __future__ import annotations

import functools
import random
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from coordkit.errors import UnknownNameError
from coordkit.lab import FunctionMetric, LabError, refuse_out_of_range, resolve_params
from coordkit.strategies.elections import ElectionKind, offline_partition_leader
from coordkit.strategies.placement import brokers_from

if TYPE_CHECKING:
    from coordkit.kafka.coordinators import GroupCoordinatorSelection
    from coordkit.plugins import PluginManager
    from coordkit.strategies.placement import ReplicaPlacement

COORDINATORS_KIND = "coordinators"
NAMINGS = ("sequential", "uuid", "prefixed", "mixed")
#: The internal topics a coordinator is chosen on: groups', then transactional ids'.
OFFSETS, STATE = "__consumer_offsets", "__transaction_state"
#: Service names the ``prefixed`` scheme numbers its ids under.
SERVICES = ("orders", "payments", "inventory", "billing", "search", "shipping", "fraud", "ledger")


@attrs.frozen
class PlacementCase:
    """The ids (with their internal topic and traffic weight) and the cluster's layouts."""

    group_ids: tuple[str, ...]
    transactional_ids: tuple[str, ...]
    weights: tuple[float, ...]  # group ids' first, then transactional ids'
    brokers: int
    partitions: int
    resized_partitions: int
    #: Replicas per partition, preferred leader first, per internal topic, at each size.
    replicas: Mapping[str, Mapping[int, tuple[int, ...]]]
    failed_broker: int


@attrs.frozen
class CoordinatorStep:
    """Where one strategy put every id's coordinator after a step."""

    index: int
    event: str
    event_kind: str
    members: int  # live brokers
    partitions: int  # partitions per internal topic
    ids: int
    id_balance: float
    traffic_balance: float
    partition_balance: float
    moved: float | None  # fraction of ids whose coordinator moved (None: the first step)
    traffic_moved: float | None
    kind: str = COORDINATORS_KIND


class CoordinatorPlacementWorkload:
    """Registered as workload ``coordinator-placement`` (kind ``coordinators``)."""

    name = "coordinator-placement"
    kind = COORDINATORS_KIND
    strategy_kind = "group coordinator"
    description = (
        "group and transactional ids (sequential, UUID, prefixed names; Zipf traffic) on Kafka's "
        "placement of the internal topics: coordinator balance per broker, and the ids that move "
        "when the topics' partition count changes and when a broker fails"
    )
    defaults: Mapping[str, int | float | bool | str] = {
        "brokers": 6,
        "groups": 2000,
        "transactional_ids": 1000,
        "naming": "mixed",
        "prefixes": 5,
        "zipf": 1.1,
        "partitions": 50,
        "resized_partitions": 60,
        "replication_factor": 3,
        "placement": "kafka",
    }
    presets: Mapping[str, Mapping[str, Any]] = {
        "elections": {"naming": NAMINGS},
    }

    def strategies(self, manager: PluginManager) -> list[str]:
        prefix = f"{ElectionKind.GROUP_COORDINATOR.value}/"
        return sorted(r.name[len(prefix) :] for r in manager.elections if r.name.startswith(prefix))

    def feasible(self, params: Mapping[str, Any]) -> bool:
        return int(params["replication_factor"]) <= int(params["brokers"])

    def cost(self, params: Mapping[str, Any]) -> float:
        ids = int(params["groups"]) + int(params["transactional_ids"])
        return ids * (int(params["partitions"]) + int(params["resized_partitions"])) / 200_000

    def generate(
        self, params: Mapping[str, Any], seed: int, manager: PluginManager | None = None
    ) -> PlacementCase:
        """The ids, weights and layouts of ``seed``; the internal topics are placed by the
        placement the parameters name, registered in ``manager`` (default: the process-wide
        one)."""
        manager = manager or _default_manager()
        resolved = resolve_params(self, params)
        try:
            placement = manager.placement(str(resolved["placement"]))
        except UnknownNameError as exc:
            raise LabError(f"workload {self.name!r} parameter 'placement': {exc}") from None
        brokers, factor = int(resolved["brokers"]), int(resolved["replication_factor"])
        partitions, resized = int(resolved["partitions"]), int(resolved["resized_partitions"])
        groups, transactional = int(resolved["groups"]), int(resolved["transactional_ids"])
        naming, prefixes = str(resolved["naming"]), int(resolved["prefixes"])
        zipf = float(resolved["zipf"])
        refuse_out_of_range(
            self.name,
            [
                ("brokers", brokers, brokers >= 2, ">= 2"),
                ("replication_factor", factor, 1 <= factor <= brokers, "1..brokers"),
                ("partitions", partitions, partitions >= 1, ">= 1"),
                ("resized_partitions", resized, resized >= 1, ">= 1"),
                ("groups", groups, groups >= 0, ">= 0"),
                ("transactional_ids", transactional, transactional >= 0, ">= 0"),
                ("ids", groups + transactional, groups + transactional >= 1, "groups + "
                 "transactional_ids >= 1"),
                ("naming", naming, naming in NAMINGS, " or ".join(NAMINGS)),
                ("prefixes", prefixes, prefixes >= 1, ">= 1"),
                ("zipf", zipf, zipf >= 0, ">= 0"),
            ],
        )  # fmt: skip
        rng = random.Random(seed)
        group_ids = _names(rng, groups, naming, prefixes, transactional=False)
        transactional_ids = _names(rng, transactional, naming, prefixes, transactional=True)
        ranks = list(range(1, groups + transactional + 1))
        rng.shuffle(ranks)
        weights = tuple(1.0 / rank**zipf for rank in ranks)
        replicas = {
            topic: _layout(
                placement, topic, brokers, factor, partitions, resized, random.Random(rng.random())
            )
            for topic in (OFFSETS, STATE)
        }
        return PlacementCase(
            group_ids=group_ids,
            transactional_ids=transactional_ids,
            weights=weights,
            brokers=brokers,
            partitions=partitions,
            resized_partitions=resized,
            replicas=replicas,
            failed_broker=rng.randrange(brokers),
        )

    def simulate(
        self,
        params: Mapping[str, Any],
        seed: int,
        strategy: str,
        manager: PluginManager | None = None,
    ) -> Iterator[CoordinatorStep]:
        manager = manager or _default_manager()
        selection = manager.group_coordinator_selection(strategy)
        case = self.generate(params, seed, manager)
        return _simulate(case, selection)


def _default_manager() -> PluginManager:
    from coordkit.plugins import get_plugin_manager

    return get_plugin_manager()


def _names(
    rng: random.Random, count: int, naming: str, prefixes: int, *, transactional: bool
) -> tuple[str, ...]:
    services = [f"svc{n}-{SERVICES[n % len(SERVICES)]}" for n in range(prefixes)]
    numbered: dict[str, int] = {}
    names = []
    for n in range(count):
        scheme = rng.choice(NAMINGS[:3]) if naming == "mixed" else naming
        if scheme == "sequential":
            names.append(f"producer-{n}" if transactional else f"app-{n}")
        elif scheme == "uuid":
            names.append(str(uuid.UUID(int=rng.getrandbits(128), version=4)))
        else:
            service = rng.choice(services)
            numbered[service] = numbered.get(service, -1) + 1
            middle = "-txn" if transactional else ""
            names.append(f"{service}{middle}-{numbered[service]}")
    return tuple(names)


def _layout(
    placement: ReplicaPlacement,
    topic: str,
    brokers: int,
    factor: int,
    partitions: int,
    resized: int,
    rng: random.Random,
) -> dict[int, tuple[int, ...]]:
    """Replicas of the larger of both sizes: the first ``partitions`` as Kafka creates the topic,
    the rest as Kafka adds partitions to it (the smaller size keeps the first ones)."""
    metadata = brokers_from(list(range(brokers)))
    layout = {
        p: tuple(r)
        for p, r in placement.place(metadata, partitions, factor, rng=rng, topic=topic).items()
    }
    if resized > partitions:
        # The partitions added, as the engine's CreatePartitions asks its placement for them.
        added = placement.place(
            metadata, resized - partitions, factor, existing=layout, rng=rng, topic=topic
        )
        layout.update((p, tuple(r)) for p, r in added.items())
    return layout


def _simulate(
    case: PlacementCase, selection: GroupCoordinatorSelection
) -> Iterator[CoordinatorStep]:
    ids = [(OFFSETS, i) for i in case.group_ids] + [(STATE, i) for i in case.transactional_ids]
    everyone = tuple(range(case.brokers))
    live = everyone
    before: list[tuple[int, int]] | None = None
    steps = (
        ("initial", "initial", case.partitions, everyone),
        (f"resize {case.partitions} -> {case.resized_partitions} partitions", "resize",
         case.resized_partitions, everyone),
        (f"broker {case.failed_broker} fails", "broker-failure", case.resized_partitions,
         tuple(b for b in everyone if b != case.failed_broker)),
    )  # fmt: skip
    for index, (event, event_kind, count, live) in enumerate(steps):
        leaders = {
            topic: {
                p: offline_partition_leader(case.replicas[topic][p], live, live, False)
                for p in range(count)
            }
            for topic in (OFFSETS, STATE)
        }
        # A partition without a live replica (replication factor 1) has no coordinator:
        # FindCoordinator answers COORDINATOR_NOT_AVAILABLE for its ids (-1, counted as moved).
        placed = []
        for topic, name in ids:
            partition = selection.partition_for(name, count)
            leader = leaders[topic][partition]
            placed.append((partition, -1 if leader is None else leader))
        yield _observe(index, event, event_kind, case, ids, count, live, placed, before)
        before = placed


def _observe(
    index: int,
    event: str,
    event_kind: str,
    case: PlacementCase,
    ids: Sequence[tuple[str, str]],
    count: int,
    live: Sequence[int],
    placed: Sequence[tuple[int, int]],
    before: Sequence[tuple[int, int]] | None,
) -> CoordinatorStep:
    per_broker = dict.fromkeys(live, 0)
    traffic = dict.fromkeys(live, 0.0)
    per_partition: dict[tuple[str, int], int] = {}
    for (topic, _name), (partition, leader), weight in zip(ids, placed, case.weights, strict=True):
        if leader in per_broker:
            per_broker[leader] += 1
            traffic[leader] += weight
        per_partition[(topic, partition)] = per_partition.get((topic, partition), 0) + 1
    moved = traffic_moved = None
    if before is not None:
        changed = [old != new for old, new in zip(before, placed, strict=True)]
        moved = sum(changed) / len(ids)
        traffic_moved = sum(w for w, c in zip(case.weights, changed, strict=True) if c) / sum(
            case.weights
        )
    return CoordinatorStep(
        index=index,
        event=event,
        event_kind=event_kind,
        members=len(live),
        partitions=count,
        ids=len(ids),
        id_balance=_max_over_mean(per_broker.values(), len(live)),
        traffic_balance=_max_over_mean(traffic.values(), len(live)),
        partition_balance=max(
            _max_over_mean([n for (t, _), n in per_partition.items() if t == topic], count)
            for topic in {topic for topic, _ in ids}
        ),
        moved=moved,
        traffic_moved=traffic_moved,
    )


def _max_over_mean(values: Iterable[float], slots: int) -> float:
    """Largest value over the mean across ``slots`` (the ones absent count as 0)."""
    values = list(values)
    total = sum(values)
    return max(values) / (total / slots) if total else 1.0


# -- metrics -------------------------------------------------------------------------------------


CoordinatorMetric = functools.partial(
    FunctionMetric, kinds=(COORDINATORS_KIND,), step_type=CoordinatorStep
)

COORDINATOR_METRICS = (
    CoordinatorMetric(
        "coordinator-id-balance",
        "most ids one live broker coordinates over the mean per live broker (1: even)",
        "max/mean",
        "lower",
        lambda step: step.id_balance,
        headline="Which spreads coordinators most evenly over the brokers?",
        tradeoff="balance",
    ),
    CoordinatorMetric(
        "coordinator-traffic-balance",
        "most Zipf-weighted traffic one live broker coordinates over the mean (1: even)",
        "max/mean",
        "lower",
        lambda step: step.traffic_balance,
        tradeoff="balance",
    ),
    CoordinatorMetric(
        "coordinator-partition-balance",
        "most ids on one partition of an internal topic over its mean (the hash alone)",
        "max/mean",
        "lower",
        lambda step: step.partition_balance,
    ),
    CoordinatorMetric(
        "coordinators-moved",
        "fraction of ids whose coordinator moved in the step (partition or its leader changed)",
        "fraction",
        "lower",
        lambda step: step.moved,
        headline="Which moves fewest coordinators when the topic is resized or a broker fails?",
        tradeoff="movement",
    ),
    CoordinatorMetric(
        "coordinator-traffic-moved",
        "fraction of the Zipf-weighted traffic whose coordinator moved in the step",
        "fraction",
        "lower",
        lambda step: step.traffic_moved,
    ),
)

COORDINATOR_PLACEMENT = CoordinatorPlacementWorkload()
