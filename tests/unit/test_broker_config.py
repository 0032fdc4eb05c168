"""``coordkit serve --config KEY=VALUE``: Kafka's broker config names, types and defaults, into
the engine's and the server's settings; a bad word refused in one line naming it."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from coordkit.cli import cli
from coordkit.engine import EngineConfig
from coordkit.serve.broker_config import CONFIGS, BrokerConfigError, parse_broker_configs


def test_kafkas_defaults_reach_the_engine_and_the_server() -> None:
    configs = parse_broker_configs([])
    engine = configs.engine_config(EngineConfig(placement="balanced"))
    assert (engine.group_min_session_timeout, engine.group_max_session_timeout) == (6.0, 1800.0)
    assert engine.placement == "balanced"  # what the base held and no config names stays
    assert engine.offline_election == "offline"
    settings = configs.serve_settings()
    assert settings.auto_create_topics is False
    assert settings.max_request_bytes == 104_857_600


def test_values_are_converted_into_the_settings_units() -> None:
    configs = parse_broker_configs([
        "group.min.session.timeout.ms=250", "replica.lag.time.max.ms=1500",
        "unclean.leader.election.enable=TRUE", "auto.create.topics.enable=true",
        "num.partitions=4", "num.partitions=6",  # the last one wins, as in a properties file
    ])  # fmt: skip
    engine = configs.engine_config()
    assert engine.group_min_session_timeout == 0.25
    assert engine.replica_lag_time_max == 1.5
    assert engine.offline_election == "offline-unclean"
    settings = configs.serve_settings()
    assert (settings.auto_create_topics, settings.default_partitions) == (True, 6)


@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("nope.such.config=1", "--config nope.such.config: not a broker config"),
        ("group.min.session.timeout.ms", "expected KEY=VALUE"),
        ("=5", "expected KEY=VALUE"),
        ("group.min.session.timeout.ms=6s", "'6s' is not an integer (int)"),
        ("group.min.session.timeout.ms=0", "0 is below the minimum of 1"),
        ("group.max.session.timeout.ms=99999999999", "out of range for a int"),
        ("offsets.topic.replication.factor=40000", "out of range for a short"),
        ("delete.topic.enable=yes", "'yes' is not a boolean"),
        ("group.min.session.timeout.ms=9000000", "above group.max.session.timeout.ms=1800000"),
    ],
)
def test_a_bad_word_is_refused_naming_it(word: str, message: str) -> None:
    with pytest.raises(BrokerConfigError, match=re.escape(message)):
        parse_broker_configs([word])


def test_every_config_default_passes_its_own_check() -> None:
    for key in CONFIGS.values():
        if key.default is not None:  # null: left to the next synonym (log.retention.ms)
            assert key.parse(key.default_text) == key.default, key.name


def test_the_command_line_refuses_a_bad_config_in_one_line_with_status_2() -> None:
    result = CliRunner().invoke(
        cli, ["serve", "--port", "0", "--config", "group.max.session.timeout.ms=x"]
    )
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == ["error: --config group.max.session.timeout.ms=x: 'x' is not an integer (int)"]


def test_help_configs_lists_every_config_with_its_default() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help-configs"])
    assert result.exit_code == 0
    for key in CONFIGS.values():
        assert f"{key.name} ({key.type}, default {key.default_text})" in result.output


def test_the_consumer_groups_assignors_are_a_list_of_names_or_kafkas_classes() -> None:
    configs = parse_broker_configs(
        [
            "group.consumer.assignors=org.apache.kafka.coordinator.group.assignor.RangeAssignor,"
            " rack-aware ,range",
            "group.consumer.assignment.interval.ms=0",
        ]
    )
    config = configs.engine_config()
    # Kafka's class names stand for coordkit's names; a name given twice counts once.
    assert config.consumer_group_assignors == ("range", "rack-aware")
    assert config.consumer_group_assignment_interval == 0.0
    with pytest.raises(BrokerConfigError, match=r"group.consumer.assignors= ,: an empty list"):
        parse_broker_configs(["group.consumer.assignors= ,"])


def test_an_unknown_server_assignor_is_refused_before_any_broker_starts() -> None:
    result = CliRunner().invoke(
        cli, ["serve", "--port", "0", "--config", "group.consumer.assignors=uniform,nope"]
    )
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(
        "error: --config group.consumer.assignors: unknown server assignor 'nope'"
    )
