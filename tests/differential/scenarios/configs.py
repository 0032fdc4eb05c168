"""Scenarios of the config apis (issue #35 item 1): DescribeConfigs, IncrementalAlterConfigs and
AlterConfigs on topics and brokers.

A topic's description is all of Kafka's topic configs with values, sources, synonyms, types and
flags; refusals are compared with their messages. Kafka 4.4 applies an alter through its
controller and its brokers learn of it a little later, so a describe after an alter is repeated
until the value changed shows (on both sides alike). Broker-wide changes (``--entity-default``)
are undone before the scenario ends: the clusters are shared by every scenario. Versions: the
highest both sides serve (DescribeConfigs 4, IncrementalAlterConfigs 1, AlterConfigs 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coordkit.protocol import messages
from coordkit.testing.waiting import wait_for
from differential.harness import WAIT_SECONDS, Side, scenario
from differential.scenarios.consumer_groups import CONSUMER_GROUPS, Member, create_topics

DESCRIBE = 4
INCREMENTAL = 1
ALTER = 2
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
VERSIONS = {"DescribeConfigs": DESCRIBE}
ALTERING = {"DescribeConfigs": DESCRIBE, "IncrementalAlterConfigs": INCREMENTAL}


def describe(side: Side, resource_type: int, name: str, keys: Sequence[str] | None = None,
             *, synonyms: bool = True, documentation: bool = False) -> Any:  # fmt: skip
    Request: Any = messages.DescribeConfigsRequest
    request = Request(resources=[Request.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name,
        configuration_keys=None if keys is None else list(keys))],
        include_synonyms=synonyms, include_documentation=documentation)  # fmt: skip
    return side.call(0, request, DESCRIBE)


def incremental(
    side: Side,
    resource_type: int,
    name: str,
    configs: Sequence[tuple[str, int, str | None]],
    validate_only: bool = False,
) -> Any:
    Request: Any = messages.IncrementalAlterConfigsRequest
    Resource = Request.AlterConfigsResource
    request = Request(resources=[Resource(resource_type=resource_type, resource_name=name,
        configs=[Resource.AlterableConfig(name=n, config_operation=op, value=v)
                 for n, op, v in configs])], validate_only=validate_only)  # fmt: skip
    return side.call(0, request, INCREMENTAL)


def _value(side: Side, resource_type: int, name: str, config: str) -> str | None:
    found = describe(side, resource_type, name, [config]).results[0].configs
    return found[0].value if found else None


def settled(side: Side, resource_type: int, name: str, config: str, value: str | None) -> None:
    """Wait until broker 0 describes ``config`` of ``name`` with ``value``."""
    wait_for(lambda: _value(side, resource_type, name, config) == value, WAIT_SECONDS,
             f"{side.name}: {config}={value} described")  # fmt: skip


@scenario("configs.describe_topic", versions=VERSIONS)
def describe_topic(side: Side) -> list[Any]:
    """A new topic described with synonyms: Kafka 4.4's topic configs, each with its value,
    source (the broker's ``log.retention.ms=-1`` is STATIC_BROKER_CONFIG), synonyms, type and
    flags."""
    name = side.topic()
    side.create_topic(name)
    return [describe(side, TOPIC, name)]


@scenario("configs.describe_topic_keys_with_documentation", versions=VERSIONS)
def describe_topic_keys_with_documentation(side: Side) -> list[Any]:
    """Only the keys asked for (one Kafka does not know is left out), without synonyms, with
    documentation."""
    name = side.topic()
    side.create_topic(name)
    keys = ["cleanup.policy", "no.such.config", "max.message.bytes"]
    return [describe(side, TOPIC, name, keys, synonyms=False, documentation=True)]


@scenario("configs.describe_missing_topic", versions=VERSIONS)
def describe_missing_topic(side: Side) -> list[Any]:
    """A topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION, no configs."""
    return [describe(side, TOPIC, side.topic("missing"))]


@scenario("configs.describe_other_broker", versions=VERSIONS, compare_messages=True)
def describe_other_broker(side: Side) -> list[Any]:
    """A broker resource naming another broker than the one asked: INVALID_REQUEST with
    Kafka's message naming both ids (broker ids normalised)."""
    other = str(side.broker_id(1))
    answer = describe(side, BROKER, other)
    result = answer.results[0]
    result.error_message = (
        (result.error_message or "")
        .replace(other, "OTHER")
        .replace(str(side.broker_id(0)), "ASKED")
    )
    result.resource_name = "OTHER"
    return [answer]


@scenario("configs.incremental_set_append_then_delete", versions=ALTERING)
def incremental_set_append_then_delete(side: Side) -> list[Any]:
    """SET ``retention.ms`` and APPEND ``compact`` to ``cleanup.policy`` (from its default
    ``delete``); both described as TOPIC_CONFIG with synonyms; then DELETE and SUBTRACT bring
    the defaults back."""
    name = side.topic()
    side.create_topic(name)
    keys = ["retention.ms", "cleanup.policy"]
    first = incremental(side, TOPIC, name, [("retention.ms", SET, "5000"),
                                           ("cleanup.policy", APPEND, "compact")])  # fmt: skip
    settled(side, TOPIC, name, "retention.ms", "5000")
    set_ = describe(side, TOPIC, name, keys)
    second = incremental(side, TOPIC, name, [("retention.ms", DELETE, None),
                                            ("cleanup.policy", SUBTRACT, "compact")])  # fmt: skip
    settled(side, TOPIC, name, "retention.ms", "-1")
    return [first, set_, second, describe(side, TOPIC, name, keys)]


@scenario("configs.incremental_validate_only", versions=ALTERING)
def incremental_validate_only(side: Side) -> list[Any]:
    """``validate_only``: accepted, nothing changed (``segment.ms`` still the default)."""
    name = side.topic()
    side.create_topic(name)
    answer = incremental(side, TOPIC, name, [("segment.ms", SET, "100000")], validate_only=True)
    return [answer, describe(side, TOPIC, name, ["segment.ms"])]


@scenario("configs.incremental_refusals", versions=ALTERING, compare_messages=True)
def incremental_refusals(side: Side) -> list[Any]:
    """Refused whole, Kafka's codes and messages: an unknown name, a value that does not parse,
    one outside its validator (``cleanup.policy``, ``max.message.bytes``,
    ``min.insync.replicas``), SUBTRACT from a config that is no list, a name twice, a missing
    topic; the topic's configs unchanged."""
    name = side.topic()
    side.create_topic(name)
    cases: list[list[tuple[str, int, str | None]]] = [
        [("no.such", SET, "1")],
        [("retention.ms", SET, "abc")],
        [("segment.ms", SET, "100000"), ("cleanup.policy", SET, "foo")],
        [("max.message.bytes", SET, "-5")],
        [("min.insync.replicas", SET, "0")],
        [("retention.ms", SUBTRACT, "1")],
        [("retention.ms", SET, "1"), ("retention.ms", SET, "2")],
    ]
    answers = [incremental(side, TOPIC, name, configs) for configs in cases]
    missing = side.topic("missing")
    answers.append(incremental(side, TOPIC, missing, [("retention.ms", SET, "5")]))
    answers[-1].responses[0].resource_name = "MISSING"
    answers[-1].responses[0].error_message = (
        answers[-1].responses[0].error_message.replace(missing, "MISSING")
    )
    return [*answers, describe(side, TOPIC, name, ["segment.ms", "retention.ms"])]


@scenario("configs.incremental_broker_read_only", versions=ALTERING, compare_messages=True)
def incremental_broker_read_only(side: Side) -> list[Any]:
    """A broker config Kafka reads only at its start (``log.retention.hours``) for the
    cluster-wide defaults: INVALID_REQUEST naming it."""
    return [incremental(side, BROKER, "", [("log.retention.hours", SET, "1")])]


@scenario("configs.cluster_default_broker_config", versions=ALTERING)
def cluster_default_broker_config(side: Side) -> list[Any]:
    """``log.cleaner.min.cleanable.ratio`` set for the whole cluster: the cluster-wide resource
    lists it (DYNAMIC_DEFAULT_BROKER_CONFIG), and a topic's ``min.cleanable.dirty.ratio`` takes
    it; removed again."""
    name = side.topic()
    side.create_topic(name)
    ratio = "log.cleaner.min.cleanable.ratio"
    answers = [incremental(side, BROKER, "", [(ratio, SET, "0.6")])]
    try:
        settled(side, TOPIC, name, "min.cleanable.dirty.ratio", "0.6")
        answers.append(describe(side, BROKER, "", [ratio]))
        answers.append(describe(side, TOPIC, name, ["min.cleanable.dirty.ratio"]))
    finally:
        answers.append(incremental(side, BROKER, "", [(ratio, DELETE, None)]))
        settled(side, TOPIC, name, "min.cleanable.dirty.ratio", "0.5")
    return answers


@scenario("configs.alter_configs_replaces", versions={**VERSIONS, "AlterConfigs": ALTER})
def alter_configs_replaces(side: Side) -> list[Any]:
    """The legacy AlterConfigs replaces every override: after ``retention.bytes`` then
    ``segment.ms``, only ``segment.ms`` is the topic's."""
    name = side.topic()
    side.create_topic(name)
    Request: Any = messages.AlterConfigsRequest
    Resource = Request.AlterConfigsResource

    def alter(config: str, value: str) -> Any:
        request = Request(resources=[Resource(resource_type=TOPIC, resource_name=name,
            configs=[Resource.AlterableConfig(name=config, value=value)])],
            validate_only=False)  # fmt: skip
        return side.call(0, request, ALTER)

    first = alter("retention.bytes", "100000")
    settled(side, TOPIC, name, "retention.bytes", "100000")
    second = alter("segment.ms", "100000")
    settled(side, TOPIC, name, "segment.ms", "100000")
    return [first, second, describe(side, TOPIC, name, ["retention.bytes", "segment.ms"])]


@scenario("configs.broker_logger_refusals", versions=ALTERING, compare_messages=True)
def broker_logger_refusals(side: Side) -> list[Any]:
    """BROKER_LOGGER: a level that is not log4j's, a logger that does not exist, the root
    logger's level removed, APPEND, another node's id (ids normalised), an empty broker name
    described, and a logger neither side has asked for by name (no configs): Kafka's codes and
    messages."""
    asked, other = str(side.broker_id(0)), str(side.broker_id(1))
    answers = [
        incremental(side, BROKER_LOGGER, asked, configs)
        for configs in (
            [("root", SET, "LOUD")],
            [("no.such.Logger", SET, "DEBUG")],
            [("root", DELETE, None)],
            [("root", APPEND, "DEBUG")],
        )
    ]
    answers.append(incremental(side, BROKER_LOGGER, other, [("root", SET, "INFO")]))
    answers.append(describe(side, BROKER_LOGGER, ""))
    answers.append(describe(side, BROKER_LOGGER, asked, ["no.such.Logger"]))
    for answer in answers:
        for result in getattr(answer, "responses", None) or answer.results:
            text = result.error_message or ""
            result.error_message = text.replace(other, "OTHER").replace(asked, "ASKED")
            result.resource_name = result.resource_name.replace(other, "OTHER").replace(
                asked, "ASKED"
            )
    return answers


# -- Kafka 4's GROUP and CLIENT_METRICS resources, ListConfigResources ----------------------------

CLIENT_METRICS, GROUP = 16, 32
LISTING = {"ListConfigResources": 1}


#: Kafka 4.4's group configs, asked by name: but for ``share.assignment.interval.ms``, whose
#: broker config only the Kafka cluster is given (``clusters.KAFKA_ONLY_CONFIGS``), as it is
#: ``group.consumer.assignor.offload.enable``, an internal one Kafka lists then.
GROUP_CONFIGS = (
    "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
    "consumer.assignment.interval.ms", "share.session.timeout.ms", "share.heartbeat.interval.ms",
    "share.record.lock.duration.ms", "share.delivery.count.limit",
    "share.partition.max.record.locks", "share.auto.offset.reset", "share.isolation.level",
    "share.renew.acknowledge.enable", "streams.session.timeout.ms",
    "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
    "streams.initial.rebalance.delay.ms", "streams.assignment.interval.ms",
    "streams.rack.aware.assignment.tags", "streams.assignor.name",
    "errors.deadletterqueue.topic.name", "errors.deadletterqueue.copy.record.enable",
)  # fmt: skip


@scenario("configs.describe_group", versions=VERSIONS)
def describe_group(side: Side) -> list[Any]:
    """A group with no configs of its own: Kafka 4.4's group configs, each the broker config
    it overrides (its value from where the broker has it, with its synonyms), with types and
    documentation, in Kafka's order; some keys only."""
    group = side.group()
    return [describe(side, GROUP, group, GROUP_CONFIGS, documentation=True),
            describe(side, GROUP, group, ["share.isolation.level", "no.such", "consumer."
                                          "heartbeat.interval.ms"], synonyms=False)]  # fmt: skip


@scenario("configs.group_set_then_delete", versions=ALTERING)
def group_set_then_delete(side: Side) -> list[Any]:
    """A group's ``consumer.session.timeout.ms`` (with spaces around), ``share.isolation.level``
    and a list set: GROUP_CONFIG, the broker's value as a synonym; deleted: the defaults."""
    group = side.group()
    keys = ["consumer.session.timeout.ms", "share.isolation.level",
            "streams.rack.aware.assignment.tags"]  # fmt: skip
    answers = [incremental(side, GROUP, group, [
        ("consumer.session.timeout.ms", SET, " 50000 "),
        ("share.isolation.level", SET, "read_committed"),
        ("streams.rack.aware.assignment.tags", SET, "a, b")])]  # fmt: skip
    settled(side, GROUP, group, "consumer.session.timeout.ms", "50000")
    answers.append(describe(side, GROUP, group, keys))
    answers.append(incremental(side, GROUP, group, [(k, DELETE, None) for k in keys]))
    settled(side, GROUP, group, "consumer.session.timeout.ms", "45000")
    answers.append(describe(side, GROUP, group, keys))
    return answers


@scenario("configs.group_refusals", versions=ALTERING, compare_messages=True)
def group_refusals(side: Side) -> list[Any]:
    """Group configs refused with Kafka 4.4's codes and messages: an unknown name, a value that
    does not parse, one under its validator's floor, one outside the broker's range (session,
    heartbeat, record lock), the heartbeat checked before the session, a bad reset strategy,
    isolation level, assignor, DLQ topic, duplicate tags, APPEND, a name twice, a null SET, the
    empty group altered and described; a good value with ``validate_only`` accepted and not
    stored."""
    group = side.group()
    cases: list[list[tuple[str, int, str | None]]] = [
        [("bogus", SET, "1")],
        [("consumer.session.timeout.ms", SET, "abc")],
        [("share.delivery.count.limit", SET, "1")],
        [("consumer.session.timeout.ms", SET, "1000")],
        [("consumer.heartbeat.interval.ms", SET, "60000")],
        [("share.record.lock.duration.ms", SET, "99999999")],
        [("consumer.session.timeout.ms", SET, "50000"),
         ("consumer.heartbeat.interval.ms", SET, "50000")],
        [("share.auto.offset.reset", SET, "bad")],
        [("share.isolation.level", SET, "bad")],
        [("streams.num.standby.replicas", SET, "99")],
        [("streams.assignor.name", SET, "nope")],
        [("errors.deadletterqueue.topic.name", SET, "__x")],
        [("streams.rack.aware.assignment.tags", SET, "a,a")],
        [("consumer.session.timeout.ms", APPEND, "5")],
        [("share.session.timeout.ms", SET, "45000"), ("share.session.timeout.ms", SET, "46000")],
        [("share.session.timeout.ms", SET, None)],
    ]  # fmt: skip
    answers = [incremental(side, GROUP, group, configs) for configs in cases]
    answers.append(incremental(side, GROUP, "", [("consumer.session.timeout.ms", SET, "50000")]))
    answers.append(describe(side, GROUP, ""))
    answers.append(incremental(side, GROUP, group, [("share.auto.offset.reset", SET,
                                                     "by_duration:PT1H")], validate_only=True))  # fmt: skip
    answers.append(describe(side, GROUP, group, ["share.auto.offset.reset"]))
    return answers


@scenario("configs.client_metrics", versions=ALTERING, compare_messages=True)
def client_metrics(side: Side) -> list[Any]:
    """A client-metrics subscription: described before it exists (the defaults, no synonyms),
    set (CLIENT_METRICS_CONFIG), refused (an unknown name, an interval out of range, a bad match,
    the empty name altered and described), then deleted."""
    name = side.group("sub")
    keys = ["interval.ms", "match", "metrics"]
    answers = [describe(side, CLIENT_METRICS, name, documentation=True)]
    answers.append(incremental(side, CLIENT_METRICS, name, [
        ("interval.ms", SET, "1000"), ("metrics", SET, "org.apache.kafka.producer."),
        ("match", SET, "client_id=abc")]))  # fmt: skip
    settled(side, CLIENT_METRICS, name, "interval.ms", "1000")
    answers.append(describe(side, CLIENT_METRICS, name))
    for configs in ([("bogus", SET, "1")], [("interval.ms", SET, "10")],
                    [("match", SET, "bogus=1")], [("match", SET, "client_id=[")]):  # fmt: skip
        answers.append(incremental(side, CLIENT_METRICS, name, configs))
    answers.append(incremental(side, CLIENT_METRICS, "", [("interval.ms", SET, "1000")]))
    answers.append(describe(side, CLIENT_METRICS, ""))
    answers.append(incremental(side, CLIENT_METRICS, name, [(k, DELETE, None) for k in keys]))
    settled(side, CLIENT_METRICS, name, "interval.ms", "300000")
    answers.append(describe(side, CLIENT_METRICS, name, keys))
    return answers


def list_resources(side: Side, types: Sequence[int] | None, version: int = 1) -> Any:
    """ListConfigResources, keeping the scenario's groups and subscriptions, the brokers
    (their ids as their positions) and no topic but the scenario's."""
    Request: Any = messages.ListConfigResourcesRequest
    request = Request() if types is None else Request(resource_types=list(types))
    answer = side.call(0, request, version)
    kept = []
    for resource in answer.config_resources:
        kind = getattr(resource, "resource_type", CLIENT_METRICS)
        if kind in (BROKER, BROKER_LOGGER):
            resource.resource_name = f"broker-{side.index_of(int(resource.resource_name))}"
        elif not resource.resource_name.startswith(side.prefix):
            continue
        kept.append(resource)
    answer.config_resources = sorted(kept, key=lambda r: (-r.resource_type, r.resource_name))
    return answer


@scenario("configs.list_config_resources", versions={**ALTERING, **LISTING})
def list_config_resources(side: Side) -> list[Any]:
    """ListConfigResources: a group with configs, a subscription, the brokers as BROKER and
    BROKER_LOGGER, a topic; every type at once; a type Kafka cannot list (UNSUPPORTED_VERSION)."""
    group, subscription, topic = side.group(), side.group("sub"), side.topic()
    side.create_topic(topic)
    incremental(side, GROUP, group, [("consumer.session.timeout.ms", SET, "50000")])
    incremental(side, CLIENT_METRICS, subscription, [("interval.ms", SET, "1000")])
    settled(side, GROUP, group, "consumer.session.timeout.ms", "50000")
    settled(side, CLIENT_METRICS, subscription, "interval.ms", "1000")
    wait_for(lambda: len(list_resources(side, [GROUP]).config_resources) == 1, WAIT_SECONDS,
             f"{side.name}: the group listed")  # fmt: skip
    answers = [list_resources(side, types)
               for types in ([GROUP], [CLIENT_METRICS], [BROKER, BROKER_LOGGER], [TOPIC], [],
                             [99])]  # fmt: skip
    incremental(side, GROUP, group, [("consumer.session.timeout.ms", DELETE, None)])
    incremental(side, CLIENT_METRICS, subscription, [("interval.ms", DELETE, None)])
    return answers


@scenario("configs.group_heartbeat_interval", versions={**ALTERING, **CONSUMER_GROUPS})
def group_heartbeat_interval(side: Side) -> list[Any]:
    """A consumer group's own ``consumer.heartbeat.interval.ms`` (8 s, the broker's 5 s) is
    the interval its members are given, from the next heartbeat; deleted: the broker's
    again."""
    name, group = side.topic(), side.group()
    create_topics(side, group, {name: 1})
    member = Member(side, group, [name])
    answers = [member.join()]
    answers.append(incremental(side, GROUP, group, [("consumer.heartbeat.interval.ms", SET,
                                                     "8000")]))  # fmt: skip
    settled(side, GROUP, group, "consumer.heartbeat.interval.ms", "8000")
    answers.append(wait_for(lambda: (a := member.send())["heartbeat_interval_ms"] == 8000 and a,
                            WAIT_SECONDS, f"{side.name}: the group's interval given"))  # fmt: skip
    answers.append(incremental(side, GROUP, group, [("consumer.heartbeat.interval.ms", DELETE,
                                                     None)]))  # fmt: skip
    answers.append(wait_for(lambda: (a := member.send())["heartbeat_interval_ms"] == 5000 and a,
                            WAIT_SECONDS, f"{side.name}: the broker's interval given"))  # fmt: skip
    return answers
