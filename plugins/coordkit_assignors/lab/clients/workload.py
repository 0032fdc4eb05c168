"""The ``real-clients`` workload and its metrics (kind ``clients``).

Per scenario: coordkit's Kafka server in a process of its own (``brokers`` brokers on a private
memory store, one topic of ``partitions`` partitions, replication factor 2), a producer process
sending keyed records at ``rate`` a second (acks=all, the send time in each value), and a group
of ``consumers`` consumer processes of one client library with one assignor: the strategy.

* Kafka's classic protocol, ``<client>/<assignor>`` (``kafka-python/range``,
  ``aiokafka/coordkit-sticky``, ``confluent-kafka/cooperative-sticky``; ``coordkit-*`` is
  coordkit's assignor inside the client, :mod:`coordkit.clients`): the group's leader assigns;
* Kafka 4's consumer protocol (KIP-848), ``confluent-kafka/consumer-<assignor>``: the brokers
  assign with that server-side assignor, one strategy per registered one (``uniform``,
  ``range``, ``rack-aware``, ``sticky``, ...; the brokers offer them all in
  ``group.consumer.assignors``); the group's session and heartbeat are the brokers'
  (``session_ms``, a fifth of it);
* the reference rows, ``...@kafka`` (``confluent-kafka/range@kafka``,
  ``confluent-kafka/cooperative-sticky@kafka``, ``confluent-kafka/consumer-uniform@kafka``,
  ``confluent-kafka/consumer-range@kafka``): the same run, schedule and clients with Apache
  Kafka 4.4 as the brokers (KRaft: one controller, which is never crashed, and ``brokers``
  brokers; Kafka's own server assignors; the jars of ``bash kafka-dist/fetch.sh``, see
  :mod:`coordkit.lab.kafka_host`). A broker crash there is a SIGKILL of that broker's JVM.

A seeded schedule of ``events`` then runs: a consumer joins, one is
killed with SIGKILL, one restarts (leaves cleanly, a new process joins), and — unless
``broker_failures`` is false — one broker crashes (at most ``brokers - 2``, so every partition
keeps a replica; leaders and maybe the group's coordinator move). After each event the
workload waits for the group to own every partition again.

Every consumer records its assignments, revocations and each record it receives (with the time);
the steps (one window per event, see :mod:`.analysis`) give the metrics:

* ``clients-rebalance-seconds``: from the event until every partition had an owner again;
* ``clients-disruption-seconds``: from the first partition losing its owner to the last getting
  one again (a join's rebalance without the new process's start-up);
* ``clients-unowned-partition-seconds``: partition-seconds without an owner after the event;
* ``revocations``: partitions taken from consumers (revoked or lost) in the window;
* ``records-consumed-twice``: records delivered again (uncommitted when their owner changed);
* ``records-lost``: acknowledged records no consumer ever received (must be 0);
* ``latency-p50-ms``, ``latency-p99-ms``: send to first receipt, records sent in the window.

Events repeat with the seed; timings vary from run to run (processes on a shared machine).
"""

from __future__ import annotations

import functools
import importlib.util
import random
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from coordkit.errors import MissingDependencyError
from coordkit.lab import FunctionMetric, LabError, refuse_out_of_range
from coordkit.lab.kafka_host import require_kafka
from coordkit.plugins import get_plugin_manager
from coordkit_assignors.lab.clients.analysis import CLIENTS_KIND, ClientStep
from coordkit_assignors.lab.clients.run import (
    KAFKA_SERVER_ASSIGNORS,
    ClientEvent,
    RunSpec,
    run_clients,
)

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager

Param = int | float | bool | str

#: Client library → (module to import, package to install).
CLIENTS: Mapping[str, tuple[str, str]] = {
    "kafka-python": ("kafka", "kafka-python>=3.0"),
    "aiokafka": ("aiokafka", "aiokafka"),
    "confluent-kafka": ("confluent_kafka", "confluent-kafka"),
}

#: The classic protocol's strategies, ``<client>/<assignor>``: the client's own assignors by
#: their Kafka names, coordkit's as ``coordkit-<name>`` (aiokafka rebalances eagerly only;
#: confluent-kafka runs librdkafka's built-in assignors).
CLASSIC_STRATEGIES: tuple[str, ...] = (
    "kafka-python/range",
    "kafka-python/cooperative-sticky",
    "kafka-python/coordkit-sticky",
    "kafka-python/coordkit-cooperative-sticky",
    "aiokafka/roundrobin",
    "aiokafka/coordkit-sticky",
    "confluent-kafka/range",
    "confluent-kafka/cooperative-sticky",
)
#: Kafka 4's consumer protocol (KIP-848): ``confluent-kafka/consumer-<server assignor>``, one per
#: registered server-side assignor (librdkafka is the client that speaks it here).
CONSUMER_PREFIX = "consumer-"
CONSUMER_CLIENT = "confluent-kafka"
#: The reference rows: the same run with Apache Kafka 4.4 as the brokers.
KAFKA_SUFFIX = "@kafka"
KAFKA_STRATEGIES: tuple[str, ...] = (
    "confluent-kafka/range@kafka",
    "confluent-kafka/cooperative-sticky@kafka",
    *(f"{CONSUMER_CLIENT}/{CONSUMER_PREFIX}{a}{KAFKA_SUFFIX}" for a in KAFKA_SERVER_ASSIGNORS),
)

ACTIONS = ("join", "crash", "restart", "broker-failure")


@attrs.frozen
class Strategy:
    """One strategy's parts: ``confluent-kafka/consumer-range@kafka`` is client
    ``confluent-kafka``, protocol ``consumer``, (server) assignor ``range``, broker ``kafka``."""

    client: str
    assignor: str
    protocol: str
    broker: str


def all_strategies(manager: PluginManager | None = None) -> list[str]:
    """Classic, consumer protocol (every registered server assignor), then Kafka's rows."""
    names = (manager or get_plugin_manager()).server_assignor_names()
    consumer = [f"{CONSUMER_CLIENT}/{CONSUMER_PREFIX}{name}" for name in names]
    return [*CLASSIC_STRATEGIES, *consumer, *KAFKA_STRATEGIES]


def parse_strategy(strategy: str, manager: PluginManager | None = None) -> Strategy:
    """``"confluent-kafka/consumer-range@kafka"`` → its parts; unknown ones are refused."""
    known = all_strategies(manager)
    if strategy not in known:
        raise LabError(
            f"workload 'real-clients' has no strategy {strategy!r}; its strategies: "
            f"{', '.join(known)}"
        )
    name, kafka, _ = strategy.partition(KAFKA_SUFFIX)
    client, assignor = name.split("/", 1)
    broker = "kafka" if kafka else "coordkit"
    if assignor.startswith(CONSUMER_PREFIX):
        return Strategy(client, assignor.removeprefix(CONSUMER_PREFIX), "consumer", broker)
    return Strategy(client, assignor, "classic", broker)


def require_client(client: str) -> None:
    """Refuse at once, naming the package, when ``client``'s library is not installed."""
    module, package = CLIENTS[client]
    if importlib.util.find_spec(module) is None:
        raise MissingDependencyError(
            f"the real-clients strategies of {client} need the {client} package: "
            f"pip install '{package}'"
        )


class RealClientsWorkload:
    """Registered as workload ``real-clients`` (kind ``clients``)."""

    name = "real-clients"
    kind = CLIENTS_KIND
    strategy_kind = "client library / assignor"
    description = (
        "a consumer group of real client processes (kafka-python, aiokafka, confluent-kafka) "
        "on coordkit serve through seeded joins, SIGKILLs, restarts and broker crashes, a "
        "producer sending throughout"
    )
    defaults: Mapping[str, Param] = {
        "brokers": 3,
        "partitions": 6,
        "consumers": 3,
        "events": 3,
        "rate": 200.0,
        "session_ms": 4000,
        "gap": 1.0,
        "broker_failures": True,
    }

    def strategies(self, manager: PluginManager) -> list[str]:
        return all_strategies(manager)

    def feasible(self, params: Mapping[str, Any]) -> bool:
        return int(params["brokers"]) >= 2 and int(params["consumers"]) >= 1

    def cost(self, params: Mapping[str, Any]) -> float:
        # Start-up (brokers, clients) costs about as much as two events; a crash waits a session.
        session = float(params["session_ms"]) / 1e3
        return (int(params["events"]) + 2) * (1 + float(params["gap"]) + session / 2)

    def generate(self, params: Mapping[str, Any], seed: int) -> RunSpec:
        brokers, partitions = int(params["brokers"]), int(params["partitions"])
        consumers, rate = int(params["consumers"]), float(params["rate"])
        refuse_out_of_range(self.name, (
            ("brokers", brokers, brokers >= 2, ">= 2"),
            ("partitions", partitions, 1 <= partitions <= 1000, "1..1000"),
            ("consumers", consumers, 1 <= consumers <= partitions, "1..partitions"),
            ("events", params["events"], 0 <= int(params["events"]) <= 100, "0..100"),
            ("rate", rate, 1 <= rate <= 5000, "1..5000 records/s"),
            ("session_ms", params["session_ms"], int(params["session_ms"]) >= 500, ">= 500"),
            ("gap", params["gap"], 0 <= float(params["gap"]) <= 60, "0..60 s"),
        ))  # fmt: skip
        rng = random.Random(seed)
        live, broken = consumers, 0
        events = []
        for _ in range(int(params["events"])):
            choices = [
                a
                for a in ACTIONS
                if (a != "join" or live < partitions)
                and (a != "crash" or live > 1)
                and (
                    a != "broker-failure"
                    or (bool(params["broker_failures"]) and broken < brokers - 2)
                )
            ]
            action = rng.choice(choices)
            live += {"join": 1, "crash": -1}.get(action, 0)
            broken += action == "broker-failure"
            events.append(ClientEvent(action, rng.randrange(1 << 16)))
        return RunSpec(
            client="",
            assignor="",
            brokers=brokers,
            partitions=partitions,
            replication_factor=2,
            consumers=consumers,
            rate=rate,
            session_ms=int(params["session_ms"]),
            gap=float(params["gap"]),
            events=tuple(events),
        )

    def simulate(
        self,
        params: Mapping[str, Any],
        seed: int,
        strategy: str,
        manager: PluginManager | None = None,
    ) -> Iterator[ClientStep]:
        parts = parse_strategy(strategy, manager)
        require_client(parts.client)
        if parts.broker == "kafka":
            require_kafka("the real-clients strategies on Kafka")
        spec = self.generate({**self.defaults, **params}, seed)
        spec = attrs.evolve(
            spec,
            client=parts.client,
            assignor=parts.assignor,
            protocol=parts.protocol,
            broker=parts.broker,
            # coordkit's brokers offer every registered server assignor, Kafka's its own two.
            server_assignors=tuple((manager or get_plugin_manager()).server_assignor_names()),
        )
        # The whole run happens here, its processes gone before it returns: the runner's
        # lockstep never has two strategies' processes running at once.
        return iter(run_clients(spec, strategy))


# -- metrics -------------------------------------------------------------------------------------

ClientMetric = functools.partial(FunctionMetric, kinds=(CLIENTS_KIND,), step_type=ClientStep)


def _after_event(value: Callable[[ClientStep], float]) -> Callable[[ClientStep], float | None]:
    return lambda step: value(step) if step.index else None


CLIENT_METRICS = (
    ClientMetric(
        "clients-rebalance-seconds",
        "seconds from the event until every partition had a consuming owner again",
        "s",
        "lower",
        _after_event(lambda s: s.rebalance_seconds),
        headline="Which client and assignor restore consumption fastest?",
    ),
    ClientMetric(
        "clients-disruption-seconds",
        "seconds from the first partition losing its consuming owner to the last getting one "
        "again (the rebalance itself: a join without the new process's start-up)",
        "s",
        "lower",
        _after_event(lambda s: s.disruption_seconds),
    ),
    ClientMetric(
        "clients-unowned-partition-seconds",
        "partition-seconds without a consuming owner after the event",
        "partition-seconds",
        "lower",
        _after_event(lambda s: s.unowned_seconds),
        tradeoff="interruption",
    ),
    ClientMetric(
        "revocations",
        "partitions taken from a consumer in the window (its revoked and lost callbacks: eager "
        "revokes every member's partitions, cooperative and the consumer protocol only those "
        "that move; a consumer leaving gives up its own)",
        "partitions",
        "lower",
        lambda s: float(s.revocations),
        headline="Which client and assignor revoke fewest partitions?",
    ),
    ClientMetric(
        "records-consumed-twice",
        "records delivered again in the window (read but not committed when their partition moved)",
        "records",
        "lower",
        lambda s: float(s.consumed_twice),
        headline="Which client and assignor deliver fewest records twice?",
    ),
    ClientMetric(
        "records-lost",
        "acknowledged records sent in the window that no consumer ever received (must be 0)",
        "records",
        "lower",
        lambda s: float(s.lost),
    ),
    ClientMetric(
        "latency-p50-ms",
        "median milliseconds from send to first receipt, records sent in the window",
        "ms",
        "lower",
        lambda s: s.latency_ms(0.5),
    ),
    ClientMetric(
        "latency-p99-ms",
        "99th-percentile milliseconds from send to first receipt, records sent in the window",
        "ms",
        "lower",
        lambda s: s.latency_ms(0.99),
        headline="Which client and assignor keep tail latency lowest through rebalances?",
    ),
)

REAL_CLIENTS = RealClientsWorkload()
