"""The ``share-groups`` workload and its metrics (kind ``share-groups``).

Per scenario: coordkit's Kafka server in a process of its own (``brokers`` brokers on a private
memory store, one topic of ``partitions`` partitions, replication factor 2), a producer process
sending ``rate`` records a second (acks=all, the send time in each value), and one share group of
``consumers`` confluent-kafka ``ShareConsumer`` processes (explicit acknowledgements), each
accepting what it gets but for a seeded share of first deliveries it releases (``release``) or
rejects (``reject``). The strategy is the share-partition assignor the brokers use
(``group.share.assignors``): one per registered share assignor (``simple``, ``load-balanced``,
``rack-aware``, a third party's), and the reference row ``simple@kafka``: the same run with Apache
Kafka 4.4 as the brokers (KRaft, one controller never crashed, Kafka's own ``simple`` assignor;
the jars of ``bash kafka-dist/fetch.sh``).

The records' lock is ``lock_ms`` (``group.share.record.lock.duration.ms``), the members' session
``session_ms`` (``group.share.session.timeout.ms``, the heartbeat a fifth of it), on both kinds of
brokers. A seeded schedule of ``events`` then runs, ``gap`` seconds apart: a member joins, one is
killed with SIGKILL (its acquired records come back after their lock, its partitions after its
session), one restarts (acknowledges, leaves, a new process joins), or one stalls for one and a
half locks holding the records it just got, then accepts them (a slow consumer: the brokers have
given them to others, or to it again, by then). Brokers are not crashed here (no event of the
schedule does it, though the brokers' host, :mod:`coordkit.lab.serve_host`, could): a share
partition's acquisitions are not persisted, on Kafka as on coordkit, so a crash would release them
all at once.

Every member records each delivery (with the brokers' delivery count) and the brokers' answer to
each acknowledgement; the steps (one window per event, see :mod:`.analysis`) give the metrics:
``share-delivery-balance-cv``, ``share-redeliveries``, ``share-records-held-past-lock``,
``share-duplicates-accepted``, ``share-records-lost`` (must be 0), ``share-records-unconfirmed``
and the latencies send → first
delivery and send → acceptance (p50, p99).

Events repeat with the seed, and so does which records are released or rejected; timings vary
from run to run (processes on a shared machine).
"""

from __future__ import annotations

import functools
import importlib.util
import random
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from coordkit.errors import MissingDependencyError
from coordkit.lab import FunctionMetric, LabError, refuse_out_of_range
from coordkit.lab.kafka_host import require_kafka
from coordkit.plugins import get_plugin_manager
from coordkit_share_assignors.lab.analysis import SHARE_KIND, ShareStep
from coordkit_share_assignors.lab.run import RunSpec, ShareEvent, run_share_groups

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager

Param = int | float | bool | str

KAFKA_SUFFIX = "@kafka"
#: The reference row: Kafka 4.4's brokers with their own share assignor.
KAFKA_STRATEGIES: tuple[str, ...] = (f"simple{KAFKA_SUFFIX}",)
ACTIONS = ("join", "crash", "restart", "stall")
#: confluent-kafka's first release with ``ShareConsumer``.
CLIENT_PACKAGE = "confluent-kafka>=2.16"


def all_strategies(manager: PluginManager | None = None) -> list[str]:
    """Every registered share assignor on coordkit, then Kafka's row."""
    names = [r.name for r in (manager or get_plugin_manager()).share_assignors]
    return [*names, *KAFKA_STRATEGIES]


def parse_strategy(strategy: str, manager: PluginManager | None = None) -> tuple[str, str]:
    """``"simple@kafka"`` → (``"simple"``, ``"kafka"``); unknown ones are refused in one line."""
    known = all_strategies(manager)
    if strategy not in known:
        raise LabError(
            f"workload 'share-groups' has no strategy {strategy!r}; its strategies: "
            f"{', '.join(known)}"
        )
    name, kafka, _ = strategy.partition(KAFKA_SUFFIX)
    return name, "kafka" if kafka else "coordkit"


def require_client() -> None:
    """Refuse at once, naming the package, without confluent-kafka's ``ShareConsumer``."""
    found = importlib.util.find_spec("confluent_kafka") is not None
    if found:
        import confluent_kafka

        found = hasattr(confluent_kafka, "ShareConsumer")
    if not found:
        raise MissingDependencyError(
            "the share-groups workload needs confluent-kafka's ShareConsumer: "
            f"pip install '{CLIENT_PACKAGE}'"
        )


class ShareGroupsWorkload:
    """Registered as workload ``share-groups`` (kind ``share-groups``)."""

    name = "share-groups"
    kind = SHARE_KIND
    strategy_kind = "share assignor"
    description = (
        "a share group of real ShareConsumer processes (confluent-kafka) on coordkit serve "
        "through seeded joins, SIGKILLs, restarts and stalls past the record lock, a producer "
        "sending throughout, some records released or rejected"
    )
    defaults: Mapping[str, Param] = {
        "brokers": 3,
        "partitions": 6,
        "consumers": 3,
        "events": 3,
        "rate": 100.0,
        "lock_ms": 3000,
        "session_ms": 6000,
        "release": 0.02,
        "reject": 0.01,
        "gap": 2.0,
    }

    def strategies(self, manager: PluginManager) -> list[str]:
        return all_strategies(manager)

    def feasible(self, params: Mapping[str, Any]) -> bool:
        return int(params["brokers"]) >= 2 and int(params["consumers"]) >= 1

    def cost(self, params: Mapping[str, Any]) -> float:
        # Start-up costs about two events; a crash waits a lock and a session.
        slow = (float(params["lock_ms"]) + float(params["session_ms"])) / 1e3
        return (int(params["events"]) + 2) * (1 + float(params["gap"]) + slow / 2)

    def generate(self, params: Mapping[str, Any], seed: int) -> RunSpec:
        brokers, partitions = int(params["brokers"]), int(params["partitions"])
        consumers, rate = int(params["consumers"]), float(params["rate"])
        release, reject = float(params["release"]), float(params["reject"])
        refuse_out_of_range(self.name, (
            ("brokers", brokers, brokers >= 2, ">= 2"),
            ("partitions", partitions, 1 <= partitions <= 1000, "1..1000"),
            ("consumers", consumers, 1 <= consumers <= 50, "1..50"),
            ("events", params["events"], 0 <= int(params["events"]) <= 100, "0..100"),
            ("rate", rate, 1 <= rate <= 5000, "1..5000 records/s"),
            ("lock_ms", params["lock_ms"], 1000 <= int(params["lock_ms"]) <= 60_000,
             "1000..60000"),
            ("session_ms", params["session_ms"], int(params["session_ms"]) >= 1000, ">= 1000"),
            ("release", release, 0 <= release <= 0.5, "0..0.5"),
            ("reject", reject, 0 <= reject <= 0.5, "0..0.5"),
            ("gap", params["gap"], 0 <= float(params["gap"]) <= 60, "0..60 s"),
        ))  # fmt: skip
        rng = random.Random(seed)
        live = consumers
        events = []
        for _ in range(int(params["events"])):
            choices = [
                a for a in ACTIONS if (a != "crash" or live > 1) and (a != "join" or live < 50)
            ]
            action = rng.choice(choices)
            live += {"join": 1, "crash": -1}.get(action, 0)
            events.append(ShareEvent(action, rng.randrange(1 << 16)))
        return RunSpec(
            brokers=brokers,
            partitions=partitions,
            replication_factor=2,
            consumers=consumers,
            rate=rate,
            lock_ms=int(params["lock_ms"]),
            session_ms=int(params["session_ms"]),
            release=release,
            reject=reject,
            gap=float(params["gap"]),
            seed=seed,
            events=tuple(events),
        )

    def simulate(
        self,
        params: Mapping[str, Any],
        seed: int,
        strategy: str,
        manager: PluginManager | None = None,
    ) -> Iterator[ShareStep]:
        assignor, broker = parse_strategy(strategy, manager)
        require_client()
        if broker == "kafka":
            require_kafka("the share-groups strategy simple@kafka")
        spec = attrs.evolve(
            self.generate({**self.defaults, **params}, seed), assignor=assignor, broker=broker
        )
        # The whole run happens here, its processes gone before it returns: the runner's
        # lockstep never has two strategies' processes running at once.
        return iter(run_share_groups(spec, strategy))


# -- metrics -------------------------------------------------------------------------------------

ShareMetric = functools.partial(FunctionMetric, kinds=(SHARE_KIND,), step_type=ShareStep)

SHARE_METRICS = (
    ShareMetric(
        "share-delivery-balance-cv",
        "coefficient of variation of the records delivered per second to each member running at "
        "the window's end (0: every member got as many)",
        "cv",
        "lower",
        lambda s: s.balance_cv,
        headline="Which share assignor spreads deliveries most evenly over the members?",
        tradeoff="balance",
    ),
    ShareMetric(
        "share-redeliveries",
        "deliveries beyond a record's first in the window (released, or its lock lapsed)",
        "deliveries",
        "lower",
        lambda s: float(s.redeliveries),
    ),
    ShareMetric(
        "share-records-held-past-lock",
        "records delivered again without having been released: their acquisition lapsed (a "
        "member stalled past the lock, was killed, or left holding them)",
        "records",
        "lower",
        lambda s: float(s.held_past_lock),
        headline="Which share assignor lets fewest records sit out their lock?",
        tradeoff="interruption",
    ),
    ShareMetric(
        "share-duplicates-accepted",
        "acceptances the brokers confirmed for a record already accepted (0 unless a lapsed "
        "lock let two members accept it)",
        "records",
        "lower",
        lambda s: float(s.duplicates_accepted),
    ),
    ShareMetric(
        "share-records-lost",
        "acknowledged records sent in the window that no member accepted or rejected (must be 0)",
        "records",
        "lower",
        lambda s: float(s.lost),
    ),
    ShareMetric(
        "share-records-unconfirmed",
        "records sent in the window, unsettled, that a member killed before it logged the brokers' "
        "answer to its acknowledgement had got (the brokers may have applied it)",
        "records",
        "lower",
        lambda s: float(s.unconfirmed),
    ),
    ShareMetric(
        "share-delivery-latency-p50-ms",
        "median milliseconds from send to first delivery, records sent in the window",
        "ms",
        "lower",
        lambda s: s.delivery_latency_ms(0.5),
    ),
    ShareMetric(
        "share-delivery-latency-p99-ms",
        "99th-percentile milliseconds from send to first delivery, records sent in the window",
        "ms",
        "lower",
        lambda s: s.delivery_latency_ms(0.99),
    ),
    ShareMetric(
        "share-accept-latency-p50-ms",
        "median milliseconds from send to the brokers' confirmed acceptance, records sent in "
        "the window",
        "ms",
        "lower",
        lambda s: s.accept_latency_ms(0.5),
    ),
    ShareMetric(
        "share-accept-latency-p99-ms",
        "99th-percentile milliseconds from send to the brokers' confirmed acceptance, records "
        "sent in the window (a lapsed lock's records wait it out)",
        "ms",
        "lower",
        lambda s: s.accept_latency_ms(0.99),
        headline="Which share assignor keeps tail latency lowest through joins, kills and stalls?",
    ),
)

SHARE_GROUPS = ShareGroupsWorkload()
