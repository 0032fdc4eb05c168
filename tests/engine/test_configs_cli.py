"""``coordkit configs`` (kafka-configs.sh's layout) on every backend given with ``--backend``: the
nodes it writes are Kafka 3.9's (``{"version":1,"config":{...}}`` and a ``config_change_N``
naming the entity), ``--describe`` prints Kafka's lines, and refused input is one ``error:`` line
naming the option and the config, exit status 2, the store unchanged."""

from __future__ import annotations

import pytest
from click.testing import CliRunner, Result

from coordkit.cli import cli
from coordkit.kafka import layout
from coordkit.kafka.model import TopicAssignment, TopicConfig
from coordkit.store import MetadataStore
from harness.backends import Backend
from harness.cli import one_error_line, snapshot


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def store(backend: Backend, store_url: str) -> MetadataStore:
    """A topic ``orders`` written in Kafka's layout (no brokers needed)."""
    client = backend.open(store_url)
    client.create(
        layout.topic_path("orders"),
        layout.TOPIC.encode(TopicAssignment(partitions={0: (1,)})),
        make_parents=True,
    )
    client.create(layout.topic_config_path("orders"),
                  layout.TOPIC_CONFIG.encode(TopicConfig(config={"retention.ms": "1000"})),
                  make_parents=True)  # fmt: skip
    return client


def _changes(store: MetadataStore) -> list[bytes]:
    names = sorted(store.children(layout.CONFIG_CHANGES))
    return [store.get(f"{layout.CONFIG_CHANGES}/{n}")[0] for n in names]


def test_alter_and_describe_topic_and_broker_configs(store: MetadataStore, store_url: str) -> None:
    base = ("configs", "--store", store_url)
    result = invoke(*base, "--entity-type", "topics", "--entity-name", "orders", "--alter",
                    "--add-config", "cleanup.policy=[compact,delete],segment.ms=60000",
                    "--delete-config", "retention.ms")  # fmt: skip
    assert (result.exit_code, result.output) == (0, "Completed updating config for topic orders.\n")
    assert store.get("/config/topics/orders")[0] == (
        b'{"version":1,"config":{"cleanup.policy":"compact,delete","segment.ms":"60000"}}'
    )
    assert _changes(store)[-1] == b'{"version":2,"entity_path":"topics/orders"}'
    result = invoke(*base, "--entity-type", "topics", "--entity-name", "orders", "--describe")
    assert result.output.splitlines() == [
        "Dynamic configs for topic orders are:",
        "  cleanup.policy=compact,delete sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete}",
        "  segment.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.ms=60000}",
    ]

    assert invoke(*base, "--entity-type", "brokers", "--entity-default", "--alter",
                  "--add-config", "log.retention.ms=5000").exit_code == 0  # fmt: skip
    assert invoke(*base, "--entity-type", "brokers", "--entity-name", "1", "--alter",
                  "--add-config", "log.retention.ms=7000").exit_code == 0  # fmt: skip
    assert store.get("/config/brokers/<default>")[0] == (
        b'{"version":1,"config":{"log.retention.ms":"5000"}}'
    )
    assert _changes(store)[-2:] == [
        b'{"version":2,"entity_path":"brokers/<default>"}',
        b'{"version":2,"entity_path":"brokers/1"}',
    ]
    result = invoke(*base, "--entity-type", "brokers", "--entity-name", "1", "--describe")
    assert result.output.splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  log.retention.ms=7000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.ms=7000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000}",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("topics", "--entity-name", "orders", "--alter", "--add-config", "no.such=1"),
         "--add-config no.such: Unknown topic config name: no.such"),
        (("topics", "--entity-name", "orders", "--alter", "--add-config", "retention.ms=abc"),
         "--add-config retention.ms: Invalid value abc for configuration retention.ms: Not a "
         "number of type LONG"),
        (("topics", "--entity-name", "nosuch", "--alter", "--add-config", "retention.ms=1"),
         "--entity-name nosuch: The topic 'nosuch' does not exist."),
        (("brokers", "--entity-name", "1", "--alter", "--add-config", "log.retention.hours=1"),
         "--add-config log.retention.hours: Cannot update this config dynamically (Kafka reads "
         "it at the start)"),
        (("brokers", "--entity-name", "x", "--describe"),
         "--entity-name 'x': a broker id is a non-negative integer"),
        (("topics", "--entity-default", "--describe"),
         "--entity-default: only brokers have cluster-wide defaults"),
        (("topics", "--entity-name", "orders", "--alter", "--add-config", "retention.ms"),
         "--add-config 'retention.ms': every config to add is key=value"),
        (("topics", "--entity-name", "orders", "--alter"),
         "--alter needs --add-config or --delete-config"),
    ],
)  # fmt: skip
def test_refusals_write_nothing(
    store: MetadataStore, store_url: str, args: tuple[str, ...], message: str
) -> None:
    before = snapshot(store)
    result = invoke("configs", "--store", store_url, "--entity-type", *args)
    assert result.exit_code == 2
    assert one_error_line(result) == f"error: {message}"
    assert snapshot(store) == before
